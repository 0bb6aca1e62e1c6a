#!/usr/bin/env python3
"""Issue 31 §5: N clients writing 1 MiB FILE_SYNC blocks beside one client reading 10 MiB.

Usage: writers.py BINARY [N] [SECONDS] [PROBES]

Starts BINARY (rustnfs) on a free port exporting a fresh directory that holds a 10 MiB
`victim.bin` and an empty `written`, then N writer threads (from 127.0.0.2) spread over
WRITER_PROCS processes (default 8, so no one interpreter lock paces them and the victim,
in the parent, waits for no writer's lock), each on its own connection sending WRITE (offset 0, 1 MiB, FILE_SYNC) after WRITE for SECONDS. Once
they run, PROBES victim reads (a fresh connection from 127.0.0.1: MOUNT, LOOKUP, ten 1 MiB
READs) are made one after another with a pause between them. Prints each victim time,
their median/min/max, and the writers' aggregate rate (WRITEs answered per second over
the measured window) — one line of key=value at the end for the README's table.
"""
import os, socket, struct, subprocess, sys, tempfile, threading, time

def rec(body):
    return struct.pack(">I", 0x80000000 | len(body)) + body

def opaque(b):
    return struct.pack(">I", len(b)) + b + b"\0" * ((4 - len(b) % 4) % 4)

CRED = struct.pack(">I", 1) + opaque(
    struct.pack(">I", 0) + opaque(b"writers") + struct.pack(">III", 0, 0, 0))

def call(xid, prog, proc, args):
    return rec(struct.pack(">IIIIII", xid, 0, 2, prog, 3, proc) + CRED
               + struct.pack(">II", 0, 0) + args)

def read_record(s):
    out = b""
    while True:
        mark = recv_exact(s, 4)
        (m,) = struct.unpack(">I", mark)
        out += recv_exact(s, m & 0x7FFFFFFF)
        if m & 0x80000000:
            return out

def recv_exact(s, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(view[got:])
        if k == 0:
            raise EOFError("connection closed")
        got += k
    return bytes(buf)

def body(reply):
    # xid, REPLY, MSG_ACCEPTED, verifier (flavor, opaque), accept status
    xid, mtype, stat, vfl, vlen = struct.unpack(">IIIII", reply[:20])
    pos = 20 + ((vlen + 3) // 4) * 4
    (acc,) = struct.unpack(">I", reply[pos:pos + 4])
    assert stat == 0 and acc == 0, f"call refused: {stat} {acc}"
    return reply[pos + 4:]

def rpc(s, xid, prog, proc, args):
    s.sendall(call(xid, prog, proc, args))
    return body(read_record(s))

def take_opaque(b, pos):
    (n,) = struct.unpack(">I", b[pos:pos + 4])
    return b[pos + 4:pos + 4 + n], pos + 4 + ((n + 3) // 4) * 4

def mount_lookup(s, name):
    b = rpc(s, 1, 100005, 1, opaque(b"/"))
    assert struct.unpack(">I", b[:4])[0] == 0, "MNT"
    root, _ = take_opaque(b, 4)
    b = rpc(s, 2, 100003, 3, opaque(root) + opaque(name))
    assert struct.unpack(">I", b[:4])[0] == 0, "LOOKUP"
    fh, _ = take_opaque(b, 4)
    return fh

def victim(port, want):
    t = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(30)
    steps = [time.monotonic() - t]
    fh = mount_lookup(s, b"victim.bin")
    steps.append(time.monotonic() - t)
    got = bytearray()
    off = 0
    while off < want:
        b = rpc(s, 10 + off // (1 << 20), 100003, 6,
                opaque(fh) + struct.pack(">QI", off, 1 << 20))
        assert struct.unpack(">I", b[:4])[0] == 0, "READ"
        pos = 8 + 84 if struct.unpack(">I", b[4:8])[0] else 8
        pos += 8  # count, eof
        data, _ = take_opaque(b, pos)
        got += data
        off += len(data)
        steps.append(time.monotonic() - t)
        if not data:
            break
    s.close()
    if os.environ.get("STEPS"):
        marks = " ".join(f"{(b - a) * 1000:.0f}" for a, b in zip([0.0] + steps, steps))
        print(f"  steps ms (connect, mount+lookup, each READ): {marks}", flush=True)
    return time.monotonic() - t, len(got) == want

def writer(port, fh, stop, counts, i, started):
    try:
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(60)
    except OSError:
        return
    data = b"\xab" * (1 << 20)
    msg = call(0x5150, 100003, 7, opaque(fh) + struct.pack(">QII", 0, len(data), 2) + opaque(data))
    started.release()
    try:
        while not stop.is_set():
            s.sendall(msg)
            read_record(s)
            counts[i].append(time.monotonic())
    except (OSError, EOFError):
        pass
    s.close()

def writer_process(port, fh, n, stop, out):
    """n writer threads in one process (so no single interpreter's lock paces them all);
    sends back every answered WRITE's time."""
    threading.stack_size(256 << 10)
    counts = [[] for _ in range(n)]
    started = threading.Semaphore(0)
    threads = [threading.Thread(target=writer, args=(port, fh, stop, counts, i, started), daemon=True)
               for i in range(n)]
    for t in threads:
        t.start()
    for _ in range(n):
        started.acquire(timeout=30)
    out.put(("started", n))
    stop.wait()
    for t in threads:
        t.join(timeout=5)
    out.put(("times", [x for c in counts for x in c]))

def main():
    import multiprocessing as mp
    binary = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 12
    probes = int(sys.argv[4]) if len(sys.argv) > 4 else 9
    procs = int(os.environ.get("WRITER_PROCS", "8"))
    d = tempfile.mkdtemp(prefix="h31-writers-")
    with open(os.path.join(d, "victim.bin"), "wb") as f:
        f.write(os.urandom(10 << 20))
    open(os.path.join(d, "written"), "wb").close()
    probe = socket.socket(); probe.bind(("127.0.0.1", 0)); port = probe.getsockname()[1]; probe.close()
    env = dict(os.environ, RUST_LOG="warn", NO_ROOT_SQUASH="true")
    extra = os.environ.get("SERVER_ARGS", "").split()
    srv = subprocess.Popen([binary, "--export", d, "--listen", f"127.0.0.1:{port}"] + extra,
                           env=env, stdout=subprocess.DEVNULL, stderr=sys.stderr)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port)).close(); break
            except OSError:
                time.sleep(0.05)
        quiet = sorted(victim(port, 10 << 20)[0] for _ in range(3))
        s = socket.create_connection(("127.0.0.1", port))
        wfh = mount_lookup(s, b"written"); s.close()
        stop = mp.Event()
        out = mp.Queue()
        workers = [mp.Process(target=writer_process,
                              args=(port, wfh, n // procs + (1 if i < n % procs else 0), stop, out))
                   for i in range(procs)]
        for w in workers:
            w.start()
        for _ in workers:
            out.get(timeout=60)
        time.sleep(1.0)
        t0 = time.monotonic()
        times = []
        gap = max(0.0, (seconds - 1.0) / probes - 0.3)
        for _ in range(probes):
            took, exact = victim(port, 10 << 20)
            times.append(took)
            print(f"victim {took*1000:.0f} ms{'' if exact else ' NOT EXACT'}", flush=True)
            time.sleep(gap)
        t1 = time.monotonic()
        stop.set()
        done = []
        for _ in workers:
            kind, v = out.get(timeout=60)
            done.extend(v)
        for w in workers:
            w.join(timeout=10)
        rate = sum(1 for x in done if t0 <= x <= t1) / (t1 - t0)
        times.sort()
        med = times[len(times) // 2]
        print(f"n={n} quiet_ms={quiet[0]*1000:.0f} victim_med_ms={med*1000:.0f} "
              f"victim_min_ms={times[0]*1000:.0f} victim_max_ms={times[-1]*1000:.0f} "
              f"over_300ms={sum(1 for x in times if x > 0.3)}/{len(times)} "
              f"writes_per_s={rate:.0f} window_s={t1-t0:.1f}", flush=True)
        if os.environ.get("METRICS_URL"):
            import urllib.request
            with urllib.request.urlopen(os.environ["METRICS_URL"]) as r, \
                    open(os.environ.get("METRICS_OUT", "/tmp/h31-metrics.txt"), "wb") as f:
                f.write(r.read())
    finally:
        srv.kill(); srv.wait()
        subprocess.run(["rm", "-rf", d])

if __name__ == "__main__":
    main()
