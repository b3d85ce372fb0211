#!/usr/bin/env python3
"""Draws bench_compare's results (results.json) into a directory: bench.png (throughput per
scenario and commit-to-visible latency per offered rate, one colour per contender) and one PNG
per scale curve (scale-payload.png, scale-transaction.png, scale-keys.png: events/s and relay
CPU per event as one dimension grows; rss-backlog.png: peak RSS against backlog size), and one
timeline per offered rate (timeline-1000.png, ...: each contender's worst commit-to-visible latency
per 100 ms window against the time into the run, so a periodic stall shows as a pattern).

    python3 bench/chart.py bench/results/results.json bench/results
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {
    "pgoutbox": "#1f77b4",
    "pgoutbox exactly-once": "#2ca02c",
    "pgoutbox messages": "#17becf",
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


CURVES = {
    "payload": ("payload bytes", "scale-payload.png", "as the payload grows (10-event transactions)"),
    "transaction": ("events per transaction", "scale-transaction.png", "as transactions grow (200 B events)"),
    "keys": ("distinct aggregate ids (keys)", "scale-keys.png", "as the number of keys grows (200 B, 10 per transaction)"),
}


def scale_curve(points, curve, target):
    label, _, title = CURVES[curve]
    xs = [p["x"] for p in points]
    fig, rate = plt.subplots(figsize=(8, 4.5))
    rate.plot(xs, [p["events_per_second"] for p in points], "o-", color=COLOURS["pgoutbox"], label="events/s")
    rate.plot(xs, [p["events_per_second_after_start"] for p in points], "o:", color=COLOURS["pgoutbox"],
              label="events/s after the first record")
    rate.set_xscale("log")
    rate.set_xlabel(label)
    rate.set_ylabel("events/s")
    rate.set_ylim(bottom=0)
    cpu = rate.twinx()
    cpu.plot(xs, [p["cpu_us_per_event"] for p in points], "s--", color="#d62728", label="relay CPU µs/event")
    cpu.set_ylabel("relay CPU µs per event")
    cpu.set_ylim(bottom=0)
    lines = rate.get_lines() + cpu.get_lines()
    rate.legend(lines, [line.get_label() for line in lines], loc="upper center")
    rate.set_title(f"pgoutbox draining a backlog {title}")
    fig.tight_layout()
    fig.savefig(target, dpi=100)
    plt.close(fig)


def rss_curve(points, target):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot([p["x"] for p in points], [p["peak_rss_mib"] for p in points], "o-", color=COLOURS["pgoutbox"])
    ax.set_xscale("log")
    ax.set_xlabel("backlog (events, 200 B, 10 per transaction)")
    ax.set_ylabel("peak RSS MiB")
    ax.set_ylim(0, 64)
    ax.axhline(64, color="black", linestyle=":", linewidth=1)
    ax.set_title("pgoutbox's peak RSS against the backlog it drains (target: flat, ≤ 64 MiB)")
    fig.tight_layout()
    fig.savefig(target, dpi=100)
    plt.close(fig)


def timeline(rows, offered, target):
    fig, ax = plt.subplots(figsize=(11, 5))
    for r in rows:
        points = r.get("timeline", [])
        if not points:
            continue
        colour = COLOURS.get(r["contender"].split(" (")[0], "#000000")
        style = "--" if "(baseline" in r["contender"] else "-"
        ax.plot([p[0] for p in points], [p[2] for p in points], style, color=colour, linewidth=1,
                label=f'{r["contender"]}: max per 100 ms')
        ax.plot([p[0] for p in points], [p[1] for p in points], ":", color=colour, linewidth=1)
    ax.set_yscale("log")
    ax.set_xlabel("seconds into the timed run (by commit time)")
    ax.set_ylabel("commit → visible, ms (log scale); dotted: median per 100 ms")
    ax.set_title(f"Latency over time at {offered:.0f} events/s offered")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(target, dpi=100)
    plt.close(fig)


def main(source, out_dir):
    with open(source) as f:
        data = json.load(f)
    for curve, (_, name, _) in CURVES.items():
        points = [p for p in data.get("scale", []) if p["curve"] == curve]
        if points:
            scale_curve(points, curve, os.path.join(out_dir, name))
    backlog = [p for p in data.get("scale", []) if p["curve"] == "backlog"]
    if backlog:
        rss_curve(backlog, os.path.join(out_dir, "rss-backlog.png"))
    for offered in dict.fromkeys(r["offered"] for r in data["latency"]):
        rows = [r for r in data["latency"] if r["offered"] == offered]
        timeline(rows, offered, os.path.join(out_dir, f"timeline-{offered:.0f}.png"))
    target = os.path.join(out_dir, "bench.png")
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
        sys.exit("usage: chart.py RESULTS_JSON OUTPUT_DIR")
    main(sys.argv[1], sys.argv[2])
