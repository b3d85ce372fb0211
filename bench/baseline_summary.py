#!/usr/bin/env python3
"""Pools the "This build against the baseline" tables of several `scripts/bench.sh --baseline REV`
runs (each DIR an --out-dir holding a RESULTS.md): per baseline, scenario and contender every
run's events/s and the median difference; then per baseline and contender the geometric mean of
this build / baseline over all scenarios and runs, with a bootstrap 95% interval. On a shared
machine one run's difference is mostly noise; a run against the same commit as this build (an
A/A run) shows how much.

    python3 bench/baseline_summary.py [--leave-out "1 × 200 B"] build/bench-runs/run*/

--leave-out keeps a scenario out of the pooled means (still listed): the first scenario of a run
has this build first every time, and its order weighs more than the build (see bench/RESULTS.md).
"""
import math
import os
import random
import re
import statistics
import sys
from collections import defaultdict


def number(cell):
    return float(cell) if re.fullmatch(r"[0-9.]+", cell) else float("nan")


def read(dirs):
    rows, runs = defaultdict(list), defaultdict(list)
    for directory in dirs:
        path = directory.rstrip("/") + "/RESULTS.md"
        if not os.path.exists(path):  # a run that did not finish
            continue
        text = open(path).read()
        base = re.search(r"events/s, baseline (.+?) \| difference", text)
        if base is None:
            continue
        base = base.group(1)
        load = re.search(r"Load average \(1, 5, 15 min\): (\S+) .*? at the start, (\S+) .*? at the end", text)
        runs[base].append((directory.rstrip("/").split("/")[-1], load.group(1), load.group(2)))
        section = text.split("**This build against the baseline**")[1].split("**Targets")[0]
        for line in section.splitlines():
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            if len(c) != 11 or math.isnan(number(c[3])):
                continue
            rows[(base, c[0], c[2])].append(dict(now=number(c[3]), base=number(c[4]), now_after=number(c[6]),
                                                 base_after=number(c[7]), cpu_now=number(c[9]), cpu_base=number(c[10])))
    return rows, runs


def geo(ratios):
    return math.exp(statistics.fmean(math.log(r) for r in ratios))


def pct(ratio):
    return f"{100 * (ratio - 1):+.1f}%"


def summary(ratios, n=4000):
    ratios = [r for r in ratios if r > 0 and not math.isnan(r)]
    if not ratios:
        return "—"
    rnd = random.Random(1)
    means = sorted(geo([rnd.choice(ratios) for _ in ratios]) for _ in range(n))
    return f"{pct(geo(ratios))} ({pct(means[int(0.025 * n)])} … {pct(means[int(0.975 * n)])})"


def main(args):
    leave_out = []
    while args and args[0] == "--leave-out":
        leave_out.append(args[1])
        args = args[2:]
    rows, runs = read(args)
    for base, its_runs in runs.items():
        print(f"\n#### Against {base}: {len(its_runs)} runs\n")
        print("Runs (1-minute load average at the start → the end): " +
              ", ".join(f"{r} ({a} → {b})" for r, a, b in its_runs) + ".\n")
        print(f"| events/txn × payload | contender | events/s, this build (each run) | events/s, {base} (each run) | "
              "difference (each run) | median difference | median difference after the first record | relay CPU "
              f"µs/event, this build / {base} (medians) |")
        print("|---|---|---|---|---|---|---|---|")
        for (b, scenario, contender), v in rows.items():
            if b != base:
                continue
            d = [x["now"] / x["base"] for x in v]
            after = [x["now_after"] / x["base_after"] for x in v if x["now_after"] > 0 and x["base_after"] > 0]
            print(f"| {scenario} | {contender} | {', '.join('%.0f' % x['now'] for x in v)} | "
                  f"{', '.join('%.0f' % x['base'] for x in v)} | {', '.join('%+.0f%%' % (100 * (r - 1)) for r in d)} | "
                  f"{pct(statistics.median(d))} | {pct(statistics.median(after)) if after else '—'} | "
                  f"{statistics.median(x['cpu_now'] for x in v):.1f} / {statistics.median(x['cpu_base'] for x in v):.1f} |")
        if leave_out:
            print(f"\nPooled without {', '.join(leave_out)}:")
        print(f"\n| contender | samples (scenarios × runs) | this build / {base}, events/s: geometric mean (95% "
              "interval) | same, events/s after the first record | same, relay CPU µs/event |")
        print("|---|---|---|---|---|")
        for contender in ["pgoutbox", "pgoutbox exactly-once", "both"]:
            v = [x for (b, s, c), xs in rows.items()
                 if b == base and s not in leave_out and contender in ("both", c) for x in xs]
            if not v:
                continue
            print(f"| {contender} | {len(v)} | {summary([x['now'] / x['base'] for x in v])} | "
                  f"{summary([x['now_after'] / x['base_after'] for x in v])} | "
                  f"{summary([x['cpu_now'] / x['cpu_base'] for x in v])} |")


if __name__ == "__main__":
    main(sys.argv[1:])
