#!/bin/bash
# usage: syscpu.sh port N -> req/s and whole-machine CPU ms per request (all processes, softirq included)
port=$1; N=${2:-200}
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
b0=$(busy); t0=$(date +%s.%N)
rps=$(/work/main/target/release/servelab load http://127.0.0.1:$port/${FILE:-testfile.bin} -n $N -c 10 ${KA:---no-keepalive} 2>&1 | awk '/Requests per second/{print $4}')
b1=$(busy); t1=$(date +%s.%N)
tck=$(getconf CLK_TCK)
printf "port=%s rps=%s cpu_ms/req=%.2f util=%.2f\n" $port $rps $(echo "($b1-$b0)*1000/$tck/$N" | bc -l) $(echo "($b1-$b0)/$tck/($t1-$t0)" | bc -l)
