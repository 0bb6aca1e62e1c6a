#!/bin/sh
# Side-by-side figures for the loadgen README: servelab load vs wrk vs ab on one nginx
# (4 KiB file, same connection count), and tcp:// vs iperf3, interleaved ROUNDS times so
# drift on a shared machine hits every tool alike. Usage:
#   crates/loadgen/bench/compare.sh /path/to/release/servelab [ROUNDS] [SECONDS]
# Prints one line per measurement (tool, round, figures) to stdout; nothing is left
# running afterwards. HTTP latency lines carry each tool's mean and `little=` (mean x
# req/s / connections): a closed loop that times every request can never exceed 1.0, so
# a larger value means the tool reports more latency than happened (wrk's correction).
# With gcc, bench/blockclient.c (blocking threads, raw samples) is a third opinion.
set -eu
S=${1:?path to the servelab release binary}
ROUNDS=${2:-3}
SECS=${3:-5}
C=10
DIR=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
TPORT=$((PORT + 1)); IPORT=$((PORT + 2))
mkdir -p "$DIR/www"
head -c 4096 /dev/urandom > "$DIR/www/small.bin"
cat > "$DIR/nginx.conf" <<CONF
worker_processes 2;
pid $DIR/nginx.pid;
error_log $DIR/error.log;
events { worker_connections 1024; }
http { access_log off; sendfile on; tcp_nopush on;
  server { listen 127.0.0.1:$PORT; root $DIR/www; } }
CONF
nginx -c "$DIR/nginx.conf"
"$S" tcp-server --listen 127.0.0.1:$TPORT 2>/dev/null & TPID=$!
iperf3 -s -B 127.0.0.1 -p $IPORT -D --pidfile "$DIR/iperf.pid"
cleanup() {
  nginx -c "$DIR/nginx.conf" -s quit 2>/dev/null || true
  kill $TPID 2>/dev/null || true
  [ -f "$DIR/iperf.pid" ] && kill "$(cat "$DIR/iperf.pid")" 2>/dev/null || true
  sleep 0.3; rm -rf "$DIR"
}
trap cleanup EXIT
sleep 0.5
BC=""
if command -v gcc >/dev/null; then
  gcc -O2 -D_GNU_SOURCE -pthread -o "$DIR/blockclient" "$(dirname "$0")/blockclient.c" && BC="$DIR/blockclient"
fi
# Seconds (wrk prints us/ms/s) times req/s over connections.
little() { awk -v m="$1" -v r="$2" -v c="$C" 'BEGIN{ if (m ~ /us$/) f=1e-6; else if (m ~ /ms$/) f=1e-3; else f=1; sub(/[a-z]+$/, "", m); printf "%.2f", m*f*r/c }'; }
URL=http://127.0.0.1:$PORT/small.bin
echo "# nginx 4 KiB, -c $C, ${SECS}s runs, $(nproc) CPUs, $(date -u +%FT%TZ)"
for r in $(seq 1 "$ROUNDS"); do
  W=$(wrk -t2 -c$C -d${SECS}s --latency "$URL")
  WR=$(echo "$W" | awk '/Requests\/sec/{print $2}'); WM=$(echo "$W" | awk '$1=="Latency"{print $2; exit}')
  echo "wrk round=$r rps=$WR mean=$WM p50=$(echo "$W" | awk '$1=="50%"{print $2}') p99=$(echo "$W" | awk '$1=="99%"{print $2}') little=$(little "$WM" "$WR")"
  L=$("$S" load "$URL" -z ${SECS}s -c $C --no-progress)
  # Columns of the percentile table: count min mean stddev max p50 p75 p90 p95 p99 ...
  LR=$(echo "$L" | awk '/^Requests per second/{print $4}'); LM=$(echo "$L" | awk '$1=="GET" && $2=="total"{print $5"ms"}')
  echo "servelab round=$r rps=$LR mean=$LM $(echo "$L" | awk '$1=="GET" && $2=="total"{print "p50="$8"ms p99="$12"ms"}') little=$(little "$LM" "$LR")"
  if [ -n "$BC" ]; then
    B=$("$BC" "$PORT" /small.bin $C "$SECS")
    BR=$(echo "$B" | sed 's/.*rps=\([0-9]*\).*/\1/'); BM=$(echo "$B" | sed 's/.*mean=\([0-9]*us\).*/\1/')
    echo "blockclient round=$r $B little=$(little "$BM" "$BR")"
  fi
  A=$(ab -q -n $((SECS * 3000)) -c $C "$URL" 2>&1)
  echo "ab round=$r rps=$(echo "$A" | awk '/^Requests per second/{print $4}')"
  A=$(ab -q -k -n $((SECS * 8000)) -c $C "$URL" 2>&1)
  echo "ab-k round=$r rps=$(echo "$A" | awk '/^Requests per second/{print $4}')"
done
echo "# loopback TCP, 1 stream, ${SECS}s"
for r in $(seq 1 "$ROUNDS"); do
  echo "iperf3 round=$r gbps=$(iperf3 -c 127.0.0.1 -p $IPORT -t $SECS -f g | awk '/receiver/{print $7}')"
  echo "iperf3-1M round=$r gbps=$(iperf3 -c 127.0.0.1 -p $IPORT -t $SECS -l 1M -f g | awk '/receiver/{print $7}')"
  echo "servelab-tcp round=$r gbps=$("$S" load tcp://127.0.0.1:$TPORT -z ${SECS}s --block 128k --no-progress | awk '/^Throughput/{gsub(/\(/,"",$4); print $4}')"
  echo "servelab-tcp-1M round=$r gbps=$("$S" load tcp://127.0.0.1:$TPORT -z ${SECS}s --block 1M --no-progress | awk '/^Throughput/{gsub(/\(/,"",$4); print $4}')"
done
