#!/usr/bin/env python3
"""httpd --root (before and after) vs nginx vs h2o, side by side in one run (issue 23 §3).

Servers pinned to CPU 1, clients to CPU 0 (taskset); rounds interleaved with the order
rotated; per (server, client, size): req/s and server CPU per request from
/proc/PID/stat (utime + stime of every process of the server) before and after the run.
Writes one line per measurement to raw-<time>.txt and the medians to stdout.

usage: run.py HTTPD SERVELAB [ROUNDS] [SECONDS]
  HTTPD, SERVELAB: release binaries (target/release/httpd, target/release/servelab);
  HTTPD_BEFORE=path in the environment adds that httpd binary as "before";
  CLIENTS=wrk (or load) in the environment runs one client only.
"""
import atexit, os, re, statistics, subprocess, sys, tempfile, time

HTTPD, SERVELAB = sys.argv[1], sys.argv[2]
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
SECS = int(sys.argv[4]) if len(sys.argv) > 4 else 3
TICK = os.sysconf("SC_CLK_TCK")
SERVER_CPU, CLIENT_CPU = "1", "0"
CLIENTS = os.environ.get("CLIENTS", "wrk,load").split(",")

work = tempfile.mkdtemp(prefix="h2o-bench-")
www = os.path.join(work, "www")
os.makedirs(www)
os.chmod(work, 0o755)  # nginx's workers run as nobody
with open(os.path.join(www, "small.bin"), "wb") as f:
    f.write(os.urandom(4096))
with open(os.path.join(www, "large.bin"), "wb") as f:
    f.write(os.urandom(10 << 20))
# Older than the caches' one-second freshness rule, as in the other benchmarks.
old = time.time() - 60
for n in ("small.bin", "large.bin"):
    os.utime(os.path.join(www, n), (old, old))


STARTED = []


@atexit.register
def stop_all():
    for p in STARTED:
        p.terminate()


def start(name, argv, port):
    p = subprocess.Popen(["taskset", "-c", SERVER_CPU] + argv,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    STARTED.append(p)
    for _ in range(100):
        r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                            f"http://127.0.0.1:{port}/small.bin"], capture_output=True)
        if r.stdout == b"200":
            return p
        time.sleep(0.1)
    raise SystemExit(f"{name} did not start")


def tree(pid):
    """pid and all its descendants."""
    out = [pid]
    kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    for k in kids:
        out += tree(int(k))
    return out


def cpu_s(pid):
    total = 0
    for p in tree(pid):
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:
            pass
    return total / TICK


ports = {"httpd": 18301, "nginx": 18302, "h2o": 18303, "before": 18304}
conf = os.path.join(work, "nginx.conf")
open(conf, "w").write(
    f"worker_processes 2;\npid {work}/nginx.pid;\nerror_log {work}/nginx-error.log;\n"
    f"daemon off;\nevents {{ worker_connections 4096; }}\n"
    f"http {{ access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000000;\n"
    f"  types {{ application/octet-stream bin; }}\n"
    f"  server {{ listen 127.0.0.1:{ports['nginx']}; root {www}; }} }}\n")
h2o_conf = os.path.join(work, "h2o.conf")
open(h2o_conf, "w").write(
    f"listen:\n  host: 127.0.0.1\n  port: {ports['h2o']}\nnum-threads: 2\nuser: root\n"
    f"pid-file: {work}/h2o.pid\nerror-log: {work}/h2o-error.log\ncompress: OFF\n"
    f"hosts:\n  default:\n    paths:\n      /:\n        file.dir: {www}\n")
procs = {
    "httpd": start("httpd", [HTTPD, "--root", www, "--listen", f"127.0.0.1:{ports['httpd']}",
                             "--workers", "2"], ports["httpd"]),
    "nginx": start("nginx", ["nginx", "-c", conf, "-e", f"{work}/nginx-error.log"], ports["nginx"]),
    "h2o": start("h2o", ["h2o", "-c", h2o_conf], ports["h2o"]),
}
BEFORE = os.environ.get("HTTPD_BEFORE")
if BEFORE:
    procs["before"] = start("before", [BEFORE, "--root", www, "--listen",
                                       f"127.0.0.1:{ports['before']}", "--workers", "2"],
                            ports["before"])
versions = {
    "nginx": subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip(),
    "h2o": subprocess.run(["h2o", "--version"], capture_output=True, text=True).stdout.splitlines()[0],
}


def run_client(client, url):
    """(requests, req/s) from one client run."""
    if client == "wrk":
        out = subprocess.run(["taskset", "-c", CLIENT_CPU, "wrk", "-t1", "-c10", f"-d{SECS}s", url],
                             capture_output=True, text=True).stdout
        n = int(re.search(r"(\d+) requests in", out).group(1))
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
        return n, rps
    out = subprocess.run(["taskset", "-c", CLIENT_CPU, SERVELAB, "load", "-c", "10", "-t", "1",
                          "-z", f"{SECS}s", "--no-progress", url], capture_output=True, text=True)
    text = out.stdout + out.stderr
    rps = float(re.search(r"Requests per second:\s+([\d.,]+)", text).group(1).replace(",", ""))
    n = int(re.search(r"Complete requests:\s+([\d,]+)", text).group(1).replace(",", ""))
    return n, rps


stamp = time.strftime("%H%M%S")
raw = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"raw-{stamp}.txt"), "w")
raw.write(f"# {versions}  servers on CPU {SERVER_CPU}, clients on CPU {CLIENT_CPU}, {SECS} s runs\n")
raw.write(f"# uptime before: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}\n")
raw.write("# round server size client requests req_per_s server_cpu_us_per_req loadavg1\n")
results = {}
names = list(procs)
for rnd in range(ROUNDS):
    order = names[rnd % len(names):] + names[:rnd % len(names)]
    for size, path in (("4KiB", "/small.bin"), ("10MiB", "/large.bin")):
        for client in CLIENTS:
            for name in order:
                url = f"http://127.0.0.1:{ports[name]}{path}"
                before = cpu_s(procs[name].pid)
                n, rps = run_client(client, url)
                used = cpu_s(procs[name].pid) - before
                us = used / max(n, 1) * 1e6
                load = os.getloadavg()[0]
                line = f"{rnd} {name} {size} {client} {n} {rps:.1f} {us:.1f} {load:.2f}"
                print(line, flush=True)
                raw.write(line + "\n")
                raw.flush()
                results.setdefault((size, client, name), []).append((rps, us))
for p in procs.values():
    p.terminate()
raw.write(f"# uptime after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}\n")
raw.close()

others = [n for n in names if n not in ("nginx", "h2o")]
print("\n| size | client | server | req/s | / best peer | CPU µs/req | nginx req/s | h2o req/s | CPU µs/req nginx | h2o |")
print("|---|---|---|---|---|---|---|---|---|---|")
for size in ("4KiB", "10MiB"):
    for client in CLIENTS:
        med = {n: statistics.median(r for r, _ in results[(size, client, n)]) for n in names}
        cpu = {n: statistics.median(u for _, u in results[(size, client, n)]) for n in names}
        best = max(med["nginx"], med["h2o"])
        for n in others:
            print(f"| {size} | {client} | {n} | {med[n]:.0f} | {med[n] / best:.2f} | {cpu[n]:.1f} | "
                  f"{med['nginx']:.0f} | {med['h2o']:.0f} | {cpu['nginx']:.1f} | {cpu['h2o']:.1f} |")
