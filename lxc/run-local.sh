#!/usr/bin/env bash
# lxc/run-local.sh — the original experiment's topology on one machine, for real: httpd in
# an LXC application container (lxc-execute, veth on its own bridge, cgroup memory limit)
# reading through its built-in NFS client from rustnfs in a Docker container on a Docker
# network — two bridges, routed by the host. Checks the bytes, optionally loads it, reports
# memory, and tears everything down (also on failure or Ctrl-C).
#
#   lxc/run-local.sh DATA_DIR               # as root; DATA_DIR holds the files to serve
#
# Where an engine is missing it falls back to a network namespace on the bridge (httpd
# without lxc-execute; rustnfs as a plain process without Docker) and says so in `path=`.
#
# Environment (all optional):
#   HTTPD_BIN      httpd binary (default: docker/build.sh's static build in
#                  $CARGO_TARGET_DIR or <repo>/target, any target triple, else PATH)
#   RUSTNFS_BIN    rustnfs binary, only for the no-Docker fallback (same defaults)
#   SERVELAB_BIN   servelab binary for the load step (same defaults; no load if absent)
#   RUSTNFS_IMAGE  Docker image (default rustnfs)
#   NET_ID         1..250: picks bridge slbr<ID>, 10.199.<ID>.0/24 (LXC side) and
#                  10.198.<ID>.0/24 (Docker side); default derived from the pid
#   MEMORY_LIMIT   httpd container's memory limit (default 1G, like the original)
#   REQUESTS, CONCURRENCY   load step (default 100 / 10; REQUESTS=0 skips it)
#   FILE           file to check and load (default testfile.bin)
#   RESULTS_DIR    where the load step's JSON is kept as lxc-load.json (default
#                  ./results, created); the load opens a new connection per request
#                  (--no-keepalive), as `servelab compare` and `ab` do
#   FORCE_NETNS=1  take the namespace fallback for httpd even when lxc-execute exists
#   FORCE_NO_DOCKER=1  take the namespace fallback for rustnfs even when Docker runs
#
# Output: `key=value` lines on stdout (path, urls, checksums, memory figures); progress on
# stderr. Exit status 0 only when the bytes served equal the bytes on disk.
set -euo pipefail

die() { echo "run-local.sh: $*" >&2; exit 1; }
log() { echo "run-local.sh: $*" >&2; }

[ $# -eq 1 ] || die "usage: $0 DATA_DIR"
data_dir=$(cd "$1" && pwd) || die "DATA_DIR $1 does not exist"
[ "$(id -u)" = 0 ] || die "needs root (bridges, veths, iptables, lxc-execute)"
file=${FILE:-testfile.bin}
[ -f "$data_dir/$file" ] || die "$data_dir/$file does not exist"

repo=$(cd "$(dirname "$0")/.." && pwd)
# rustc may be missing from PATH (root's PATH has no ~/.cargo/bin): then any triple.
triple=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p' || true)
static_root=${STATIC_TARGET_DIR:-${CARGO_TARGET_DIR:-$repo/target}/static}
find_bin() { # NAME: $NAME_BIN, else the static build, else PATH
  local var v cand
  var="$(echo "$1" | tr '[:lower:]' '[:upper:]')_BIN"
  v=${!var:-}
  if [ -z "$v" ]; then
    for cand in "$static_root/${triple:-*}/release-static/$1" \
      "$static_root"/*/release-static/"$1" "$(command -v "$1" || true)"; do
      if [ -n "$cand" ] && [ -x "$cand" ]; then v=$cand; break; fi
    done
  fi
  echo "$v"
}

id=${NET_ID:-$(( $$ % 250 + 1 ))}
[ "$id" -ge 1 ] && [ "$id" -le 250 ] || die "NET_ID must be 1..250"
br=slbr$id
lxc_net=10.199.$id
dk_net=10.198.$id
httpd_ip=$lxc_net.2
name=servelab-httpd-$id
dk_name=servelab-nfs-$id
dk_netname=servelab-lxc-$id
port=8080
work=$(mktemp -d /tmp/servelab-lxc.XXXXXX)
chmod 755 "$work"
limit=${MEMORY_LIMIT:-1G}
cg_created=

# ---- teardown: whatever was set up, in reverse; runs on every exit -------------------
cleanup() {
  set +e
  [ -n "${load_pid:-}" ] && kill "$load_pid" 2>/dev/null
  if [ "${httpd_path:-}" = lxc ]; then
    lxc-stop -n "$name" -P "$work" -k >/dev/null 2>&1
  fi
  [ -n "${httpd_pid:-}" ] && kill "$httpd_pid" 2>/dev/null && wait "$httpd_pid" 2>/dev/null
  [ -n "${nfs_pid:-}" ] && kill "$nfs_pid" 2>/dev/null && wait "$nfs_pid" 2>/dev/null
  if [ "${nfs_path:-}" = docker ]; then
    docker rm -f "$dk_name" >/dev/null 2>&1
    docker network rm "$dk_netname" >/dev/null 2>&1
  fi
  for rule in "${fw_rules[@]:-}"; do
    # shellcheck disable=SC2086
    [ -n "$rule" ] && iptables -D $rule 2>/dev/null
  done
  ip netns del "sl-httpd-$id" 2>/dev/null
  ip netns del "sl-nfs-$id" 2>/dev/null
  ip link del "$br" 2>/dev/null
  [ -n "$cg_created" ] && rmdir "$cg_created" 2>/dev/null
  rm -rf "$work"
}
fw_rules=()
trap cleanup EXIT
trap 'exit 130' INT TERM

httpd_bin=$(find_bin httpd)
[ -n "$httpd_bin" ] || die "no httpd binary in $static_root/*/release-static or PATH (run BINS_ONLY=1 docker/build.sh httpd, or set HTTPD_BIN)"

# ---- which engines run here -----------------------------------------------------------
httpd_path=netns
if [ -z "${FORCE_NETNS:-}" ] && command -v lxc-execute >/dev/null; then httpd_path=lxc; fi
nfs_path=netns
if [ -z "${FORCE_NO_DOCKER:-}" ] && docker info >/dev/null 2>&1 &&
  docker image inspect "${RUSTNFS_IMAGE:-rustnfs}" >/dev/null 2>&1; then
  nfs_path=docker
fi
echo "path=httpd:$httpd_path,rustnfs:$nfs_path"

allow_forward() { # "CHAIN RULE...": insert now, delete at teardown
  # shellcheck disable=SC2086
  iptables -I $1 && fw_rules+=("$1")
}

# ---- the LXC side: a bridge the host routes -------------------------------------------
ip link show "$br" >/dev/null 2>&1 && die "bridge $br exists already (another run? set NET_ID)"
ip link add "$br" type bridge
ip addr add "$lxc_net.1/24" dev "$br"
ip link set "$br" up
# With Docker's br_netfilter loaded, even frames between two ports of this bridge pass the
# FORWARD chain, whose policy Docker sets to DROP.
if command -v iptables >/dev/null && iptables -S FORWARD >/dev/null 2>&1; then
  allow_forward "FORWARD -i $br -o $br -j ACCEPT"
fi

# ---- rustnfs --------------------------------------------------------------------------
if [ "$nfs_path" = docker ]; then
  nfs_ip=$dk_net.2
  docker network create --subnet "$dk_net.0/24" "$dk_netname" >/dev/null
  # The export is read-only; uid 65534 needs to read it.
  docker run -d --name "$dk_name" --network "$dk_netname" --ip "$nfs_ip" \
    -v "$data_dir:/nfs-share:ro" -e SHARED_DIRECTORY=/nfs-share -e READ_ONLY=true \
    -e PERMITTED="$lxc_net.0/24" "${RUSTNFS_IMAGE:-rustnfs}" >/dev/null
  # Docker's FORWARD policy is DROP: without these, the LXC bridge cannot reach the
  # Docker network (the "LXD lost its network after installing Docker" problem).
  allow_forward "DOCKER-USER -s $lxc_net.0/24 -d $dk_net.0/24 -j ACCEPT"
  allow_forward "DOCKER-USER -s $dk_net.0/24 -d $lxc_net.0/24 -j ACCEPT"
else
  rustnfs_bin=$(find_bin rustnfs)
  [ -n "$rustnfs_bin" ] || die "no Docker and no rustnfs binary (set RUSTNFS_BIN)"
  nfs_ip=$lxc_net.3
  ip netns add "sl-nfs-$id"
  ip link add "slv-n-$id" type veth peer name eth0 netns "sl-nfs-$id"
  ip link set "slv-n-$id" master "$br" up
  ip -n "sl-nfs-$id" addr add "$nfs_ip/24" dev eth0
  ip -n "sl-nfs-$id" link set eth0 up
  ip -n "sl-nfs-$id" link set lo up
  ip netns exec "sl-nfs-$id" "$rustnfs_bin" --export "$data_dir" --read-only \
    --listen "$nfs_ip:2049" --allow "$lxc_net.0/24" >"$work/rustnfs.log" 2>&1 &
  nfs_pid=$!
fi
echo "rustnfs_addr=$nfs_ip:2049"

wait_tcp() { # ADDR PORT SECONDS [NETNS]
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    if timeout 1 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}
wait_tcp "$nfs_ip" 2049 20 || {
  [ "$nfs_path" = docker ] && docker logs "$dk_name" >&2
  [ -f "$work/rustnfs.log" ] && cat "$work/rustnfs.log" >&2
  die "rustnfs did not listen on $nfs_ip:2049"
}

# ---- httpd ----------------------------------------------------------------------------
httpd_args=(--listen "0.0.0.0:$port" --nfs "nfs://$nfs_ip/nfs-share")
[ "$nfs_path" = netns ] && httpd_args=(--listen "0.0.0.0:$port" --nfs "nfs://$nfs_ip$data_dir")
if [ "$httpd_path" = lxc ]; then
  # cgroup v1 (this project's CI machine) or a pure v2 hierarchy: different keys.
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    mem_key="lxc.cgroup2.memory.max = $(numfmt --from=iec "$limit")"
  else
    mem_key="lxc.cgroup.memory.limit_in_bytes = $limit"
  fi
  cat >"$work/config" <<CONF
lxc.uts.name = http-server
lxc.net.0.type = veth
lxc.net.0.link = $br
lxc.net.0.flags = up
lxc.net.0.ipv4.address = $httpd_ip/24
lxc.net.0.ipv4.gateway = $lxc_net.1
$mem_key
lxc.console.path = none
lxc.tty.max = 0
lxc.pty.max = 16
lxc.mount.auto = proc:mixed sys:ro
lxc.init.uid = 65534
lxc.init.gid = 65534
CONF
  lxc-execute -n "$name" -P "$work" -f "$work/config" -- "$httpd_bin" "${httpd_args[@]}" \
    >"$work/httpd.log" 2>&1 &
  httpd_pid=$!
else
  ip netns add "sl-httpd-$id"
  ip link add "slv-h-$id" type veth peer name eth0 netns "sl-httpd-$id"
  ip link set "slv-h-$id" master "$br" up
  ip -n "sl-httpd-$id" addr add "$httpd_ip/24" dev eth0
  ip -n "sl-httpd-$id" link set eth0 up
  ip -n "sl-httpd-$id" link set lo up
  ip -n "sl-httpd-$id" route add default via "$lxc_net.1"
  # The same memory limit, by hand: a cgroup of our own (v1 or v2).
  if [ -d /sys/fs/cgroup/memory ]; then
    cg_created=/sys/fs/cgroup/memory/servelab-httpd-$id
    mkdir "$cg_created"
    numfmt --from=iec "$limit" >"$cg_created/memory.limit_in_bytes"
  elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    cg_created=/sys/fs/cgroup/servelab-httpd-$id
    mkdir "$cg_created"
    numfmt --from=iec "$limit" >"$cg_created/memory.max"
  fi
  (
    [ -n "$cg_created" ] && echo $BASHPID >"$cg_created/cgroup.procs"
    exec ip netns exec "sl-httpd-$id" setpriv --reuid 65534 --regid 65534 --clear-groups \
      "$httpd_bin" "${httpd_args[@]}"
  ) >"$work/httpd.log" 2>&1 &
  httpd_pid=$!
fi
url=http://$httpd_ip:$port/$file
echo "httpd_url=$url"
wait_tcp "$httpd_ip" "$port" 20 || { cat "$work/httpd.log" >&2; die "httpd did not listen on $httpd_ip:$port"; }

# ---- the check: the bytes through LXC -> bridge -> host -> Docker bridge -> rustnfs ----
want=$(sha256sum <"$data_dir/$file" | cut -d' ' -f1)
got=$(curl -fsS --max-time 30 "$url" | sha256sum | cut -d' ' -f1) || true
echo "sha256_disk=$want"
echo "sha256_served=$got"
if [ "$got" != "$want" ]; then
  cat "$work/httpd.log" >&2
  die "bytes served by $url differ from $data_dir/$file"
fi

# ---- memory: the httpd container's cgroup, rustnfs's container -----------------------
httpd_cg() { # the memory cgroup directory of the httpd container
  if [ "$httpd_path" = lxc ]; then
    local d
    for d in /sys/fs/cgroup/memory/lxc.payload."$name" /sys/fs/cgroup/memory/lxc/"$name" \
      /sys/fs/cgroup/lxc.payload."$name"; do
      [ -d "$d" ] && { echo "$d"; return; }
    done
  else
    echo "$cg_created"
  fi
}
mem_report() { # PHASE
  local cg rss usage peak
  cg=$(httpd_cg)
  if [ -n "$cg" ] && [ -f "$cg/memory.stat" ]; then
    rss=$(awk '$1 == "total_rss" || $1 == "anon" { print $2; exit }' "$cg/memory.stat")
    usage=$(cat "$cg/memory.usage_in_bytes" 2>/dev/null || cat "$cg/memory.current")
    peak=$(cat "$cg/memory.max_usage_in_bytes" 2>/dev/null || cat "$cg/memory.peak" 2>/dev/null || echo 0)
    echo "httpd_${1}_rss_bytes=${rss:-0}"
    echo "httpd_${1}_usage_bytes=$usage"
    echo "httpd_${1}_peak_bytes=$peak"
  fi
  if [ "$nfs_path" = docker ]; then
    echo "rustnfs_${1}_docker_mem=$(docker stats --no-stream --format '{{.MemUsage}}' "$dk_name" | cut -d/ -f1 | tr -d ' ')"
  elif [ -n "${nfs_pid:-}" ]; then
    echo "rustnfs_${1}_rss_bytes=$(($(awk '/^VmRSS/ { print $2 }' "/proc/$nfs_pid/status" 2>/dev/null || echo 0) * 1024))"
  fi
}
mem_report idle

servelab_bin=$(find_bin servelab)
requests=${REQUESTS:-100}
if [ "$requests" -gt 0 ] && [ -n "$servelab_bin" ]; then
  results=${RESULTS_DIR:-$PWD/results}
  mkdir -p "$results"
  json=$results/lxc-load.json
  # A new connection per request, like `servelab compare`'s large-file workload and ab.
  "$servelab_bin" load "$url" -n "$requests" -c "${CONCURRENCY:-10}" --no-keepalive \
    --no-progress --json "$json" >&2
  echo "load_json=$json"
  mem_report load
elif [ "$requests" -gt 0 ]; then
  log "no servelab binary: skipping the load step"
fi
echo "result=ok"
