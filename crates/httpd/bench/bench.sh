#!/bin/bash
# usage: bench.sh FILE WRKARGS ROUNDS port1 port2 ...
f=$1; a=$2; n=$3; shift 3
for r in $(seq $n); do for p in "$@"; do v=$(wrk $a http://127.0.0.1:$p/$f | awk '/Requests\/sec/ {print $2}'); echo "$p $v"; done; done > /tmp/hb/raw.txt
for p in "$@"; do echo "$p median $(grep "^$p " /tmp/hb/raw.txt | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') all: $(grep "^$p " /tmp/hb/raw.txt | awk '{printf "%s ", $2}')"; done
