#!/usr/bin/env bash
# lxc/memory-report.sh — an LXD instance's memory use, reported like the original
# experiment (`lxc info`, `free -m` inside), plus the httpd service's own share.
#
#   lxc/memory-report.sh http-server
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 INSTANCE" >&2; exit 1; }
inst=$1
echo "== lxc info $inst (Memory usage)"
lxc info "$inst" | sed -n '/^ *Memory usage:/,/^ *[A-Z][a-z]* usage:/p' | sed '$d'
echo "== free -m inside $inst"
lxc exec "$inst" -- free -m
echo "== servelab-httpd service (systemd's cgroup accounting)"
lxc exec "$inst" -- systemctl show servelab-httpd -p MemoryCurrent -p MemoryPeak 2>/dev/null || true
lxc exec "$inst" -- sh -c 'pid=$(systemctl show -p MainPID --value servelab-httpd); grep -E "VmRSS|VmHWM" /proc/$pid/status'
