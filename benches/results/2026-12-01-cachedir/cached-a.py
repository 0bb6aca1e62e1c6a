#!/usr/bin/env python3
"""Issue 11 §4: B (--root) vs A cached with memfd copies vs A cached with O_TMPFILE copies
(--nfs-data-cache-dir), three httpds side by side against one rustnfs on loopback.

Each round runs `servelab load URL -n 100 -c 10 --no-keepalive` once per variant, the
order rotated every round. Per run: req/s, httpd CPU (utime+stime from /proc) per
response, load average before and after. Usage: cached-a.py TARGET_RELEASE_DIR ROUNDS OUT
"""
import os, re, socket, subprocess, sys, tempfile, time, statistics

bins, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tmp = tempfile.mkdtemp(prefix="cachedir-bench-")  # /tmp: ext4 here
www = os.path.join(tmp, "www"); os.mkdir(www)
with open(os.path.join(www, "testfile.bin"), "wb") as f:
    f.write(os.urandom(10 << 20))
old = time.time() - 60
os.utime(os.path.join(www, "testfile.bin"), (old, old))
copies = os.path.join(tmp, "copies"); os.mkdir(copies)
fs = subprocess.run(["stat", "-f", "-c", "%T", copies], capture_output=True, text=True).stdout.strip()

procs = []
def start(args, log):
    p = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    procs.append(p)
    return p

def free_port():
    # Other people's servers run on this machine: never assume a fixed port is ours.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

nfs_port = free_port()
nfs = start([f"{bins}/rustnfs", "--export", www, "--listen", f"127.0.0.1:{nfs_port}"], f"{tmp}/rustnfs.log")
time.sleep(0.5)
url = f"nfs://127.0.0.1:{nfs_port}/"
variants = {
    "B": ["--root", www],
    "A-memfd": ["--nfs", url, "--nfs-data-cache", "256M"],
    "A-dir": ["--nfs", url, "--nfs-data-cache", "256M", "--nfs-data-cache-dir", copies],
}
ports = {name: free_port() for name in variants}
servers = {}
for name, args in variants.items():
    servers[name] = start([f"{bins}/httpd", "--listen", f"127.0.0.1:{ports[name]}"] + args,
                          f"{tmp}/httpd-{name}.log")
time.sleep(1)
for p in procs:
    if p.poll() is not None:
        sys.exit(f"{p.args} exited: see {tmp}")

def cpu_ticks(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])

def load():
    return float(open("/proc/loadavg").read().split()[0])

def run(name):
    url = f"http://127.0.0.1:{ports[name]}/testfile.bin"
    c0 = cpu_ticks(servers[name].pid)
    r = subprocess.run([f"{bins}/servelab", "load", url, "-n", "100", "-c", "10", "--no-keepalive"],
                       capture_output=True, text=True)
    c1 = cpu_ticks(servers[name].pid)
    m = re.search(r"Requests per second:\s+([\d.]+)", r.stdout)
    failed = re.search(r"Failed requests:\s+(\d+)", r.stdout)
    if not m or (failed and failed.group(1) != "0"):
        sys.exit(f"{name}: load failed:\n{r.stdout}\n{r.stderr}")
    hz = os.sysconf("SC_CLK_TCK")
    return float(m.group(1)), (c1 - c0) * 1000.0 / hz / 100

with open(out, "w") as o:
    o.write(f"# copies dir {copies} on {fs}; kernel {os.uname().release}\n")
    o.write("round variant req_per_s httpd_cpu_ms_per_response load_before load_after\n")
    for name in variants:  # warm-up: fills the caches, page cache of the dataset
        run(name)
    names = list(variants)
    results = {n: [] for n in names}
    for rnd in range(rounds):
        order = names[rnd % 3:] + names[:rnd % 3]
        for name in order:
            lb = load()
            rps, cpu = run(name)
            la = load()
            results[name].append((rnd, rps, cpu))
            line = f"{rnd} {name} {rps:.1f} {cpu:.2f} {lb:.2f} {la:.2f}"
            print(line, flush=True)
            o.write(line + "\n")
    o.write("# summary: median req/s, median httpd CPU ms/response, median per-round ratio vs B\n")
    b = {r: rps for r, rps, _ in results["B"]}
    for name in names:
        rps = statistics.median(x[1] for x in results[name])
        cpu = statistics.median(x[2] for x in results[name])
        ratio = statistics.median(x[1] / b[x[0]] for x in results[name])
        line = f"# {name}: {rps:.1f} req/s, {cpu:.2f} ms CPU/response, {ratio:.3f} x B"
        print(line); o.write(line + "\n")
for p in procs:
    p.terminate()
for p in procs:
    p.wait()
for name in ("A-memfd", "A-dir"):
    print(name, "log tail:", open(f"{tmp}/httpd-{name}.log").read()[-600:].replace("\n", " | "))
subprocess.run(["rm", "-rf", tmp])
