#!/bin/bash
port=$1; N=${2:-200}
hp=$(pgrep -f "listen 127.0.0.1:$port" | head -1); np=$(pgrep -f "rustnfs --export /tmp/exp" | head -1)
t() { awk '{print $14+$15}' /proc/$1/stat; }
h0=$(t $hp); n0=$(t $np)
out=$( { /usr/bin/time -f "LG %U %S" /work/main/target/release/servelab load http://127.0.0.1:$port/${FILE:-testfile.bin} -n $N -c 10 ${KA:---no-keepalive} ; } 2>&1 )
rps=$(echo "$out" | awk '/Requests per second/{print $4}')
lg=$(echo "$out" | awk '/^LG/{print ($2+$3)*1000}')
h1=$(t $hp); n1=$(t $np)
tck=$(getconf CLK_TCK)
printf "port=%s rps=%s httpd=%.2f rustnfs=%.2f loadgen=%.2f ms/req\n" $port $rps $(echo "($h1-$h0)*1000/$tck/$N" | bc -l) $(echo "($n1-$n0)*1000/$tck/$N" | bc -l) $(echo "$lg/$N" | bc -l)
