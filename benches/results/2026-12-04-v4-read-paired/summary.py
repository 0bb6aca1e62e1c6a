#!/usr/bin/env python3
"""Paired ratios of run.sh invocations: summary.py DIR... (each DIR has rates.tsv).

For every round, each bar's ratio is taken between that round's two runs (a few seconds
apart); per invocation the table gives the median of those per-round ratios and their
range, and the last column the median over all rounds of all invocations."""
import statistics
import sys
from collections import defaultdict

BARS = []
for v, name in [("4", "4.0"), ("4.1", "4.1"), ("4.2", "4.2")]:
    BARS += [
        (f"read v{name}: rustnfs / rustnfs v3", ("read", "rustnfs", v), ("read", "rustnfs", "3"), 0.9),
        (f"read v{name}: rustnfs / Ganesha v{name}", ("read", "rustnfs", v), ("read", "ganesha", v), 1.2),
        (f"metadata v{name}: rustnfs / Ganesha v{name}", ("metadata", "rustnfs", v), ("metadata", "ganesha", v), 1.1),
    ]


def rounds(path, column):
    """{round: {(work, server, version): value}} for runs without failures."""
    out = defaultdict(dict)
    with open(path) as f:
        head = next(f).rstrip("\n").split("\t")
        for line in f:
            row = dict(zip(head, line.rstrip("\n").split("\t")))
            if row[column] != "NA" and row["failed"] == "0":
                out[row["round"]][(row["work"], row["server"], row["version"])] = float(row[column])
    return out


def paired(rs, num, den):
    return [r[num] / r[den] for r in rs.values() if num in r and den in r and r[den] > 0]


def fmt(xs):
    if not xs:
        return "-"
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f}, n={len(xs)})"


dirs = sys.argv[1:]
per = {d: rounds(f"{d}/rates.tsv", "ops_per_s") for d in dirs}
cpu = {d: rounds(f"{d}/rates.tsv", "server_cpu_us_per_op") for d in dirs}
def ratio_table(title, data, with_bar):
    """One row per bar: each invocation's median paired ratio, then all rounds'."""
    print(title + "\n")
    bar_head, bar_rule = ("bar | ", "---: | ") if with_bar else ("", "")
    met_head, met_rule = (" met |", " --- |") if with_bar else ("", "")
    print(f"| ratio | {bar_head}" + " | ".join(dirs) + f" | all rounds |{met_head}")
    print(f"| --- | {bar_rule}" + " | ".join("---" for _ in dirs) + f" | --- |{met_rule}")
    for name, num, den, bar in BARS:
        cells = [fmt(paired(data[d], num, den)) for d in dirs]
        every = [x for d in dirs for x in paired(data[d], num, den)]
        bar_cell = f"≥ {bar} | " if with_bar else ""
        met = ""
        if with_bar:
            met = " - |" if not every else (" yes |" if statistics.median(every) >= bar else " no |")
        print(f"| {name} | {bar_cell}" + " | ".join(cells) + f" | {fmt(every)} |{met}")


ratio_table("## Throughput: median of the per-round ratios (range over rounds, rounds)", per, True)
ratio_table("\n## Server CPU per operation: median of the per-round ratios (lower is cheaper)", cpu, False)
print("\n## Medians per configuration (ops/s; server CPU µs per operation)\n")
print("| workload | server | version | " + " | ".join(f"{d} ops/s | {d} µs/op" for d in dirs) + " |")
print("| --- | --- | --- | " + " | ".join("---: | ---:" for _ in dirs) + " |")
keys = sorted({k for d in dirs for r in per[d].values() for k in r})
for k in keys:
    cells = []
    for d in dirs:
        o = [r[k] for r in per[d].values() if k in r]
        c = [r[k] for r in cpu[d].values() if k in r]
        cells.append(f"{statistics.median(o):.0f} | {statistics.median(c):.0f}" if o else "- | -")
    print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")
