#!/bin/bash
# prof.sh BINDIR VERSION MODE(stat|strace|perf) OUT — cache-off 4 KiB keep-alive, c=100,
# rustnfs and httpd on CPU 1, servelab load on CPU 0; MODE measures both servers for 5 s.
set -u
BIN=$1; V=$2; MODE=$3; OUT=$4
mkdir -p $OUT
taskset -c 1 $BIN/rustnfs --export /tmp/h32-prof/www --listen 127.0.0.1:20490 > $OUT/rustnfs.log 2>&1 &
NFS=$!
sleep 0.5
if [ "$V" = local ]; then
  taskset -c 1 $BIN/httpd --root /tmp/h32-prof/www --listen 127.0.0.1:18080 --metrics 127.0.0.1:19090 > $OUT/httpd.log 2>&1 &
else
  taskset -c 1 $BIN/httpd --nfs "nfs://127.0.0.1:20490/?mountport=20490" --nfs-version $V --nfs-attr-ttl-ms 0 --listen 127.0.0.1:18080 --metrics 127.0.0.1:19090 > $OUT/httpd.log 2>&1 &
fi
H=$!
sleep 1
taskset -c 0 $BIN/servelab load -k -c 100 -z 9 --no-progress http://127.0.0.1:18080/small.bin > $OUT/load.txt 2>&1 &
L=$!
sleep 2
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
reqs() { curl -s http://127.0.0.1:19090/metrics | awk '/^httpd_request_duration_seconds_count.*phase="total"/ {s+=$NF} END {print s}'; }
r0=$(reqs); h0=$(cpu $H); n0=$(cpu $NFS)
case $MODE in
  stat) sleep 5 ;;
  strace) timeout -s INT 5 strace -c -f -p $H -o $OUT/strace-httpd.txt & timeout -s INT 5 strace -c -f -p $NFS -o $OUT/strace-rustnfs.txt & wait %3 %4 2>/dev/null; sleep 5.2 ;;
  perf) perf record -F 2000 -g -p $H -o $OUT/perf-httpd.data -- sleep 5 > /dev/null 2>&1 & perf record -F 2000 -g -p $NFS -o $OUT/perf-rustnfs.data -- sleep 5 >/dev/null 2>&1 ; wait %4 2>/dev/null; sleep 0.2 ;;
esac
h1=$(cpu $H); n1=$(cpu $NFS); r1=$(reqs)
echo "requests=$((r1-r0)) httpd_ticks=$((h1-h0)) rustnfs_ticks=$((n1-n0))" | awk '{print; split($1,r,"="); split($2,h,"="); split($3,n,"="); printf "per request ms: httpd %.4f rustnfs %.4f\n", h[2]*10/r[2], n[2]*10/r[2]}' > $OUT/cpu.txt
wait $L
kill $H; sleep 0.5; kill $NFS; wait 2>/dev/null
cat $OUT/cpu.txt; grep -E "Requests per second|Complete requests|Failed|Non-2xx" $OUT/load.txt
