#!/usr/bin/env python3
"""Regenerates the committed seed corpora from real traffic (run from the repo root
after `cargo build -p rustnfs -p httpd`; needs libnfs-utils):

- nfsclient_reply/: every reply record rustnfs sent to libnfs (`nfs-ls`, `nfs-cat`,
  `nfs-cp`) through a recording proxy, each prefixed with the fuzz target's call
  selector for its procedure;
- httpd_request/ and loadgen_response/: real requests sent to the httpd binary, and
  the exact bytes it answered (prefixed with four read-size bytes);
- httpd_headers/: paths, Range and If-None-Match values from those requests;
- httpd_differential/: the same requests, and plain keep-alive GET/HEADs of the fuzz
  targets' own tree (fuzz_targets/httpd_tree.rs) that the fast path answers, pipelined.
"""
import os, socket, struct, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("SERVELAB_BIN", "target/debug")

# Selector = index in nfsclient::fuzzing::Call::ALL (high bit clear: xid patched in).
NFS_CALLS = {19: 1, 1: 2, 3: 3, 5: 4, 6: 5, 7: 6, 8: 7, 9: 8, 12: 9, 13: 10, 17: 11, 16: 12}
MOUNT_MNT = 0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port):
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


def records(buf):
    """Splits complete RPC records (single or multi-fragment) off the front of buf."""
    out = []
    while True:
        pos, body = 0, b""
        while True:
            if len(buf) < pos + 4:
                return out, buf
            h = struct.unpack(">I", buf[pos:pos + 4])[0]
            n = h & 0x7FFFFFFF
            if len(buf) < pos + 4 + n:
                return out, buf
            body += buf[pos + 4:pos + 4 + n]
            pos += 4 + n
            if h & 0x80000000:
                break
        out.append((buf[:pos], body))
        buf = buf[pos:]


class Recorder:
    def __init__(self):
        self.calls = {}  # xid -> (prog, proc)
        self.replies = []  # (selector, raw record)
        self.lock = threading.Lock()


def pump(src, dst, rec, to_server):
    buf = b""
    while True:
        try:
            data = src.recv(65536)
        except OSError:
            data = b""
        if not data:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            return
        dst.sendall(data)
        buf += data
        done, buf = records(buf)
        with rec.lock:
            for raw, body in done:
                xid = struct.unpack(">I", body[:4])[0]
                if to_server and len(body) >= 24:
                    prog, _, proc = struct.unpack(">III", body[12:24])
                    rec.calls[xid] = (prog, proc)
                elif not to_server and xid in rec.calls:
                    prog, proc = rec.calls[xid]
                    if prog == 100005 and proc == 1:
                        rec.replies.append((MOUNT_MNT, raw))
                    elif prog == 100003 and proc in NFS_CALLS:
                        rec.replies.append((NFS_CALLS[proc], raw))


def proxy(listen, upstream, rec):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", listen))
    srv.listen(16)
    while True:
        c, _ = srv.accept()
        u = socket.create_connection(("127.0.0.1", upstream))
        threading.Thread(target=pump, args=(c, u, rec, True), daemon=True).start()
        threading.Thread(target=pump, args=(u, c, rec, False), daemon=True).start()


def write_seeds(name, items):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    seen = set()
    for label, data in items:
        if data in seen:
            continue
        seen.add(data)
        with open(os.path.join(d, f"{len(seen):03}-{label}"), "wb") as f:
            f.write(data)
    print(f"{name}: {len(seen)} seeds")


def tree(d):
    os.makedirs(os.path.join(d, "dir/sub"))
    open(os.path.join(d, "hello.txt"), "wb").write(b"hello, world\n")
    open(os.path.join(d, "dir/index.html"), "wb").write(b"<p>index</p>\n")
    open(os.path.join(d, "big.bin"), "wb").write(bytes(i % 251 for i in range(200_000)))
    os.symlink("hello.txt", os.path.join(d, "link"))


def nfs(tmp):
    export = os.path.join(tmp, "export")
    tree(export)
    port, pport = free_port(), free_port()
    nfsd = subprocess.Popen([f"{BIN}/rustnfs", "--export", export, "--listen",
                             f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        rec = Recorder()
        threading.Thread(target=proxy, args=(pport, port, rec), daemon=True).start()
        wait_port(pport)
        url = lambda p: f"nfs://127.0.0.1/{'/' + p if p else ''}?nfsport={pport}&mountport={pport}&uid=0&gid=0"
        run = lambda *a: subprocess.run(a, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        timeout=20)
        run("nfs-ls", "-R", url(""))
        run("nfs-cat", url("hello.txt"))
        run("nfs-cat", url("big.bin"))
        run("nfs-cat", url("link"))
        run("nfs-cat", url("missing"))
        src = os.path.join(tmp, "upload.txt")
        open(src, "wb").write(b"uploaded\n")
        run("nfs-cp", src, url("new.txt"))
        time.sleep(0.3)
        with rec.lock:
            items = [(f"call{sel}", bytes([sel]) + raw) for sel, raw in rec.replies]
        # Large READ replies: keep the first of each size class only.
        items = [(l, d if len(d) < 70_000 else d[:4096]) for l, d in items]
        write_seeds("nfsclient_reply", items)
    finally:
        nfsd.kill()
        nfsd.wait()


REQUESTS = [
    b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n",
    b"HEAD /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n",
    b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\nRange: bytes=100-199\r\n\r\n",
    b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\nRange: bytes=-10\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: W/\"x\", \"y\"\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Tue, 01 Dec 2026 08:00:00 GMT\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nIf-Match: \"nope\"\r\n\r\n",
    b"GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0\r\nIf-Range: Tue, 01 Dec 2026 08:00:00 GMT\r\n\r\n",
    b"GET /dir HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /dir/ HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /dir/sub/ HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /%2e%2e/etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /link HTTP/1.0\r\n\r\n",
    b"POST /hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
]


# Requests the fast path takes (or declines by one field), for the tree of
# fuzz_targets/httpd_tree.rs.
FAST_REQUESTS = [
    b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a.txt HTTP/1.1\r\nHost: x\r\nUser-Agent: wrk\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n"
    b"HEAD /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /dir/index.html HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /in HTTP/1.1\r\nHost: x\r\n\r\nGET /out HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Unknown: 1\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /empty HTTP/1.1\r\nHost: x\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    b"GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"GET /a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1,3-4\r\n\r\n",
    b"GET /list/ HTTP/1.1\r\nHost: x\r\n\r\nGET /list/x%20y.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\n\r\n",
]


def http(tmp):
    root = os.path.join(tmp, "www")
    tree(root)
    port = free_port()
    httpd = subprocess.Popen([f"{BIN}/httpd", "--root", root, "--listen", f"127.0.0.1:{port}",
                              "--list"], stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        reqs, resps, heads = [], [], []
        for i, req in enumerate(REQUESTS):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(req)
            # No half-close: hyper drops the answers of a client that shuts down its
            # write side (half_close is off by default). Read until the server stops.
            s.settimeout(0.5)
            out = b""
            while True:
                try:
                    d = s.recv(65536)
                except socket.timeout:
                    break
                if not d:
                    break
                out += d
            s.close()
            reqs.append((f"req{i}", req))
            resps.append((f"resp{i}", b"\x00\x03\x10\xff" + out[:8192]))
            line = req.split(b"\r\n")[0].split(b" ")
            heads.append((f"path{i}", b"\x00" + line[1]))
            for h in req.split(b"\r\n"):
                if h.lower().startswith(b"range:"):
                    heads.append((f"range{i}", b"\x01" + struct.pack("<Q", 200_000) +
                                  h.split(b":", 1)[1].strip()))
                if h.lower().startswith(b"if-none-match:"):
                    heads.append((f"etag{i}", b"\x02" + struct.pack("<QQ", 0x5f000000, 4096) +
                                  h.split(b":", 1)[1].strip()))
        # A chunked response (httpd never chunks; other servers do).
        resps.append(("chunked", b"\x00\x01\x02\x03HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                      b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-T: 1\r\n\r\n"))
        resps.append(("continue", b"\x05\x05\x05\x05HTTP/1.1 100 Continue\r\n\r\n"
                      b"HTTP/1.1 204 No Content\r\n\r\n"))
        write_seeds("httpd_request", reqs)
        write_seeds("httpd_differential",
                    reqs + [(f"fast{i}", r) for i, r in enumerate(FAST_REQUESTS)])
        write_seeds("loadgen_response", resps)
        write_seeds("httpd_headers", heads)
    finally:
        httpd.kill()
        httpd.wait()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        nfs(tmp)
        http(tmp)
