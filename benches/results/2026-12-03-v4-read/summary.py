#!/usr/bin/env python3
"""Medians and ratios of run.sh invocations: summary.py DIR... (each DIR has rates.tsv).

Per invocation: the median ops/s of each (workload, server, version) over its rounds,
then the bar's ratios from those medians; the last columns give the range of each
ratio over the invocations (their spread)."""
import statistics
import sys
from collections import defaultdict


def medians(path, column):
    """{(workload, server, version): median of `column` (ops_per_s, cpu_us_per_op)}."""
    rates = defaultdict(list)
    with open(path) as f:
        head = next(f).rstrip("\n").split("\t")
        for line in f:
            row = dict(zip(head, line.rstrip("\n").split("\t")))
            if row[column] != "NA" and row["failed"] == "0":
                rates[(row["work"], row["server"], row["version"])].append(float(row[column]))
    return {k: statistics.median(v) for k, v in rates.items()}


def ratios(m):
    out = []
    for v in ["4", "4.1", "4.2"]:
        name = "4.0" if v == "4" else v
        get = lambda w, s, ver: m.get((w, s, ver))
        pairs = [
            (f"read v{name}: rustnfs / rustnfs v3 (bar >= 0.9)", get("read", "rustnfs", v), get("read", "rustnfs", "3")),
            (f"read v{name}: rustnfs / Ganesha v{name} (bar >= 1.2)", get("read", "rustnfs", v), get("read", "ganesha", v)),
            (f"metadata v{name}: rustnfs / Ganesha v{name} (bar >= 1.1)", get("metadata", "rustnfs", v), get("metadata", "ganesha", v)),
            (f"read v{name}, copy path (main's v4): / rustnfs v3", get("read", "copy", v), get("read", "rustnfs", "3")),
            (f"read v{name}: sendfile tail / copy path", get("read", "rustnfs", v), get("read", "copy", v)),
        ]
        for label, a, b in pairs:
            out.append((label, a / b if a and b else None))
    return out


def table(title, dirs, all_m, fmt):
    keys = sorted(set().union(*all_m))
    print(f"## {title}\n")
    print("| workload | server | version | " + " | ".join(dirs) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in dirs) + " |")
    for k in keys:
        vals = [fmt(m[k]) if k in m else "-" for m in all_m]
        print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(vals) + " |")
    print()


def ratio_table(title, dirs, all_m, invert):
    """Ratios of the medians per invocation and their spread; `invert` for CPU per
    operation, where less is better (the ratio printed is then b / a: how many times
    more operations per CPU second)."""
    print(f"## {title}\n")
    print("| ratio | " + " | ".join(dirs) + " | spread |")
    print("| --- | " + " | ".join("---" for _ in dirs) + " | --- |")
    rows = [ratios({k: (1 / v if invert else v) for k, v in m.items()}) for m in all_m]
    for i, (label, _) in enumerate(rows[0]):
        vals = [r[i][1] for r in rows]
        shown = [f"{v:.2f}" if v else "-" for v in vals]
        got = [v for v in vals if v]
        spread = f"{min(got):.2f}–{max(got):.2f}" if got else "-"
        print(f"| {label} | " + " | ".join(shown) + f" | {spread} |")
    print()


dirs = sys.argv[1:]
ops = [medians(f"{d}/rates.tsv", "ops_per_s") for d in dirs]
table("Median ops/s per invocation", dirs, ops, lambda v: f"{v:.0f}")
ratio_table("Throughput ratios (of the medians), per invocation and their spread", dirs, ops, False)
# CPU times only from invocations where every run has one: in a and b run.sh's awk summed
# the run times as a 32-bit integer, which saturated after 2.1 s (0 from round 2 on); it
# prints a float since.
timed = [d for d in dirs if "\t0.0\t" not in open(f"{d}/rates.tsv").read()]
cpu = [medians(f"{d}/rates.tsv", "cpu_us_per_op") for d in timed]
if timed:
    table("Median server CPU per operation (µs) per invocation", timed, cpu, lambda v: f"{v:.0f}")
    ratio_table("Operations per server CPU second, ratios (of the medians)", timed, cpu, True)
