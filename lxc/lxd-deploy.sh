#!/usr/bin/env bash
# lxc/lxd-deploy.sh — the original experiment's LXD path, for real on one machine: the
# static httpd in an LXD instance (a 1 MB busybox image built here, `limits.memory`,
# `lxc file push --mode 0755 httpd`), run as a service by the instance's init, serving
# scenario B from a dataset pushed into the instance and scenario A from rustnfs in a
# Docker container (or a host process where Docker is missing), then `lxc info`'s memory.
#
#   lxc/lxd-deploy.sh run DATA_DIR    # up, check both scenarios, load, memory, down
#   lxc/lxd-deploy.sh up DATA_DIR     # leave it running; prints key=value lines
#   lxc/lxd-deploy.sh down            # remove everything `up` created
#
# Starts from a fresh machine (run as root): installs `lxd` and `busybox-static` with
# apt-get when missing (INSTALL=0 refuses), starts the daemon when no systemd does
# (`lxd --group root`), and creates only objects of its own, named PREFIX-*: a bridge on
# a private /24 that it checks is unused, a `dir` storage pool, a profile, the image, the
# instance, and for scenario A a Docker network and container. `down` removes exactly
# those (and stops the daemon again if this script started it and nothing else runs).
#
# Environment (all optional):
#   PREFIX        name prefix of every object (default sl-deploy; at most 12 characters)
#   SUBNET        the LXD bridge's /24 as A.B.C (default 10.201.147); Docker's side of
#                 scenario A is A.(B+1).C (default 10.202.147)
#   MEMORY        the instance's limits.memory (default 1GB, like the original)
#   CPUS          the instance's limits.cpu (default: unlimited)
#   HTTPD_BIN / RUSTNFS_BIN / SERVELAB_BIN   binaries (default docker/build.sh's static
#                 build, built with BINS_ONLY=1 when missing)
#   RUSTNFS_IMAGE Docker image for scenario A (default rustnfs; built when missing)
#   NFS_ON=docker|host   where rustnfs runs (default docker when an engine answers)
#   HTTPD_ARGS    extra httpd flags for both services (e.g. "--workers 1")
#   FILE          file checked and loaded (default testfile.bin)
#   REQUESTS, CONCURRENCY   `run`'s load per scenario (default 100 / 10; 0 skips it);
#                 one new connection per request, like `servelab compare`
#   RESULTS_DIR   `run` keeps lxd-a.json / lxd-b.json there
#   INSTALL=0     never apt-get install
#
# Output: key=value lines on stdout (path, urls, checksums, memory in bytes); progress and
# `lxc info`'s own lines on stderr. Exit status 0 only when both scenarios served the
# file's exact bytes; 3 when LXD cannot be installed or started; 1 on any other failure.
set -euo pipefail

die() { echo "lxd-deploy.sh: $*" >&2; exit 1; }
# Exit status 3: LXD itself cannot be installed or started here (the tests skip on it
# outside CI).
unavailable() { echo "lxd-deploy.sh: LXD unavailable: $*" >&2; exit 3; }
log() { echo "lxd-deploy.sh: $*" >&2; }

usage="usage: $0 run DATA_DIR | up DATA_DIR | down"
[ $# -ge 1 ] || die "$usage"
cmd=$1
shift
case $cmd in
  run | up) [ $# -eq 1 ] || die "$usage" ;;
  down) [ $# -eq 0 ] || die "$usage" ;;
  *) die "$usage" ;;
esac
[ "$(id -u)" = 0 ] || die "needs root (LXD daemon, bridge, iptables); there is no sudo to add"

prefix=${PREFIX:-sl-deploy}
[ ${#prefix} -le 12 ] || die "PREFIX '$prefix' is longer than 12 characters (bridge names end at 15)"
inst=$prefix-web
img=$prefix-busybox
net=$prefix-br
pool=$prefix-pool
profile=$prefix
dk_net=$prefix-nfs
dk_nfs=$prefix-rustnfs
subnet=${SUBNET:-10.201.147}
[[ $subnet =~ ^10\.([0-9]{1,3})\.([0-9]{1,3})$ ]] || die "SUBNET must look like 10.B.C (a private /24), not '$subnet'"
dk_subnet=10.$((BASH_REMATCH[1] + 1)).${BASH_REMATCH[2]}
host_ip=$subnet.1
inst_ip=$subnet.10
port_b=8080
port_a=8081
file=${FILE:-testfile.bin}
state=/run/$prefix-lxd
repo=$(cd "$(dirname "$0")/.." && pwd)

# ---- teardown: exactly what the state directory says we created ----------------------
down() {
  set +e
  [ -d "$state" ] || { log "nothing to remove ($state does not exist)"; return 0; }
  if [ -f "$state/lxd-ready" ]; then
    lxc delete --force "$inst" >/dev/null 2>&1
    lxc image delete "$img" >/dev/null 2>&1
    [ -f "$state/profile" ] && lxc profile delete "$profile" >/dev/null 2>&1
    [ -f "$state/network" ] && lxc network delete "$net" >/dev/null 2>&1
    [ -f "$state/pool" ] && lxc storage delete "$pool" >/dev/null 2>&1
  fi
  if [ -f "$state/docker" ]; then
    docker rm -f "$dk_nfs" >/dev/null 2>&1
    docker network rm "$dk_net" >/dev/null 2>&1
  fi
  if [ -f "$state/nfs.pid" ]; then
    kill "$(cat "$state/nfs.pid")" 2>/dev/null
  fi
  if [ -f "$state/fw" ]; then
    while read -r rule; do
      # shellcheck disable=SC2086
      [ -n "$rule" ] && iptables -D $rule 2>/dev/null
    done <"$state/fw"
  fi
  if [ -f "$state/lxd.pid" ]; then
    if [ -z "$(lxc list --format csv -c n 2>/dev/null)" ]; then
      lxd shutdown --timeout 30 >/dev/null 2>&1 || kill "$(cat "$state/lxd.pid")" 2>/dev/null
      log "stopped the LXD daemon this script started"
    else
      log "left the LXD daemon running: other instances use it"
    fi
  fi
  rm -rf "$state"
  log "removed $inst, $img, $profile, $net, $pool and scenario A's rustnfs"
  return 0
}

if [ "$cmd" = down ]; then
  down
  exit 0
fi

data_dir=$(cd "$1" 2>/dev/null && pwd) || die "DATA_DIR $1 does not exist"
[ -f "$data_dir/$file" ] || die "$data_dir/$file does not exist (FILE=... names another file)"
[ -e "$state" ] && die "$state exists: a previous run is still up (run: $0 down)"
mkdir -p "$state"
if [ "$cmd" = run ]; then
  trap down EXIT
  trap 'exit 130' INT TERM
fi

# ---- 1. LXD: installed, running, ours to use ------------------------------------------
apt_install() { # PKG...: only on a machine where they are missing
  [ "${INSTALL:-1}" = 0 ] && unavailable "$* missing and INSTALL=0 (apt-get install -y $*)"
  command -v apt-get >/dev/null || unavailable "$* missing and no apt-get to install them"
  log "apt-get install -y $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2; } ||
    unavailable "apt-get install $* failed"
}
command -v lxd >/dev/null && command -v lxc >/dev/null || apt_install lxd
[ -x /bin/busybox ] && ! readelf -l /bin/busybox 2>/dev/null | grep -q interpreter ||
  apt_install busybox-static

if ! lxc info >/dev/null 2>&1; then
  # No systemd here to socket-activate it: start the daemon ourselves, detached.
  log "starting the LXD daemon (lxd --group root)"
  setsid lxd --group root --logfile "$state/lxd.log" </dev/null >/dev/null 2>&1 &
  pid=$!
  lxd waitready --timeout 60 || { cat "$state/lxd.log" >&2; unavailable "the daemon did not become ready"; }
  # Ours only if it is still the one running (another run may have started one first).
  kill -0 "$pid" 2>/dev/null && echo "$pid" >"$state/lxd.pid"
fi
touch "$state/lxd-ready"
echo "lxd_version=$(lxd --version)"

# The bridge's /24 must be unused: no route, no interface, no Docker network on it.
if ! lxc network show "$net" >/dev/null 2>&1; then
  for s in "$subnet" "$dk_subnet"; do
    if ip -4 route | grep -q "^$s\.0/24\|^$s\.[0-9]* " ||
      ip -4 addr | grep -q "inet $s\."; then
      die "$s.0/24 is in use on this machine (pick another SUBNET)"
    fi
  done
fi

# One preseed creates what is missing — additive, it leaves other users' LXD objects alone:
# a bridge without DHCP or NAT (addresses are set by hand), a dir pool, a profile.
preseed=$state/preseed.yaml
{
  echo "networks:"
  if ! lxc network show "$net" >/dev/null 2>&1; then
    touch "$state/network"
    cat <<YAML
- name: $net
  type: bridge
  config:
    ipv4.address: $host_ip/24
    ipv4.nat: "false"
    ipv4.dhcp: "false"
    ipv6.address: none
YAML
  fi
  echo "storage_pools:"
  if ! lxc storage show "$pool" >/dev/null 2>&1; then
    touch "$state/pool"
    cat <<YAML
- name: $pool
  driver: dir
YAML
  fi
  echo "profiles:"
  if ! lxc profile show "$profile" >/dev/null 2>&1; then
    touch "$state/profile"
    cat <<YAML
- name: $profile
  devices:
    root:
      path: /
      pool: $pool
      type: disk
    eth0:
      name: eth0
      network: $net
      type: nic
YAML
  fi
} >"$preseed"
# Empty sections are written as `[]` for the YAML parser.
awk '/^[a-z_]+:$/ { if (h) print h " []"; h = $0; next } { if (h) print h; h = ""; print }
     END { if (h) print h " []" }' "$preseed" >"$preseed.2"
lxd init --preseed <"$preseed.2" || die "lxd init --preseed failed ($preseed.2)"
echo "lxd_bridge=$net $host_ip/24"

# ---- 2. the static binaries -----------------------------------------------------------
triple=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p' || true)
static_dir=${STATIC_TARGET_DIR:-${CARGO_TARGET_DIR:-$repo/target}/static}/${triple:-x86_64-unknown-linux-gnu}/release-static
find_bin() { # NAME: $NAME_BIN, else the static build (built now when missing)
  local var v
  var="$(echo "$1" | tr '[:lower:]' '[:upper:]')_BIN"
  v=${!var:-$static_dir/$1}
  if [ ! -x "$v" ] && [ -z "${!var:-}" ]; then
    log "building the static $1 (BINS_ONLY=1 docker/build.sh $1)"
    BINS_ONLY=1 "$repo/docker/build.sh" "$1" >&2 || die "docker/build.sh $1 failed"
  fi
  [ -x "$v" ] || die "no $1 binary at $v"
  echo "$v"
}
httpd_bin=$(find_bin httpd)
# Only a static binary runs in a busybox rootfs (a glibc-dynamic one: "not found").
readelf -l "$httpd_bin" 2>/dev/null | grep -q 'program interpreter' &&
  die "$httpd_bin is dynamically linked; the instance has no libc (use docker/build.sh's)"

# ---- 3. the image: busybox-static, init keeping the two httpd services up --------------
if ! lxc image info "$img" >/dev/null 2>&1; then
  build=$state/image
  root=$build/rootfs
  mkdir -p "$root"/{bin,sbin,etc/servelab,proc,sys,dev,tmp,run,var/log,usr/local/bin,srv/www,root}
  cp /bin/busybox "$root/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
  done
  ln -sf ../bin/busybox "$root/sbin/init"
  # A service: busybox init respawns it; until httpd and its arguments are pushed it
  # waits. The pid file names httpd itself (exec keeps the pid).
  cat >"$root/etc/servelab/service" <<'SH'
#!/bin/sh
# /etc/servelab/service NAME: runs /usr/local/bin/httpd with /etc/servelab/NAME.args
name=$1
if [ ! -x /usr/local/bin/httpd ] || [ ! -f "/etc/servelab/$name.args" ]; then
  exec sleep 1
fi
. "/etc/servelab/$name.args"
echo $$ >"/run/$name.pid"
exec /usr/local/bin/httpd $ARGS >>"/var/log/$name.log" 2>&1
SH
  chmod 755 "$root/etc/servelab/service"
  cat >"$root/etc/inittab" <<'TAB'
::sysinit:/bin/hostname http-server
::respawn:/etc/servelab/service httpd-b
::respawn:/etc/servelab/service httpd-a
TAB
  echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
  echo "root:x:0:" >"$root/etc/group"
  cat >"$build/metadata.yaml" <<YAML
architecture: $(uname -m)
creation_date: $(date +%s)
properties:
  description: busybox-static with the servelab httpd services
  os: busybox
YAML
  tar -C "$build" -czf "$build/metadata.tar.gz" metadata.yaml
  tar -C "$root" --numeric-owner -czf "$build/rootfs.tar.gz" .
  lxc image import "$build/metadata.tar.gz" "$build/rootfs.tar.gz" --alias "$img" >&2 ||
    die "lxc image import failed"
  rm -rf "$build"
fi
echo "lxd_image=$img $(lxc image info "$img" | sed -n 's/^Size: //p')"

# ---- 4. the instance ------------------------------------------------------------------
limits=(-c "limits.memory=${MEMORY:-1GB}")
[ -n "${CPUS:-}" ] && limits+=(-c "limits.cpu=$CPUS")
lxc --quiet launch "$img" "$inst" -p "$profile" "${limits[@]}" || die "lxc launch failed"
# No DHCP on our bridge: the address by hand.
lxc exec "$inst" -- ip addr add "$inst_ip/24" dev eth0
lxc exec "$inst" -- ip link set eth0 up
lxc exec "$inst" -- ip link set lo up
lxc exec "$inst" -- ip route add default via "$host_ip"
echo "lxd_instance=$inst $inst_ip limits.memory=${MEMORY:-1GB} limits.cpu=${CPUS:-none}"

# Scenario B's files in the instance's own file system (its root disk on our dir pool).
# (`push -r DIR` lands as /srv/<basename of DIR>: renamed to /srv/www.)
lxc exec "$inst" -- rmdir /srv/www
lxc --quiet file push -r "$data_dir" "$inst/srv/" || die "lxc file push -r $data_dir failed"
base=$(basename "$data_dir")
[ "$base" = www ] || lxc exec "$inst" -- mv "/srv/$base" /srv/www
lxc exec "$inst" -- chmod -R a+rX /srv/www

# ---- 5. scenario A's NFS server: rustnfs in Docker (or a host process) -----------------
nfs_on=${NFS_ON:-}
if [ -z "$nfs_on" ]; then
  if docker info >/dev/null 2>&1; then nfs_on=docker; else nfs_on=host; fi
fi
echo "path=httpd:lxd,rustnfs:$nfs_on"
allow_forward() { # "CHAIN RULE...": insert now, delete in `down`
  # shellcheck disable=SC2086
  iptables -I $1 && echo "$1" >>"$state/fw"
}
# With Docker's br_netfilter loaded, even host<->instance frames on our bridge can meet
# a FORWARD policy of DROP; accept our bridge's own traffic for the run.
if iptables -S FORWARD >/dev/null 2>&1; then
  allow_forward "FORWARD -i $net -o $net -j ACCEPT"
fi
case $nfs_on in
  docker)
    image=${RUSTNFS_IMAGE:-rustnfs}
    if ! docker image inspect "$image" >/dev/null 2>&1; then
      log "building the $image image (docker/build.sh rustnfs)"
      "$repo/docker/build.sh" rustnfs >&2 || die "docker/build.sh rustnfs failed"
    fi
    touch "$state/docker"
    nfs_ip=$dk_subnet.2
    docker network create --subnet "$dk_subnet.0/24" "$dk_net" >/dev/null
    docker run -d --name "$dk_nfs" --network "$dk_net" --ip "$nfs_ip" \
      -v "$data_dir:/nfs-share:ro" -e SHARED_DIRECTORY=/nfs-share -e READ_ONLY=true \
      -e PERMITTED="$subnet.0/24,$dk_subnet.0/24,127.0.0.1/32" "$image" >/dev/null
    # Docker's FORWARD policy is DROP: traffic routed from our LXD bridge to a Docker
    # network is dropped unless DOCKER-USER accepts it.
    allow_forward "DOCKER-USER -s $subnet.0/24 -d $dk_subnet.0/24 -j ACCEPT"
    allow_forward "DOCKER-USER -s $dk_subnet.0/24 -d $subnet.0/24 -j ACCEPT"
    nfs_url=nfs://$nfs_ip/nfs-share
    ;;
  host)
    rustnfs_bin=$(find_bin rustnfs)
    nfs_ip=$host_ip
    "$rustnfs_bin" --export "$data_dir" --read-only --listen "$host_ip:2049" \
      --allow "$subnet.0/24" </dev/null >"$state/rustnfs.log" 2>&1 &
    echo $! >"$state/nfs.pid"
    nfs_url=nfs://$nfs_ip$data_dir
    ;;
  *) die "NFS_ON must be docker or host, not $nfs_on" ;;
esac
echo "rustnfs_addr=$nfs_ip:2049"
wait_tcp() { # ADDR PORT SECONDS
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    timeout 1 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
wait_tcp "$nfs_ip" 2049 20 || {
  [ "$nfs_on" = docker ] && docker logs "$dk_nfs" >&2
  [ -f "$state/rustnfs.log" ] && cat "$state/rustnfs.log" >&2
  die "rustnfs did not listen on $nfs_ip:2049"
}

# ---- 6. httpd: pushed, started as the instance's two services ------------------------
lxc --quiet file push --mode 0755 "$httpd_bin" "$inst/usr/local/bin/httpd"
args=$state/args
printf 'ARGS="--listen 0.0.0.0:%s --root /srv/www %s"\n' "$port_b" "${HTTPD_ARGS:-}" >"$args"
lxc --quiet file push --mode 0644 "$args" "$inst/etc/servelab/httpd-b.args"
printf 'ARGS="--listen 0.0.0.0:%s --nfs %s %s"\n' "$port_a" "$nfs_url" "${HTTPD_ARGS:-}" >"$args"
lxc --quiet file push --mode 0644 "$args" "$inst/etc/servelab/httpd-a.args"
url_b=http://$inst_ip:$port_b
url_a=http://$inst_ip:$port_a
for u in "$port_b" "$port_a"; do
  wait_tcp "$inst_ip" "$u" 20 || {
    lxc exec "$inst" -- sh -c 'cat /var/log/httpd-*.log' >&2
    die "httpd in $inst did not listen on $inst_ip:$u"
  }
done
echo "url_b=$url_b"
echo "url_a=$url_a"
for s in b a; do
  echo "httpd_${s}_pid=$(lxc exec "$inst" -- cat "/run/httpd-$s.pid")"
done

# ---- 7. the check: both scenarios serve the file's exact bytes -------------------------
want=$(sha256sum <"$data_dir/$file" | cut -d' ' -f1)
echo "sha256_disk=$want"
for s in b a; do
  u=url_$s
  got=$(curl -fsS --max-time 30 "${!u}/$file" | sha256sum | cut -d' ' -f1) || true
  echo "sha256_$s=$got"
  if [ "$got" != "$want" ]; then
    lxc exec "$inst" -- cat "/var/log/httpd-$s.log" >&2
    die "${!u}/$file served other bytes than $data_dir/$file"
  fi
done

# ---- 8. memory: lxc info, the instance's state in bytes, each service's RSS -----------
memory() { # PHASE
  log "lxc info $inst ($1):"
  lxc info "$inst" | sed -n '/^ *Memory usage:/,/^ *[A-Z][a-z]*[ a-z]*:$/p' | sed '$d' >&2
  { lxc query "/1.0/instances/$inst/state" | tr -d ' \t\n'; echo; } |
    sed -n 's/.*"memory":{\([^}]*\)}.*/\1/p' | tr ',' '\n' |
    sed -n "s/^\"usage\":\([0-9]*\)/lxd_${1}_memory_bytes=\1/p; s/^\"usage_peak\":\([0-9]*\)/lxd_${1}_memory_peak_bytes=\1/p"
  for s in b a; do
    lxc exec "$inst" -- sh -c "awk '/^VmRSS/ { r = \$2 } /^VmHWM/ { h = \$2 }
      END { print \"httpd_${s}_${1}_rss_bytes=\" r * 1024; print \"httpd_${s}_${1}_peak_rss_bytes=\" h * 1024 }' \
      /proc/\$(cat /run/httpd-$s.pid)/status"
  done
  if [ "$nfs_on" = docker ]; then
    echo "rustnfs_${1}_docker_mem=$(docker stats --no-stream --format '{{.MemUsage}}' "$dk_nfs" | cut -d/ -f1 | tr -d ' ')"
  fi
}
memory idle

if [ "$cmd" = up ]; then
  echo "result=up ($0 down removes it)"
  exit 0
fi

requests=${REQUESTS:-100}
if [ "$requests" -gt 0 ]; then
  servelab_bin=$(find_bin servelab)
  out=${RESULTS_DIR:-$state}
  for s in b a; do
    u=url_$s
    # --no-keepalive: a new connection per request, as `servelab compare` (and `ab`) do.
    "$servelab_bin" load "${!u}/$file" -n "$requests" -c "${CONCURRENCY:-10}" --no-keepalive \
      --no-progress --json "$out/lxd-$s.json" >&2 || die "servelab load on ${!u} failed"
    [ -n "${RESULTS_DIR:-}" ] && echo "load_json_$s=$out/lxd-$s.json"
  done
  memory load
fi
echo "result=ok"
