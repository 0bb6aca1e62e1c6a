#!/bin/bash
# Side-by-side sequential READ: rustnfs (READ data by sendfile), rustnfs (copy path,
# RUSTNFS_READ_SENDFILE=0) and NFS-Ganesha 4.3 (VFS), interleaved rounds; prints one line
# per run (servelab load throughput, peak RSS sampled every 0.2 s) and 50 x nfs-cat times.
# Needs a release build (cargo build --release -p rustnfs -p servelab), ganesha.nfsd,
# rpcbind running (Ganesha 4 registers with it), libnfs-utils. The README quotes a run
# with ROUNDS=5 DUR=4s.
set -u
B=${B:-/tmp/rustnfs-read-bench}
BIN=${BIN:-$(cd "$(dirname "$0")/../../.." && pwd)/target/release}
ROUNDS=${ROUNDS:-3}
DUR=${DUR:-5s}
mkdir -p $B/www
[ -f $B/www/testfile.bin ] || head -c $((10<<20)) /dev/urandom > $B/www/testfile.bin
free() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
P1=$(free); P2=$(free); GN=$(free); GM=$(free); GL=$(free); GR=$(free)
RUSTNFS_READ_SENDFILE=1 RUST_LOG=warn $BIN/rustnfs --export $B/www --listen 127.0.0.1:$P1 >/dev/null 2>&1 & S1=$!
RUSTNFS_READ_SENDFILE=0 RUST_LOG=warn $BIN/rustnfs --export $B/www --listen 127.0.0.1:$P2 >/dev/null 2>&1 & S2=$!
cat > $B/ganesha.conf <<G
NFS_CORE_PARAM { Protocols = 3; NFS_Port = $GN; MNT_Port = $GM; NLM_Port = $GL; Rquota_Port = $GR; Bind_addr = 127.0.0.1; Enable_NLM = false; Enable_RQUOTA = false; }
NFSV4 { Graceless = true; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT { Export_Id = 1; Path = $B/www; Pseudo = /www; Access_Type = RO; Squash = No_Root_Squash; Protocols = 3; Transports = TCP; SecType = sys; FSAL { Name = VFS; } }
LOG { Default_Log_Level = WARN; }
G
exec 9>/tmp/servelab-ganesha-start.lock; flock 9
ganesha.nfsd -F -f $B/ganesha.conf -L $B/ganesha.log -p $B/ganesha.pid >/dev/null 2>&1 & SG=$!
for i in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/$GN) 2>/dev/null && break; sleep 0.1; done
flock -u 9
sleep 1
trap 'kill $S1 $S2 $SG 2>/dev/null' EXIT
rss() { awk '/VmRSS/{print $2/1024}' /proc/$1/status; }
echo "idle RSS MB: sendfile $(rss $S1) copy $(rss $S2) ganesha $(rss $SG)"
url() { case $1 in s) echo "nfs://127.0.0.1:$P1//testfile.bin";; c) echo "nfs://127.0.0.1:$P2//testfile.bin";; g) echo "nfs://127.0.0.1$B/www/testfile.bin?nfsport=$GN&mountport=$GM&version=3";; esac; }
catu() { case $1 in s) echo "nfs://127.0.0.1//testfile.bin?version=3&nfsport=$P1&mountport=$P1";; c) echo "nfs://127.0.0.1//testfile.bin?version=3&nfsport=$P2&mountport=$P2";; g) echo "nfs://127.0.0.1$B/www/testfile.bin?version=3&nfsport=$GN&mountport=$GM";; esac; }
pid() { case $1 in s) echo $S1;; c) echo $S2;; g) echo $SG;; esac; }
for srv in s c g; do echo "md5 $srv $(nfs-cat "$(catu $srv)" | md5sum) want $(md5sum < $B/www/testfile.bin)"; done
cat /proc/loadavg | sed 's/^/loadavg before: /'
for r in $(seq 1 $ROUNDS); do
  for c in 1 16; do
    for srv in s c g; do
      p=$(pid $srv); peak=0
      ( while kill -0 $p 2>/dev/null; do rss $p; sleep 0.2; done ) > $B/rss.$srv.$c.$r &
      SAMP=$!
      out=$($BIN/servelab load "$(url $srv)" --nfs-workload read -c $c -z $DUR --no-progress 2>&1)
      kill $SAMP 2>/dev/null
      peak=$(sort -n $B/rss.$srv.$c.$r | tail -1)
      rate=$(echo "$out" | grep "^Throughput" | head -1)
      echo "round $r c=$c $srv | $rate | peakRSS ${peak}MB"
    done
  done
  for srv in s c g; do
    t0=$(date +%s.%N)
    for i in $(seq 1 50); do nfs-cat "$(catu $srv)" >/dev/null 2>&1 || echo "nfs-cat $srv failed"; done
    t1=$(date +%s.%N)
    echo "round $r nfs-cat50 $srv | $(echo "$t1 - $t0" | bc) s"
  done
done
cat /proc/loadavg | sed 's/^/loadavg after: /'
echo "final RSS MB: sendfile $(rss $S1) copy $(rss $S2) ganesha $(rss $SG)"
