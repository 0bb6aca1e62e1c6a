#!/usr/bin/env bash
# lxc/lxd-deploy.sh — the original experiment's LXD path, run by you on an LXD host: an
# instance with a 1 GB memory limit running the static httpd under systemd, serving the
# files of an NFS export (rustnfs, e.g. the Docker image on this host).
#
#   docker/build.sh                                  # static binaries + images
#   docker run -d --name nfs-server -p 2049:2049 -v ~/nfs-data:/nfs-share \
#     -e SHARED_DIRECTORY=/nfs-share rustnfs
#   lxc/lxd-deploy.sh client  http-server 10.0.0.5   # (b) unprivileged, httpd's NFS client
#   lxc/lxd-deploy.sh kernel  http-server 10.0.0.5   # (a) privileged, kernel NFS mount
#   lxc/memory-report.sh http-server
#
# NFS_SERVER (3rd argument) must be an address the instance can reach: the host's address
# on lxdbr0 or the LAN, not 127.0.0.1. When Docker runs on the same host, its FORWARD
# policy DROP also drops lxdbr0 traffic routed to Docker networks: add
#   iptables -I DOCKER-USER -i lxdbr0 -j ACCEPT
#   iptables -I DOCKER-USER -o lxdbr0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
#
# Modes:
#  client  (b) an UNPRIVILEGED instance; httpd reads the export with its built-in NFSv3
#          client (--nfs nfs://SERVER/EXPORT). No mount, no AppArmor change, no kernel
#          NFS client in the instance.
#  kernel  (a) what the original needed: a PRIVILEGED instance (security.privileged=true)
#          whose AppArmor profile allows NFS mounts (raw.apparmor "mount fstype=nfs*,"),
#          nfs-common installed, the export mounted with the kernel client at /srv/www and
#          httpd serving that directory (--root /srv/www). An unprivileged instance cannot
#          mount NFS: the kernel refuses it in a user namespace.
#
# Environment: IMAGE (default images:debian/12), EXPORT (default /nfs-share),
# NFS_PORT (default 2049), MEMORY (default 1GB), HTTPD_BIN (default the static build).
set -euo pipefail

die() { echo "lxd-deploy.sh: $*" >&2; exit 1; }
[ $# -eq 3 ] || die "usage: $0 client|kernel INSTANCE NFS_SERVER"
mode=$1 inst=$2 server=$3
image=${IMAGE:-images:debian/12}
export_path=${EXPORT:-/nfs-share}
nfs_port=${NFS_PORT:-2049}
repo=$(cd "$(dirname "$0")/.." && pwd)
triple=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p' || echo x86_64-unknown-linux-gnu)
httpd_bin=${HTTPD_BIN:-${STATIC_TARGET_DIR:-${CARGO_TARGET_DIR:-$repo/target}/static}/$triple/release-static/httpd}
[ -x "$httpd_bin" ] || die "no static httpd at $httpd_bin (run BINS_ONLY=1 docker/build.sh httpd)"
command -v lxc >/dev/null || die "the LXD client 'lxc' is not installed"

case $mode in
  client)
    lxc launch "$image" "$inst" -c limits.memory="${MEMORY:-1GB}"
    args="--listen 0.0.0.0:8080 --nfs nfs://$server:$nfs_port$export_path"
    ;;
  kernel)
    lxc launch "$image" "$inst" -c limits.memory="${MEMORY:-1GB}" \
      -c security.privileged=true -c raw.apparmor="mount fstype=nfs*,"
    ;;
  *) die "mode must be client or kernel, not $mode" ;;
esac

# Wait for the instance's network (systemd-networkd + DHCP on lxdbr0).
for _ in $(seq 60); do
  lxc exec "$inst" -- sh -c 'ip -4 route | grep -q default' && break
  sleep 1
done

if [ "$mode" = kernel ]; then
  lxc exec "$inst" -- sh -c 'apt-get update -q && apt-get install -y -q nfs-common'
  lxc exec "$inst" -- mkdir -p /srv/www
  # rustnfs answers NFS and MOUNT on one port and has no lock manager.
  lxc exec "$inst" -- mount -t nfs \
    -o "vers=3,tcp,port=$nfs_port,mountport=$nfs_port,nolock,ro" "$server:$export_path" /srv/www
  lxc exec "$inst" -- sh -c "echo '$server:$export_path /srv/www nfs vers=3,tcp,port=$nfs_port,mountport=$nfs_port,nolock,ro,_netdev 0 0' >> /etc/fstab"
  args="--listen 0.0.0.0:8080 --root /srv/www"
fi

lxc file push "$httpd_bin" "$inst/usr/local/bin/httpd" --mode 0755
lxc file push "$repo/lxc/httpd.service" "$inst/etc/systemd/system/servelab-httpd.service"
defaults=$(mktemp)
printf 'HTTPD_ARGS="%s"\n' "$args" >"$defaults"
lxc file push "$defaults" "$inst/etc/default/servelab-httpd" --mode 0644
rm -f "$defaults"
lxc exec "$inst" -- systemctl daemon-reload
lxc exec "$inst" -- systemctl enable --now servelab-httpd
sleep 1
lxc exec "$inst" -- systemctl --no-pager status servelab-httpd | head -5
addr=$(lxc list "$inst" -c 4 --format csv | cut -d' ' -f1)
echo "httpd: http://$addr:8080/   (memory: lxc/memory-report.sh $inst)"
