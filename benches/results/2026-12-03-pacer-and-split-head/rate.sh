#!/bin/bash
# The generator's own schedule lag at a high fixed rate, two servelab binaries
# interleaved: `load -q RATE -c 50 -z 5s` of a 4 KiB file from httpd --root on CPU 1, the
# client on CPU 0. Run from the repository root:
#   flock /tmp/bench.lock benches/results/2026-12-03-pacer-and-split-head/rate.sh 30000 OLD NEW
set -eu
RATE=$1
shift
HTTPD=${HTTPD:-target/release/httpd}
DATA=$(mktemp -d)
head -c 4096 /dev/urandom > "$DATA/4k.bin"
taskset -c 1 "$HTTPD" --root "$DATA" --listen 127.0.0.1:18081 >/dev/null 2>&1 &
H=$!
# The server holds the caller's lock descriptor: it must never outlive the script.
trap 'kill $H 2>/dev/null; rm -rf "$DATA"' EXIT
sleep 0.5
for round in 1 2; do
  for b in "$@"; do
    taskset -c 0 "$b" load --no-progress -q "$RATE" -c 50 -z 5s \
      http://127.0.0.1:18081/4k.bin > "$DATA/r.txt" 2>&1
    echo "round $round $b: $(grep -E 'Requests per second' "$DATA/r.txt")"
    grep -E '^ *schedule lag' "$DATA/r.txt"
  done
done
