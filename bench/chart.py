#!/usr/bin/env python3
"""Draws bench_compare's results (results.json) as one PNG: throughput per scenario and
commit-to-ack latency per offered rate, one colour per contender.

    python3 bench/chart.py bench/results/results.json bench/results/bench.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {
    "pgoutbox": "#1f77b4",
    "pgoutbox exactly-once": "#2ca02c",
    "Debezium": "#ff7f0e",
    "Debezium tuned": "#9467bd",
    "polling relay": "#d62728",
    "pg_recvlogical": "#7f7f7f",
}


def grouped(ax, groups, series, value, width=0.8):
    names = [s for s in COLOURS if any(r["contender"] == s for r in series)]
    step = width / max(1, len(names))
    for i, name in enumerate(names):
        xs, ys = [], []
        for g, group in enumerate(groups):
            for r in series:
                if r["contender"] == name and r["_group"] == group:
                    xs.append(g - width / 2 + step * (i + 0.5))
                    ys.append(value(r))
        ax.bar(xs, ys, step, label=name, color=COLOURS[name])
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    ax.legend(loc="upper left")


def main(source, target):
    with open(source) as f:
        data = json.load(f)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 9))

    for r in data["throughput"]:
        r["_group"] = r["scenario"]
    scenarios = list(dict.fromkeys(r["scenario"] for r in data["throughput"]))
    grouped(top, scenarios, data["throughput"], lambda r: r["events_per_second"])
    top.set_title("Backlog drain, until a read_committed consumer saw every event (pg_recvlogical: decode only, the ceiling)")
    top.set_xlabel("events per transaction × payload")
    top.set_ylabel("events/s")

    for r in data["latency"]:
        r["_group"] = f'{r["offered"]:.0f} events/s'
    rates = list(dict.fromkeys(r["_group"] for r in data["latency"]))
    grouped(bottom, rates, data["latency"], lambda r: r["p99_ms"])
    bottom.set_title("Commit → visible to a read_committed consumer, at a fixed offered rate: bars p99, dots p50, crosses max")
    bottom.set_ylabel("ms (log scale)")
    bottom.set_yscale("log")
    bottom.axhline(50, color="black", linestyle=":", linewidth=1)
    bottom.annotate("exactly-once target: p99 ≤ 50 ms at 1,000 events/s", (0.5, 50), textcoords="offset points",
                    xytext=(0, 4), fontsize=8)
    names = [s for s in COLOURS if any(r["contender"] == s for r in data["latency"])]
    step = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        for g, group in enumerate(rates):
            for r in data["latency"]:
                if r["contender"] == name and r["_group"] == group:
                    x = g - 0.4 + step * (i + 0.5)
                    bottom.plot([x], [r["p50_ms"]], "o", color="black")
                    bottom.plot([x], [r["max_ms"]], "x", color="black")
    fig.tight_layout()
    fig.savefig(target, dpi=100)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: chart.py RESULTS_JSON OUTPUT_PNG")
    main(sys.argv[1], sys.argv[2])
