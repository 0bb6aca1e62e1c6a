#!/usr/bin/env python3
"""httpd rows of issue 22 (availability under cheap attacks), release binaries as processes.

What it measures: whether one honest client (the "victim": a fresh TCP connection that
sends `GET /victim.bin HTTP/1.1`, Host: t, Connection: close, reads to EOF and checks the
10 MiB body byte for byte; time to last byte, 30 s timeout) is still served promptly while
cheap attackers hold connections to httpd, and what httpd's own memory (VmRSS from
/proc/PID/status) does during and after the attack.

Rows (each server -- httpd, and for the nfs backend a rustnfs exporting the same temp
dir -- is a fresh process per row/backend/N, pinned with `taskset -c 1`; the client side
runs on CPU 0; attackers bind 127.0.0.2..127.0.0.9, the victim connects from 127.0.0.1):
  1 idle-headers      N connections that send nothing, httpd --max-connections N
  2 idle-keepalive    N connections that send one HEAD, read the answer head, go quiet;
                      same cap
  3 idle-default-cap  10,000 idle-header connections from 8 addresses, default cap
  4 stalled-readers   nfs backend only (plain and --nfs-splice): N clients with
                      SO_RCVBUF 4096 that send GET /victim.bin and never read; victim at
                      0.5, 3 and 6 s after the last one sent its request; closed with
                      SO_LINGER 0 (reset)
  5 mem-flood         httpd --root RSS idle, with 10,000 idle connections, after; and with
                      5,000 connections that each made one keep-alive GET of a tiny file
N in 64, 256, 1000; origin "one" = all from 127.0.0.2, "several" = round robin over
127.0.0.2..9 (row 4: "4 addrs" = 127.0.0.2..5).

Quiet = min of 3 victim reads before the attack; goal = every victim read byte-exact and
the median victim time (3 reads during the attack) < max(1 s, 2*quiet + 0.5 s).
RSS idle = after the quiet reads; during = max seen (100 ms sampler) while the attack is
open; after = polled every 200 ms for up to 5 s after the attackers close, until within
16 MiB of idle (value reached and the time it took; ">5 s" if it did not get there).

Run (stdlib only; needs the release binaries built, does not build them):
  python3 benches/results/2026-12-03-availability/httpd_rows.py [--quick] [--out FILE]
      [--httpd PATH] [--rustnfs PATH]
  --quick: N = 64 only, and rows 3/5 with 1,000/500 connections instead of 10,000/5,000
  --out FILE: also write the Markdown table to FILE
For a real run hold the benchmark lock: flock /tmp/bench.lock python3 .../httpd_rows.py ...
"""
import argparse
import os
import resource
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
VICTIM_TIMEOUT = 30.0
MIB = 1 << 20
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)

PROCS = []  # every server process this script started


def log(*a):
    print(*a, flush=True)


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def mib(kib):
    return "-" if kib is None else f"{kib / 1024:.1f}"


def wait_port(port, proc, what, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port}")


def start(cmd, env_extra, logpath, what, port):
    env = dict(os.environ)
    env.update(env_extra)
    lf = open(logpath, "ab")
    p = subprocess.Popen(["taskset", "-c", "1"] + cmd, env=env, stdout=lf,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    lf.close()
    PROCS.append(p)
    wait_port(port, p, what)
    return p


def stop(p):
    if p is None or p.poll() is not None:
        return
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=3)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def stop_all():
    for p in PROCS:
        try:
            stop(p)
        except Exception:
            pass


class Servers:
    """httpd (and, for nfs, its rustnfs) for one measurement; a context manager."""

    def __init__(self, ctx, backend, extra=()):
        self.ctx, self.backend, self.extra = ctx, backend, list(extra)
        self.nfs = self.httpd = None

    def __enter__(self):
        try:
            if self.backend == "local":
                source = ["--root", self.ctx.root]
            else:
                nport = free_port()
                self.nfs = start([self.ctx.rustnfs, "--export", self.ctx.root,
                                  "--listen", f"127.0.0.1:{nport}"],
                                 {"NO_ROOT_SQUASH": "true"}, self.ctx.log("rustnfs"),
                                 "rustnfs", nport)
                source = ["--nfs", f"nfs://127.0.0.1:{nport}/"]
            self.port = free_port()
            self.httpd = start([self.ctx.httpd, "--listen", f"127.0.0.1:{self.port}",
                                "--workers", "2"] + source + self.extra, {},
                               self.ctx.log("httpd"), "httpd", self.port)
            self.pid = self.httpd.pid
            with open(f"/proc/{self.pid}/comm") as f:
                assert f.read().strip() == "httpd", "RSS pid is not httpd"
            return self
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, *a):
        stop(self.httpd)
        stop(self.nfs)
        return False


class Ctx:
    def __init__(self, args):
        self.httpd, self.rustnfs = args.httpd, args.rustnfs
        self.work = tempfile.mkdtemp(prefix="httpd-rows-")
        self.root = os.path.join(self.work, "www")
        os.makedirs(self.root)
        self.data = os.urandom(10 * MIB)
        vp = os.path.join(self.root, "victim.bin")
        with open(vp, "wb") as f:
            f.write(self.data)
        tp = os.path.join(self.root, "tiny.txt")
        with open(tp, "wb") as f:
            f.write(b"tiny\n" * 20)
        past = time.time() - 10
        for p in (vp, tp):
            os.utime(p, (past, past))

    def log(self, name):
        return os.path.join(self.work, name + ".log")


# ---------------------------------------------------------------- clients

VICTIM_REQ = b"GET /victim.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"


def victim(ctx, port):
    """(seconds or None on timeout, ok, note)"""
    t0 = time.monotonic()
    end = t0 + VICTIM_TIMEOUT
    buf = bytearray()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=VICTIM_TIMEOUT)
    except OSError as e:
        if time.monotonic() >= end - 0.01:
            return None, False, "timeout (connect)"
        return time.monotonic() - t0, False, f"connect: {e}"
    try:
        s.sendall(VICTIM_REQ)
        chunk = bytearray(1 << 20)
        view = memoryview(chunk)
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None, False, f"timeout ({len(buf)} bytes)"
            s.settimeout(left)
            try:
                n = s.recv_into(view)
            except socket.timeout:
                return None, False, f"timeout ({len(buf)} bytes)"
            except ConnectionResetError:
                return time.monotonic() - t0, False, f"reset after {len(buf)} bytes"
            if n == 0:
                break
            buf += view[:n]
        dt = time.monotonic() - t0
    finally:
        s.close()
    i = buf.find(b"\r\n\r\n")
    if i < 0:
        return dt, False, f"no head ({len(buf)} bytes)"
    status = bytes(buf[:buf.find(b"\r\n")])
    body = buf[i + 4:]
    if not status.startswith(b"HTTP/1.1 200"):
        return dt, False, status.decode(errors="replace")
    if body != ctx.data:
        return dt, False, f"body differs ({len(body)} bytes)"
    return dt, True, ""


def fmt_v(v):
    t, ok, note = v
    if t is None:
        return f"timeout({note})"
    return f"{t:.3f}s" + ("" if ok else f" BAD({note})")


def sock_from(addr, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    # Let connect() pick the port for the whole 4-tuple (TIME_WAIT of earlier rows on
    # the same source address would otherwise slow bind's search).
    s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
    s.bind((addr, 0))
    return s


def addrs_for(origin):
    return {"one": ["127.0.0.2"], "several": [f"127.0.0.{i}" for i in range(2, 10)],
            "4 addrs": [f"127.0.0.{i}" for i in range(2, 6)]}[origin]


def connect_many(port, n, origin, rcvbuf=None):
    addrs = addrs_for(origin)
    socks = []
    for i in range(n):
        s = sock_from(addrs[i % len(addrs)], rcvbuf)
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        socks.append(s)
    return socks


def read_head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            raise RuntimeError("closed before the answer head")
        buf += d
    return buf


def go_idle_after(socks, req, body_follows):
    """Sends `req` on every connection, then reads each answer (its head, and its body
    when `body_follows`): the connections are then idle keep-alive ones."""
    for s in socks:
        s.sendall(req)
    for s in socks:
        buf = read_head(s)
        assert buf.startswith(b"HTTP/1.1 200"), buf[:40]
        if not body_follows:
            continue
        i = buf.find(b"\r\n\r\n")
        clen = 0
        for line in buf[:i].split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                clen = int(v)
        body = buf[i + 4:]
        while len(body) < clen:
            d = s.recv(65536)
            if not d:
                raise RuntimeError("closed in the body")
            body += d


def close_all(socks, reset=False):
    for s in socks:
        try:
            if reset:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        except OSError:
            pass


class Sampler:
    """Max VmRSS of pid, sampled every 100 ms in a thread."""

    def __init__(self, pid):
        self.pid, self.max, self.stop_ev = pid, 0, threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop_ev.is_set():
            r = rss_kib(self.pid)
            if r:
                self.max = max(self.max, r)
            self.stop_ev.wait(0.1)

    def done(self):
        self.stop_ev.set()
        self.t.join()
        r = rss_kib(self.pid)
        if r:
            self.max = max(self.max, r)
        return self.max


def nfds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def rss_after(pid, idle_kib, extend=30.0):
    """Poll every 200 ms for up to 5 s until RSS is within 16 MiB of idle: (value, time,
    reached). If it did not get there, note httpd's open fds at 5 s and keep polling (for
    the report only) up to `extend` s: AFTER_EXTRA[-1] says when it got back, if it did."""
    t0 = time.monotonic()
    target = idle_kib + 16 * 1024
    while True:
        r = rss_kib(pid)
        dt = time.monotonic() - t0
        if r is not None and r <= target:
            AFTER_EXTRA.append("")
            return r, dt, True
        if dt >= 5.0:
            break
        time.sleep(0.2)
    fds = nfds(pid)
    later = None
    while time.monotonic() - t0 < extend:
        time.sleep(0.2)
        r2 = rss_kib(pid)
        if r2 is not None and r2 <= target:
            later = (time.monotonic() - t0, r2)
            break
    if later:
        extra = f"{fds} fds open at 5 s; within 16 MiB at {later[0]:.1f} s ({mib(later[1])} MiB)"
    else:
        extra = f"{fds} fds open at 5 s; still {mib(rss_kib(pid))} MiB at {extend:.0f} s"
    AFTER_EXTRA.append(extra)
    return r, dt, False


AFTER_EXTRA = []


# ---------------------------------------------------------------- rows

RESULTS = []


def quiet(ctx, port):
    vs = [victim(ctx, port) for _ in range(3)]
    ts = [v[0] for v in vs if v[0] is not None and v[1]]
    if len(ts) < 3:
        log(f"   quiet reads not all ok: {[fmt_v(v) for v in vs]}")
    return min(ts) if ts else None


def record(row, backend, n, origin, q, vs, idle, during, after, each=False, note=""):
    limit = max(1.0, 2 * q + 0.5) if q is not None else 1.0
    times = [v[0] if v[0] is not None else float("inf") for v in vs]
    med = statistics.median(times) if times else float("inf")
    exact = all(v[1] for v in vs)
    met = exact and med < limit
    r = dict(row=row, backend=backend, n=n, origin=origin, quiet=q, vs=vs, med=med,
             limit=limit, met=met, exact=exact, idle=idle, during=during, after=after,
             each=each, note=note, extra=AFTER_EXTRA[-1] if AFTER_EXTRA else "")
    RESULTS.append(r)
    a_kib, a_dt, a_ok = after
    log(f"== {row} {backend} N={n} {origin}: victim {[fmt_v(v) for v in vs]} "
        f"median {med:.3f}s quiet {q if q is None else round(q, 3)}s limit {limit:.3f}s "
        f"met={'yes' if met else 'NO'} | RSS MiB idle {mib(idle)} during {mib(during)} "
        f"after {mib(a_kib)} in {a_dt:.1f}s{'' if a_ok else ' (not back: ' + r['extra'] + ')'} {note}")


def row_idle(ctx, row, backend, n, origin, keepalive, cap=True, spacing=0.2):
    extra = ["--max-connections", str(n)] if cap else []
    with Servers(ctx, backend, extra) as sv:
        q = quiet(ctx, sv.port)
        idle = rss_kib(sv.pid)
        smp = Sampler(sv.pid)
        socks = []
        try:
            t0 = time.monotonic()
            socks = connect_many(sv.port, n, origin)
            if keepalive:
                go_idle_after(socks, b"HEAD /victim.bin HTTP/1.1\r\nHost: t\r\n\r\n", False)
            tc = time.monotonic() - t0
            time.sleep(0.3)
            vs = []
            for i in range(3):
                if i:
                    time.sleep(spacing)
                vs.append(victim(ctx, sv.port))
        finally:
            during = smp.done()
            close_all(socks)
        after = rss_after(sv.pid, idle)
        record(row, backend, n, origin, q, vs, idle, during, after,
               note=f"(attack set up in {tc:.2f}s)")


def row_stalled(ctx, variant, n, origin):
    extra = ["--nfs-splice"] if variant == "nfs-splice" else []
    with Servers(ctx, "nfs", extra) as sv:
        q = quiet(ctx, sv.port)
        idle = rss_kib(sv.pid)
        smp = Sampler(sv.pid)
        socks = []
        try:
            socks = connect_many(sv.port, n, origin, rcvbuf=4096)
            for s in socks:
                s.sendall(VICTIM_REQ.replace(b"Connection: close\r\n", b""))
            t0 = time.monotonic()
            vs = []
            for at in (0.5, 3.0, 6.0):
                d = t0 + at - time.monotonic()
                if d > 0:
                    time.sleep(d)
                vs.append(victim(ctx, sv.port))
        finally:
            during = smp.done()
            close_all(socks, reset=True)
        after = rss_after(sv.pid, idle)
        record("4 stalled-readers", variant, n, origin, q, vs, idle, during, after, each=True)


def row_memflood(ctx, kind, n):
    with Servers(ctx, "local") as sv:
        q = quiet(ctx, sv.port)
        idle = rss_kib(sv.pid)
        smp = Sampler(sv.pid)
        socks = []
        try:
            t0 = time.monotonic()
            socks = connect_many(sv.port, n, "several")
            if kind == "keepalive-tiny":
                go_idle_after(socks, b"GET /tiny.txt HTTP/1.1\r\nHost: t\r\n\r\n", True)
            tc = time.monotonic() - t0
            time.sleep(0.3)
            vs = [victim(ctx, sv.port)]
        finally:
            during = smp.done()
            close_all(socks)
        t_close = time.monotonic()
        after = rss_after(sv.pid, idle)
        if after[2]:
            time.sleep(max(0.0, t_close + 5.0 - time.monotonic()))
            at5 = rss_kib(sv.pid)
        else:
            at5 = after[0]  # the sample at 5 s
        record(f"5 mem-flood {kind}", "local", n, "several", q, vs, idle, during, after,
               note=f"(set up in {tc:.2f}s; RSS 5 s after close {mib(at5)} MiB)")


# ---------------------------------------------------------------- table

def table():
    out = ["| row | backend | N | origin | victim time (median; each) | quiet | limit | met? "
           "| httpd RSS idle | during (max) | after (reached, time) |",
           "|---|---|---:|---|---|---:|---:|---|---:|---:|---|"]
    for r in RESULTS:
        def one(v):
            t, ok, note = v
            if t is None:
                return "timeout"
            return f"{t:.3f}" + ("" if ok else f" BAD: {note}")
        med = "timeout" if r["med"] == float("inf") else f"{r['med']:.3f} s"
        if r["each"] or not r["exact"] or any(v[0] is None for v in r["vs"]):
            med += " (" + " / ".join(one(v) for v in r["vs"]) + ")"
        elif len(r["vs"]) > 1:
            med += f" (max {max(v[0] for v in r['vs']):.3f})"
        q = "-" if r["quiet"] is None else f"{r['quiet']:.3f} s"
        a_kib, a_dt, a_ok = r["after"]
        after = f"{mib(a_kib)} MiB in {a_dt:.1f} s" if a_ok else f"{mib(a_kib)} MiB, not back in 5 s ({r['extra']})"
        out.append(f"| {r['row']} | {r['backend']} | {r['n']} | {r['origin']} | {med} | {q} "
                   f"| {r['limit']:.3f} s | {'yes' if r['met'] else '**no**'} "
                   f"| {mib(r['idle'])} MiB | {mib(r['during'])} MiB | {after} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description="httpd rows of issue 22")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--httpd", default=os.path.join(REPO, "target/release/httpd"))
    ap.add_argument("--rustnfs", default=os.path.join(REPO, "target/release/rustnfs"))
    ap.add_argument("--only", help="comma-separated row numbers to run (1-5)")
    args = ap.parse_args()
    nofile = raise_nofile()
    os.sched_setaffinity(0, {0})
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    ctx = Ctx(args)
    ns = [64] if args.quick else [64, 256, 1000]
    big, big_ka = (1000, 500) if args.quick else (10000, 5000)
    only = set(args.only.split(",")) if args.only else set("12345")
    log(f"# httpd rows of issue 22; RLIMIT_NOFILE {nofile}; work dir {ctx.work}; "
        f"quick={args.quick}; started {time.strftime('%Y-%m-%d %H:%M:%S')}")
    started = time.monotonic()

    def guarded(f, *a):
        try:
            f(*a)
        except Exception as e:
            log(f"!! {f.__name__}{a[1:]} failed: {e!r}")

    try:
        for backend in ("local", "nfs"):
            for n in ns:
                for origin in ("one", "several"):
                    if "1" in only:
                        guarded(row_idle, ctx, "1 idle-headers", backend, n, origin, False)
                    if "2" in only:
                        guarded(row_idle, ctx, "2 idle-keepalive", backend, n, origin, True)
        if "3" in only:
            for backend in ("local", "nfs"):
                guarded(row_idle, ctx, "3 idle-default-cap", backend, big, "several", False,
                        False)
        if "4" in only:
            for variant in ("nfs", "nfs-splice"):
                for n in ns:
                    for origin in ("one", "4 addrs"):
                        guarded(row_stalled, ctx, variant, n, origin)
        if "5" in only:
            guarded(row_memflood, ctx, "idle", big)
            guarded(row_memflood, ctx, "keepalive-tiny", big_ka)
    finally:
        stop_all()
        shutil.rmtree(ctx.work, ignore_errors=True)
    t = table()
    log(f"\n# took {time.monotonic() - started:.0f} s\n")
    log(t)
    if args.out:
        with open(args.out, "w") as f:
            f.write(t + "\n")


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_all()
