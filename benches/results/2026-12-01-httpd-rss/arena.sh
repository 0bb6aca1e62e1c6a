#!/bin/bash
# usage: arena.sh : for each allocator setting, a fresh httpd --nfs, the suite's sequence, peak RSS + req/s
cd /work/main
for r in 1 2; do
for mode in default arena1 arena2; do
  env=""; [ $mode = arena1 ] && env="MALLOC_ARENA_MAX=1"; [ $mode = arena2 ] && env="MALLOC_ARENA_MAX=2"
  env $env target/release/httpd --nfs nfs://127.0.0.1:20490/ --listen 127.0.0.1:18090 > /tmp/exp/rss.log 2>&1 & hp=$!
  sleep 0.4
  s=$(wrk -t1 -c10 -d2s http://127.0.0.1:18090/small.bin 2>&1 | awk '/Requests\/sec/{print $2}')
  a=$(wrk -t1 -c10 -d2s http://127.0.0.1:18090/testfile.bin 2>&1 | awk '/Requests\/sec/{print $2}')
  b=$(wrk -t2 -c100 -d2s http://127.0.0.1:18090/testfile.bin 2>&1 | awk '/Requests\/sec/{print $2}')
  c=$(target/release/servelab load http://127.0.0.1:18090/testfile.bin -n 200 -c 10 --no-keepalive 2>&1 | awk '/Requests per second/{print $4}')
  d=$(wrk -t2 -c100 -d2s -H "Connection: close" http://127.0.0.1:18090/testfile.bin 2>&1 | awk '/Requests\/sec/{print $2}')
  echo "$mode load=$(cut -d' ' -f1 /proc/loadavg) small=$s ka10=$a ka100=$b close10=$c close100=$d HWM=$(awk '/VmHWM/{print $2/1000}' /proc/$hp/status)MB"
  kill $hp; wait $hp 2>/dev/null
done; done
