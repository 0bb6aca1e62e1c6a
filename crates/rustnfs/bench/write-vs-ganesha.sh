#!/usr/bin/env bash
# Writes with COMMIT (`servelab load --nfs-workload write`: UNSTABLE WRITEs of 1 MiB, a
# COMMIT at each 64 MiB file's end and at the end of the run, as a kernel client's close)
# at 1 and 4 clients, and the metadata mix (CREATE / GETATTR / REMOVE over 200 names) at
# 1 client, against rustnfs and NFS-Ganesha 4.3 (VFS), interleaved ROUNDS times in one
# run with the order rotated each round. Both export directories of one WORK_BASE (same
# file system), both without root squash (the load runs as root). Loopback only, free
# ports, a temporary directory; everything started here is stopped at the end. Prints
# one row per measurement, then the medians and ratios.
#
# A second rustnfs binary (`OTHER`, e.g. the build before a change) joins the rotation as
# server `other`, on its own export directory of the same file system. The servers run
# on `SERVER_CPUS` and the load generator on `CLIENT_CPUS` (taskset; defaults: CPU 1 and
# CPU 0 when the machine has two or more, nothing pinned otherwise).
#
#   cargo build --release -p rustnfs -p servelab
#   crates/rustnfs/bench/write-vs-ganesha.sh target/release/rustnfs
#   OTHER=/tmp/rustnfs-before crates/rustnfs/bench/write-vs-ganesha.sh target/release/rustnfs
set -euo pipefail
BIN=${1:-${CARGO_TARGET_DIR:-target}/release/rustnfs}
LOAD=${LOAD:-$(dirname "$BIN")/servelab}
OTHER=${OTHER:-}
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-5}
# The measurements, `workload clients` separated by commas (e.g. SPECS="metadata 1" with
# WORK_BASE=/dev/shm for the mix without the disk's inode allocator).
IFS=, read -r -a specs <<<"${SPECS:-write 1,write 4,metadata 1}"
if [ "$(nproc)" -ge 2 ]; then
  SERVER_CPUS=${SERVER_CPUS-1}; CLIENT_CPUS=${CLIENT_CPUS-0}
else
  SERVER_CPUS=${SERVER_CPUS-}; CLIENT_CPUS=${CLIENT_CPUS-}
fi
# `exec`, so a server started in the background under `pin` is the pid that `$!` names.
pin() { local cpus=$1; shift; if [ -n "$cpus" ]; then exec taskset -c "$cpus" "$@"; else exec "$@"; fi; }
work=$(mktemp -d "${WORK_BASE:-/tmp}/rustnfs-write.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$work/ganesha.pid" ] && kill "$(cat "$work/ganesha.pid")" 2>/dev/null || true
  sleep 0.5
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; return 1; }

mkdir -p "$work/www/scratch-rustnfs" "$work/www/scratch-ganesha" "$work/www/scratch-other"
declare -A url
start_rustnfs() { # name binary
  local port; port=$(free_port)
  (pin "$SERVER_CPUS" "$2" --export "$work/www" --listen "127.0.0.1:$port" --no-root-squash \
    > "$work/$1.out" 2> "$work/$1.log") &
  pids+=("$!")
  wait_port "$port"
  url[$1]="nfs://127.0.0.1:$port//scratch-$1"
}
start_rustnfs rustnfs "$BIN"
servers=(rustnfs ganesha)
if [ -n "$OTHER" ]; then start_rustnfs other "$OTHER"; servers+=(other); fi

gport=$(free_port); mport=$(free_port)
cat > "$work/ganesha.conf" <<CONF
NFS_CORE_PARAM { Protocols = 3; NFS_Port = $gport; MNT_Port = $mport; NLM_Port = $(free_port);
  Rquota_Port = $(free_port); Bind_addr = 127.0.0.1; Enable_NLM = false; Enable_RQUOTA = false; }
NFSV4 { Graceless = true; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT { Export_Id = 1; Path = $work/www; Pseudo = /www; Access_Type = RW; Squash = No_Root_Squash;
  Protocols = 3; Transports = TCP; SecType = sys; FSAL { Name = VFS; } }
LOG { Default_Log_Level = WARN; }
CONF
# rpcbind daemonizes and outlives the script: it gets none of our descriptors past stdio
# (under `flock /tmp/bench.lock`, an inherited lock descriptor held the lock until rpcbind
# exited, and the next benchmark waited for ever).
start_rpcbind() {
  pgrep -x rpcbind >/dev/null && return 0
  (for fd in $(ls /proc/$BASHPID/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done; exec rpcbind -w)
}
start_rpcbind
(pin "$SERVER_CPUS" ganesha.nfsd -f "$work/ganesha.conf" -L "$work/ganesha.log" -p "$work/ganesha.pid")
wait_port "$gport"; wait_port "$mport"; sleep 1
url[ganesha]="nfs://127.0.0.1:$gport$work/www//scratch-ganesha?mountport=$mport"
n=${#servers[@]}

echo "servers ${servers[*]} on CPUs ${SERVER_CPUS:-any}, client on CPUs ${CLIENT_CPUS:-any}"
echo "loadavg before: $(cat /proc/loadavg)"
echo "| round | server | workload | clients | MB/s or ops/s | bytes committed | failed |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
rows=$work/rows
for r in $(seq "$ROUNDS"); do
  for i in $(seq 0 $((n - 1))); do
    s=${servers[$(( (i + r) % n ))]}
    for spec in "${specs[@]}"; do
      set -- $spec
      out=$( (pin "$CLIENT_CPUS" "$LOAD" load "${url[$s]}" --nfs-workload "$1" --nfs-files 200 --nfs-block 1048576 \
              -c "$2" -z "${SECS}s" --no-progress 2>&1) || true)
      if [ "$1" = write ]; then
        fig=$(awk '/^Throughput:/ {print $2+0}' <<<"$out")
      else
        fig=$(awk -F: '/Operations per second/ {print $2+0}' <<<"$out")
      fi
      committed=$(awk '/^Bytes committed:/ {print $3}' <<<"$out")
      failed=$(awk -F: '/Failed operations/ {print $2+0}' <<<"$out")
      echo "| $r | $s | $1 | $2 | ${fig:-none} | ${committed:--} | ${failed:-?} |"
      echo "$s $1 $2 ${fig:-0} $r" >> "$rows"
    done
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
echo
if [ -n "$OTHER" ]; then
  echo "| workload | clients | rustnfs median | other median | Ganesha median | rustnfs / Ganesha | other / Ganesha |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
else
  echo "| workload | clients | rustnfs median | Ganesha median | rustnfs / Ganesha |"
  echo "| --- | --- | --- | --- | --- |"
fi
ratios=()
for spec in "${specs[@]}"; do
  set -- $spec
  med() { awk -v s="$1" -v w="$2" -v c="$3" '$1==s && $2==w && $3==c {print $4}' "$rows" | sort -g |
          awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b>0) printf "%.2f", a/b; else print "-"}'; }
  # Each round's own ratio (the same minutes of the machine for both), sorted.
  rounds() { awk -v s="$1" -v w="$2" -v c="$3" '$2==w && $3==c && ($1==s || $1=="ganesha") {v[$1,$5]=$4; r[$5]=1}
             END {for (k in r) if (v["ganesha",k]>0) printf "%.2f\n", v[s,k]/v["ganesha",k]}' "$rows" | sort -g | tr '\n' ' '; }
  a=$(med rustnfs "$1" "$2"); b=$(med ganesha "$1" "$2")
  if [ -n "$OTHER" ]; then
    o=$(med other "$1" "$2")
    echo "| $1 | $2 | $a | $o | $b | $(ratio "$a" "$b") | $(ratio "$o" "$b") |"
  else
    echo "| $1 | $2 | $a | $b | $(ratio "$a" "$b") |"
  fi
  ratios+=("$1 $2: rustnfs / Ganesha per round (sorted) $(rounds rustnfs "$1" "$2")${OTHER:+; other / Ganesha $(rounds other "$1" "$2")}")
done
echo
printf '%s\n' "${ratios[@]}"
