#!/bin/bash
# How fast `servelab load -q 100 -c 1000` opens its 1,000 connections beside a CPU hog:
# httpd --root on CPU 1, six busy loops competing for both cores, and the server's open
# sockets counted every 2 s. Run from the repository root after
# `cargo build --release --workspace`:
#   flock /tmp/bench.lock benches/results/2026-12-03-pacer-and-split-head/ramp.sh SERVELAB
set -eu
SERVELAB=$1
HTTPD=${HTTPD:-target/release/httpd}
DATA=$(mktemp -d)
head -c 65536 /dev/urandom > "$DATA/soak.bin"
taskset -c 1 "$HTTPD" --root "$DATA" --listen 127.0.0.1:18080 >/dev/null 2>&1 &
H=$!
# The server holds the caller's lock descriptor: it must never outlive the script.
trap 'kill $H 2>/dev/null; rm -rf "$DATA"' EXIT
sleep 0.5
for _ in 1 2 3 4 5 6; do timeout 25 sh -c 'while :; do :; done' & done
"$SERVELAB" load --no-progress -s 10s -q 100 -c 1000 -z 22s \
  http://127.0.0.1:18080/soak.bin > "$DATA/out.txt" 2>&1 &
L=$!
s=""
for _ in $(seq 2 2 20); do
  sleep 2
  s="$s $(ls -l /proc/$H/fd 2>/dev/null | grep -c socket)"
done
echo "sockets every 2 s:$s"
wait $L
grep -E "Requests per second|Failed" "$DATA/out.txt" | head -3
