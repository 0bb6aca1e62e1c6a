#!/usr/bin/env bash
# lxc/memory-report.sh — an LXD instance's memory use, reported like the original
# experiment (`lxc info`, `free -m` inside), plus each httpd service's own share (the
# services lxc/lxd-deploy.sh starts: pid files /run/httpd-a.pid, /run/httpd-b.pid).
#
#   lxc/memory-report.sh sl-deploy-web
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 INSTANCE" >&2; exit 1; }
inst=$1
echo "== lxc info $inst (Memory usage)"
lxc info "$inst" | sed -n '/^ *Memory usage:/,/^ *[A-Z][a-z]*[ a-z]*:$/p' | sed '$d'
echo "== free -m inside $inst"
lxc exec "$inst" -- free -m
echo "== the httpd services (VmRSS now, VmHWM = peak)"
for s in httpd-b httpd-a; do
  lxc exec "$inst" -- sh -c "[ -f /run/$s.pid ] || exit 0; echo $s:; grep -E 'VmRSS|VmHWM' /proc/\$(cat /run/$s.pid)/status"
done
