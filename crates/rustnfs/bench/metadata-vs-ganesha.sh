#!/usr/bin/env bash
# The NFS metadata mix (CREATE / GETATTR / REMOVE, `servelab load --nfs-workload
# metadata`) at 1 and 16 clients against rustnfs, optionally a second rustnfs build (e.g.
# the previous version), and NFS-Ganesha 4.3 (VFS), interleaved ROUNDS times in one run
# with the order rotated each round. Loopback only, free ports, a temporary directory;
# everything started here is stopped at the end. Prints one table row per measurement.
#
#   cargo build --release -p rustnfs -p servelab
#   crates/rustnfs/bench/metadata-vs-ganesha.sh target/release/rustnfs [OTHER_RUSTNFS]
set -euo pipefail
BIN=${1:-${CARGO_TARGET_DIR:-target}/release/rustnfs}
OTHER=${2:-}
LOAD=${LOAD:-$(dirname "$BIN")/servelab}
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-3}
# WORK_BASE=/dev/shm measures the servers on tmpfs, away from other disk traffic.
work=$(mktemp -d "${WORK_BASE:-/tmp}/rustnfs-meta.XXXXXX")
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
declare -A url
start_rustnfs() { # name binary
  local port; port=$(free_port)
  mkdir -p "$work/www/scratch-$1"
  # As Ganesha below (No_Root_Squash): the load runs as root.
  "$2" --export "$work/www" --listen "127.0.0.1:$port" --no-root-squash > "$work/$1.out" 2> "$work/$1.log" &
  pids+=("$!")
  wait_port "$port"
  url[$1]="nfs://127.0.0.1:$port//scratch-$1"
}
start_rustnfs rustnfs "$BIN"
servers=(rustnfs)
if [ -n "$OTHER" ]; then start_rustnfs other "$OTHER"; servers+=(other); fi

# NFS-Ganesha (VFS), configuration from shared/notes/baselines.md with free ports.
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
mkdir -p "$work/www/scratch-ganesha"
ganesha.nfsd -f "$work/ganesha.conf" -L "$work/ganesha.log" -p "$work/ganesha.pid"
wait_port "$gport"; wait_port "$mport"; sleep 1
url[ganesha]="nfs://127.0.0.1:$gport$work/www//scratch-ganesha?mountport=$mport"
servers+=(ganesha)

echo "loadavg before: $(cat /proc/loadavg)"
echo "| round | server | clients | ops/s | failed |"
echo "| --- | --- | --- | --- | --- |"
n=${#servers[@]}
for r in $(seq "$ROUNDS"); do
  for i in $(seq 0 $((n - 1))); do
    s=${servers[$(( (i + r) % n ))]}
    for c in 1 16; do
      out=$("$LOAD" load "${url[$s]}" --nfs-workload metadata --nfs-files 200 -c "$c" \
              -z "${SECS}s" --no-progress 2>&1 || true)
      ops=$(awk -F: '/Operations per second/ {print $2+0}' <<<"$out")
      failed=$(awk -F: '/Failed operations/ {print $2+0}' <<<"$out")
      echo "| $r | $s | $c | ${ops:-none} | ${failed:-?} |"
    done
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
