import os, socket, threading, time, sys
data = open('/tmp/hp/www/large.bin','rb').read()
def mk_memfd():
    fd = os.memfd_create('x', os.MFD_CLOEXEC)
    os.write(fd, data); return fd
def bench(fd, n=60):
    srv = socket.socket(); srv.bind(('127.0.0.1',0)); srv.listen(1)
    c = socket.create_connection(srv.getsockname()); s,_ = srv.accept()
    def rd():
        buf = bytearray(1<<20); tot=0
        while tot < n*len(data):
            k = c.recv_into(buf); tot += k
    t = threading.Thread(target=rd); t.start()
    t0 = time.process_time()
    for _ in range(n):
        off = 0
        while off < len(data):
            off += os.sendfile(s.fileno(), fd, off, len(data)-off)
    t.join(); dt = time.process_time()-t0
    s.close(); c.close(); srv.close()
    return n*len(data)/dt/1e9
ext = os.open('/tmp/hp/www/large.bin', os.O_RDONLY)
mf = mk_memfd()
def bench_write(n=60):
    srv = socket.socket(); srv.bind(('127.0.0.1',0)); srv.listen(1)
    c = socket.create_connection(srv.getsockname()); s,_ = srv.accept()
    def rd():
        buf = bytearray(1<<20); tot=0
        while tot < n*len(data):
            k = c.recv_into(buf); tot += k
    t = threading.Thread(target=rd); t.start()
    t0 = time.process_time()
    mv = memoryview(data)
    for _ in range(n):
        off = 0
        while off < len(data):
            off += s.send(mv[off:off+(1<<20)])
    t.join(); dt = time.process_time()-t0
    s.close(); c.close(); srv.close()
    return n*len(data)/dt/1e9
tmp = os.open('/var/tmp', os.O_TMPFILE|os.O_RDWR, 0o600); os.write(tmp, data)
for r in range(5):
    print('GB per CPU-second: ext4 %.2f  memfd %.2f  tmpfile %.2f  write %.2f  load %s' % (bench(ext), bench(mf), bench(tmp), bench_write(), open('/proc/loadavg').read().split()[0]))
