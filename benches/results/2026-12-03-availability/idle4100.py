"""4,100 idle rustnfs connections at the default cap (4096), from 127.0.0.2-9; victim nfs-cat of 10 MiB."""
import os, socket, subprocess, sys, time, resource, hashlib
# DIR holds victim.bin (10 MiB of random bytes); run as: DIR=/tmp/r22 flock /tmp/bench.lock python3 THIS BIN_OR_RELEASE_DIR [N]
DIR = os.environ.get('DIR', '/tmp/r22')
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],)*2)
os.sched_setaffinity(0, {0})
bin_ = sys.argv[1]; port = 12349
want = hashlib.sha256(open(DIR + '/victim.bin','rb').read()).hexdigest()
srv = subprocess.Popen(['taskset','-c','1',bin_,'--export',DIR,'--listen',f'127.0.0.1:{port}'], env=dict(os.environ, RUST_LOG='error', NO_ROOT_SQUASH='true'))
def rss():
    for l in open(f'/proc/{srv.pid}/status'):
        if l.startswith('VmRSS'): return int(l.split()[1])/1024
def victim():
    t=time.time()
    out = subprocess.run(['nfs-cat', f'nfs://127.0.0.1//victim.bin?version=3&nfsport={port}&mountport={port}'], capture_output=True, timeout=60)
    return time.time()-t, hashlib.sha256(out.stdout).hexdigest()==want
try:
    time.sleep(1)
    quiet = min(victim()[0] for _ in range(3)); idle = rss()
    conns=[]
    for i in range(int(sys.argv[2]) if len(sys.argv)>2 else 4100):
        s=socket.socket(); s.bind((f'127.0.0.{2+i%8}',0)); s.connect(('127.0.0.1',port)); conns.append(s)
    time.sleep(0.5)
    reads=[victim() for _ in range(3)]; held=rss()
    for s in conns: s.close()
    time.sleep(3); after=rss()
    lim=max(1, 2*quiet+0.5)
    print(f"rustnfs 4,100 idle at default cap 4096 (several addresses): victim {sorted(r[0] for r in reads)} s exact {all(r[1] for r in reads)} (quiet {quiet:.3f}, limit {lim:.2f}); RSS idle {idle:.1f} MB, during {held:.1f}, 3 s after {after:.1f}")
finally:
    srv.kill()
