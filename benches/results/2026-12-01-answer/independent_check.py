#!/usr/bin/env python3
"""Independent check of `servelab compare`'s headline: A's CPU per request against B's.

Runs `servelab compare ARGS...` itself, finds the serving processes compare started
(httpd --root for B; httpd --nfs without a data cache and the shared rustnfs for A) by
their command lines, and reads their utime + stime from /proc/PID/stat every time compare
announces a run on stderr ("run i/N large SCENARIO"). The CPU used between one
announcement and the next is charged to the announced slot (our load generator and the
reference client in that slot: the same number of requests for every slot of the large
workload, so the ratio does not depend on it). No code of servelab's is used for the
measurement; the script then prints its ratio beside the one in report.json.

Usage: independent_check.py /path/to/servelab compare --results DIR [more compare args]
"""

import json
import os
import re
import subprocess
import sys

TICKS = os.sysconf("SC_CLK_TCK")
RUN = re.compile(r"servelab compare: run \d+/\d+\s+(\w+) (.+)$")


def children(pid):
    """Every descendant of pid: {pid: argv}."""
    parents = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = open(f"/proc/{d}/stat").read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parents[int(d)] = ppid
        except (OSError, IndexError, ValueError):
            pass
    out, todo = {}, [pid]
    while todo:
        p = todo.pop()
        for c, pp in parents.items():
            if pp == p and c not in out:
                try:
                    argv = open(f"/proc/{c}/cmdline", "rb").read().split(b"\0")
                except OSError:
                    continue
                out[c] = [a.decode(errors="replace") for a in argv if a]
                todo.append(c)
    return out


def cpu_ticks(pid):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])  # utime, stime (fields 14, 15)
    except (OSError, IndexError, ValueError):
        return None


def role(argv):
    if len(argv) < 2:
        return None
    if argv[1] == "httpd" and "--root" in argv:
        return "B httpd"
    if argv[1] == "httpd" and "--nfs" in argv and "--nfs-data-cache" not in argv:
        url = argv[argv.index("--nfs") + 1]
        if "mountport" not in url:
            return "A httpd"
    if argv[1] == "rustnfs":
        return "rustnfs"
    return None


def main():
    cmd = sys.argv[1:]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    roles = {}  # pid -> role
    totals = {"B (local)": 0, "A (NFS: rustnfs)": 0}
    slots = {"B (local)": 0, "A (NFS: rustnfs)": 0}
    current = None  # (scenario, {pid: ticks at start})
    for line in proc.stderr:
        sys.stderr.write(line)
        if not line.startswith("servelab compare: "):
            continue
        # Close the slot that was running.
        if current is not None:
            scen, start = current
            for pid, t0 in start.items():
                t1 = cpu_ticks(pid)
                if t1 is not None and t0 is not None:
                    totals[scen] += t1 - t0
            current = None
        m = RUN.match(line.strip())
        if not m or m.group(1) != "large" or m.group(2) not in totals:
            continue
        for pid, argv in children(proc.pid).items():
            r = role(argv)
            if r and pid not in roles:
                roles[pid] = r
        scen = m.group(2)
        want = ["B httpd"] if scen == "B (local)" else ["A httpd", "rustnfs"]
        pids = [p for p, r in roles.items() if r in want]
        current = (scen, {p: cpu_ticks(p) for p in pids})
        slots[scen] += 1
    proc.wait()
    if proc.returncode != 0:
        sys.exit(f"compare failed with {proc.returncode}")
    results = cmd[cmd.index("--results") + 1]
    run_dir = sorted(
        (os.path.join(results, d) for d in os.listdir(results)),
        key=os.path.getmtime,
    )[-1]
    report = json.load(open(os.path.join(run_dir, "report.json")))
    ratio = next(
        r["cpu_per_request"]
        for r in report["answer"]["ratios"]
        if r["workload"] == "large" and r["scenario"] == "A (NFS: rustnfs)"
    )
    per_slot = {s: totals[s] / TICKS / max(slots[s], 1) for s in totals}
    independent = per_slot["A (NFS: rustnfs)"] / per_slot["B (local)"]
    print(f"processes: {json.dumps({str(p): r for p, r in sorted(roles.items())})}")
    print(
        f"independent (/proc/PID/stat per slot, ours + reference client): "
        f"A {per_slot['A (NFS: rustnfs)']:.3f} s, B {per_slot['B (local)']:.3f} s per slot "
        f"over {slots['A (NFS: rustnfs)']} and {slots['B (local)']} slots -> A/B {independent:.2f}"
    )
    print(
        f"compare's answer: A/B {ratio['estimate']:.2f} "
        f"(95 % CI {ratio['ci']['low']:.2f}-{ratio['ci']['high']:.2f})"
    )
    diff = (ratio["estimate"] / independent - 1) * 100
    print(f"difference: {diff:+.1f} % ({'within' if abs(diff) <= 25 else 'OUTSIDE'} ±25 %)")
    print(f"report: {run_dir}")


if __name__ == "__main__":
    main()
