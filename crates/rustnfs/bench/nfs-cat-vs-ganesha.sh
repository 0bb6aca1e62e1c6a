#!/usr/bin/env bash
# Reads a 10 MiB file N times (default 50) in a row with nfs-cat through rustnfs and
# through NFS-Ganesha 4.3 (VFS), alternating ROUNDS times in one run. Loopback only, free ports,
# a temporary directory; everything started here is stopped at the end.
#
#   cargo build --release -p rustnfs
#   crates/rustnfs/bench/nfs-cat-vs-ganesha.sh [target/release/rustnfs]
set -euo pipefail
BIN=${1:-${CARGO_TARGET_DIR:-target}/release/rustnfs}
N=${N:-50}
ROUNDS=${ROUNDS:-3}
work=$(mktemp -d /tmp/rustnfs-bench.XXXXXX)
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

mkdir -p "$work/www"
head -c 10485760 /dev/urandom > "$work/www/testfile.bin"
head -c 4096 /dev/urandom > "$work/www/small.bin"
want=$(md5sum < "$work/www/testfile.bin")

# rustnfs
rport=$(free_port)
"$BIN" --export "$work/www" --listen "127.0.0.1:$rport" > "$work/rustnfs.out" 2> "$work/rustnfs.log" &
rpid=$!; pids+=("$rpid")
wait_port "$rport"

# NFS-Ganesha (VFS), configuration from shared/notes/baselines.md with free ports.
gport=$(free_port); mport=$(free_port)
cat > "$work/ganesha.conf" <<CONF
NFS_CORE_PARAM { Protocols = 3; NFS_Port = $gport; MNT_Port = $mport; NLM_Port = $(free_port);
  Rquota_Port = $(free_port); Bind_addr = 127.0.0.1; Enable_NLM = false; Enable_RQUOTA = false; }
NFSV4 { Graceless = true; }
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
if ! pgrep -x rpcbind >/dev/null; then start_rpcbind; rpcbind_pid=$(pgrep -xn rpcbind); fi
ganesha.nfsd -f "$work/ganesha.conf" -L "$work/ganesha.log" -p "$work/ganesha.pid"
wait_port "$gport"; wait_port "$mport"; sleep 1

declare -A url=(
  [rustnfs]="nfs://127.0.0.1//testfile.bin?version=3&nfsport=$rport&mountport=$rport"
  [ganesha]="nfs://127.0.0.1$work/www/testfile.bin?version=3&nfsport=$gport&mountport=$mport"
)
for s in rustnfs ganesha; do
  got=$(nfs-cat "${url[$s]}" | md5sum)
  [ "$got" = "$want" ] || { echo "$s: checksum mismatch" >&2; exit 1; }
done
echo "| round | server | ${N} × nfs-cat 10 MiB (s) | GB/s | ${N} × nfs-cat 4 KiB (s) |"
echo "| --- | --- | --- | --- | --- |"
for r in $(seq "$ROUNDS"); do
  for s in rustnfs ganesha; do
    t0=$(date +%s.%N)
    for _ in $(seq "$N"); do nfs-cat "${url[$s]}" > /dev/null; done
    t1=$(date +%s.%N)
    small=${url[$s]/testfile.bin/small.bin}
    for _ in $(seq "$N"); do nfs-cat "$small" > /dev/null; done
    t2=$(date +%s.%N)
    awk -v r="$r" -v s="$s" -v a="$t0" -v b="$t1" -v c="$t2" -v n="$N" \
      'BEGIN { d=b-a; printf "| %d | %s | %.3f | %.2f | %.3f |\n", r, s, d, n*10485760/d/1e9, c-b }'
  done
done
kill -INT "$rpid"; wait "$rpid" || true
echo; echo "rustnfs shutdown summary:"; cat "$work/rustnfs.out"
if [ -n "${rpcbind_pid:-}" ]; then kill "$rpcbind_pid" || true; fi
