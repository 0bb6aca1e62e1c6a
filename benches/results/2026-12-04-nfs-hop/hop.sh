#!/bin/sh
# One measurement of the NFS hop on a 10 MiB file (issue 32 §4), outside `compare`:
#   flock -o /tmp/bench.lock sh benches/results/2026-12-04-nfs-hop/hop.sh TAG 3|4.2|local [N]
# rustnfs and httpd (`--nfs` over the version given, or `--root` for local) pinned to
# CPU 1, `servelab load` pinned to CPU 0: N requests (300) of the 10 MiB file, C (4)
# concurrent, a new connection per request (KA=-k: keep-alive). Prints CPU per request
# of httpd and rustnfs (utime + stime from /proc/PID/stat), of the load generator
# (/usr/bin/time), of the whole machine (/proc/stat user+nice+system+irq+softirq over
# every CPU, stolen time left out), the stolen ticks and httpd's peak RSS (VmHWM).
# PERF=FILE also records httpd with `perf record -g` (cpu-clock) during the run.
# BIN (target/release) holds the binaries.
set -eu
fuser -k 20900/tcp 20901/tcp >/dev/null 2>&1 || true; sleep 0.3
TAG=$1 V=$2 N=${3:-300}
BIN=${BIN:-target/release}
W=/tmp/hopw; mkdir -p $W/e; [ -f $W/e/big10 ] || { head -c 10M /dev/urandom > $W/e/big10; chmod -R a+rwX $W/e; }
taskset -c 1 $BIN/rustnfs --export $W/e --listen 127.0.0.1:20900 > $W/r.log 2>&1 & RP=$!
sleep 0.5
if [ "$V" = local ]; then
  taskset -c 1 $BIN/httpd --root $W/e --listen 127.0.0.1:20901 > $W/h.log 2>&1 & HP=$!
elif [ "$V" = 3 ]; then
  taskset -c 1 $BIN/httpd --nfs "nfs://127.0.0.1/?nfsport=20900&mountport=20900" --nfs-version 3 --listen 127.0.0.1:20901 > $W/h.log 2>&1 & HP=$!
else
  taskset -c 1 $BIN/httpd --nfs "nfs://127.0.0.1/?nfsport=20900" --nfs-version $V --listen 127.0.0.1:20901 > $W/h.log 2>&1 & HP=$!
fi
sleep 1
curl -sf -o /dev/null http://127.0.0.1:20901/big10 || { echo "curl failed"; cat $W/h.log; kill $RP $HP; exit 1; }
taskset -c 0 $BIN/servelab load http://127.0.0.1:20901/big10 -c 4 -n 40 --no-keepalive --no-progress > /dev/null 2>&1
m0=$(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat); h0=$(awk '{print $14+$15}' /proc/$HP/stat); r0=$(awk '{print $14+$15}' /proc/$RP/stat); s0=$(awk '/^cpu /{print $9}' /proc/stat)
[ -n "${PERF:-}" ] && { perf record -e cpu-clock -F 4000 -g -p $HP -o $PERF >/dev/null 2>&1 & PP=$!; }
/usr/bin/time -f '%U %S' -o $W/ct.txt taskset -c 0 $BIN/servelab load http://127.0.0.1:20901/big10 -c ${C:-4} -n $N ${KA:---no-keepalive} --no-progress --json $W/o.json > $W/o.txt 2>&1
[ -n "${PERF:-}" ] && { kill -INT $PP; wait $PP; }
m1=$(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat); h1=$(awk '{print $14+$15}' /proc/$HP/stat); r1=$(awk '{print $14+$15}' /proc/$RP/stat); s1=$(awk '/^cpu /{print $9}' /proc/stat)
rss=$(awk '/VmHWM/{print $2}' /proc/$HP/status)
python3 - <<PY
import json
d=json.load(open("$W/o.json")); n=d["requests"]
h=($h1-$h0)*10/n; r=($r1-$r0)*10/n if "$V"!="local" else 0
cu,cs=map(float,open("$W/ct.txt").read().split()[-2:]); c=(cu+cs)*1000/n; m=($m1-$m0)*10/n
print(f"$TAG v=$V n={n} failed={d['failed']} rps={d['requests_per_second']:.1f} httpd={h:.2f}ms rustnfs={r:.2f}ms total={h+r:.2f}ms client={c:.2f}ms machine={m:.2f}ms steal={$s1-$s0} hwm={$rss}kB")
PY
kill $RP $HP 2>/dev/null; wait 2>/dev/null || true
