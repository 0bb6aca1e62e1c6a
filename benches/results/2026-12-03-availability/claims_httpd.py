"""1,000 record marks claiming 1 MiB each (4,000 bytes) sent to rustnfs from 127.0.0.2-9, and kept
reconnecting when closed; a 10 MiB download through httpd --nfs from that rustnfs meanwhile."""
import os, socket, subprocess, sys, time, resource, hashlib, struct, threading
# DIR holds victim.bin (10 MiB of random bytes); run as: DIR=/tmp/r22 flock /tmp/bench.lock python3 THIS BIN_OR_RELEASE_DIR [N]
DIR = os.environ.get('DIR', '/tmp/r22')
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],)*2)
os.sched_setaffinity(0, {0})
R = sys.argv[1]; nport, hport = 12351, 18351
want = hashlib.sha256(open(DIR + '/victim.bin','rb').read()).hexdigest()
env = dict(os.environ, RUST_LOG='error', NO_ROOT_SQUASH='true')
nfs = subprocess.Popen(['taskset','-c','1',R+'/rustnfs','--export',DIR,'--listen',f'127.0.0.1:{nport}'], env=env)
time.sleep(1)
h = subprocess.Popen(['taskset','-c','1',R+'/httpd','--nfs',f'nfs://127.0.0.1:{nport}/','--listen',f'127.0.0.1:{hport}','--workers','2'], env=env)
time.sleep(1)
def get():
    t = time.time()
    out = subprocess.run(['curl','-s','-o','-','-w','','http://127.0.0.1:%d/victim.bin' % hport], capture_output=True, timeout=60)
    return round(time.time()-t,3), hashlib.sha256(out.stdout).hexdigest()==want
stop = False; reconnects = [0]
def attacker(k):
    mark = struct.pack('>I', 0x80000000 | (1<<20))
    while not stop:
        try:
            s = socket.socket(); s.bind((f'127.0.0.{2+k%8}',0)); s.connect(('127.0.0.1',nport)); s.sendall(mark)
            s.settimeout(1.0)
            while not stop:
                try:
                    if s.recv(1) == b'': break
                except socket.timeout: pass
            s.close(); reconnects[0] += 1
        except OSError: time.sleep(0.05)
try:
    quiet = min(get()[0] for _ in range(3))
    ts = [threading.Thread(target=attacker, args=(k,), daemon=True) for k in range(int(sys.argv[2]))]
    for t in ts: t.start()
    time.sleep(2)
    reads = [get() for _ in range(3)]
    print(f"httpd --nfs beside {len(ts)} 1-MiB claims on rustnfs (reconnecting): victim {reads} (quiet {quiet}); reconnects {reconnects[0]}")
finally:
    stop = True; h.kill(); nfs.kill()
