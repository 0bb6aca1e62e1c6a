#!/usr/bin/env bash
# docker/stack-deploy.sh — deploys docker/stack.yml in two steps: rustnfs alone first, to
# learn its address on the overlay (httpd's NFS client takes an IP, not a name), then the
# whole stack with RUSTNFS_ADDR set. With RUSTNFS_ADDR already set, one `stack deploy`.
#
#   DATA_DIR=/srv/lab/www RESULTS_DIR=/srv/lab/results docker/stack-deploy.sh lab
#   MESH=1 ... docker/stack-deploy.sh lab     # also publish httpd via the routing mesh
#
# Every variable of docker/stack.yml is passed through (HTTPD_REPLICAS, LOADGEN_REPLICAS,
# REQUESTS, CONCURRENCY, FILE, ENDPOINT_MODE, TAG, ...). Prints `rustnfs_addr=IP`.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 STACK" >&2; exit 2; }
stack=$1
dir=$(cd "$(dirname "$0")" && pwd)
files=(-c "$dir/stack.yml")
[ -n "${MESH:-}" ] && files+=(-c "$dir/stack.mesh.yml")

if [ -z "${RUSTNFS_ADDR:-}" ]; then
  HTTPD_REPLICAS=0 LOADGEN_REPLICAS=0 RUSTNFS_ADDR=0.0.0.0 \
    docker stack deploy --resolve-image never -c "$dir/stack.yml" "$stack" >&2
  for _ in $(seq 300); do
    task=$(docker ps -q --filter "label=com.docker.swarm.service.name=${stack}_rustnfs" \
      --filter status=running | head -1)
    [ -n "$task" ] && break
    sleep 0.2
  done
  [ -n "${task:-}" ] || { echo "stack-deploy.sh: no running rustnfs task after 60 s" >&2; exit 1; }
  RUSTNFS_ADDR=$(docker inspect -f \
    "{{(index .NetworkSettings.Networks \"${stack}_lab\").IPAddress}}" "$task")
  export RUSTNFS_ADDR
fi
docker stack deploy --resolve-image never "${files[@]}" "$stack" >&2
echo "rustnfs_addr=$RUSTNFS_ADDR"
