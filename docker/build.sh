#!/usr/bin/env bash
# Builds the statically linked binaries and the FROM-scratch images `rustnfs`, `httpd` and
# `servelab` — no registry, no network (cargo runs --offline; run `cargo fetch` once first).
#
#   docker/build.sh                 # all three images, tagged :latest
#   docker/build.sh rustnfs httpd   # only these
#   TAG=dev docker/build.sh         # tag :dev instead
#   BINS_ONLY=1 docker/build.sh     # only the static binaries (no Docker needed), e.g.
#                                   # for lxc/ and LXD: prints "bin NAME PATH" lines
#
# Environment: TAG (image tag, default latest), STATIC_TARGET_DIR (cargo target dir for the
# static build, default "${CARGO_TARGET_DIR:-target}/static" — a separate directory, so
# this can run while another cargo holds the normal one), CARGO_OFFLINE=0 to allow network.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
tag=${TAG:-latest}
target_dir=${STATIC_TARGET_DIR:-${CARGO_TARGET_DIR:-$repo/target}/static}
all=(rustnfs httpd servelab)
images=("$@")
[ ${#images[@]} -gt 0 ] || images=("${all[@]}")

for name in "${images[@]}"; do
  case " ${all[*]} " in
    *" $name "*) ;;
    *) echo "build.sh: unknown image '$name' (expected one of: ${all[*]})" >&2; exit 2 ;;
  esac
done
bins_only=${BINS_ONLY:-}
if [ -z "$bins_only" ]; then
  command -v docker >/dev/null || { echo "build.sh: docker is not installed (BINS_ONLY=1 builds only the binaries)" >&2; exit 1; }
fi

# An explicit --target keeps build scripts and proc-macros dynamic (they run on the host)
# while the final binaries link glibc statically. glibc 2.34+ has its `files` and `dns`
# resolvers built in, so a static binary still resolves Docker's service names.
triple=$(rustc -vV | sed -n 's/^host: //p')
offline=--offline
[ "${CARGO_OFFLINE:-1}" = 0 ] && offline=
pkgs=()
for name in "${images[@]}"; do pkgs+=(-p "$name"); done
echo "build.sh: static build of ${images[*]} for $triple in $target_dir" >&2
# shellcheck disable=SC2086
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
CARGO_PROFILE_RELEASE_STATIC_DEBUG=0 \
CARGO_PROFILE_RELEASE_STATIC_STRIP=symbols \
  cargo build $offline --manifest-path "$repo/Cargo.toml" --target-dir "$target_dir" \
    --profile release-static --target "$triple" --bins "${pkgs[@]}"

for name in "${images[@]}"; do
  bin="$target_dir/$triple/release-static/$name"
  [ -x "$bin" ] || { echo "build.sh: $bin was not built (does crate $name have a bin?)" >&2; exit 1; }
  # A dynamic binary would fail in a scratch image with a confusing "no such file".
  if readelf -l "$bin" 2>/dev/null | grep -q 'Requesting program interpreter'; then
    echo "build.sh: $bin is dynamically linked; cannot go FROM scratch" >&2
    exit 1
  fi
  if [ -n "$bins_only" ]; then
    echo "bin $name $bin"
    continue
  fi
  # A build context holding only the binary: nothing else of the tree is sent to docker.
  ctx="$target_dir/docker-context/$name"
  rm -rf "$ctx" && mkdir -p "$ctx"
  cp "$bin" "$ctx/$name"
  old_id=$(docker image inspect -f '{{.Id}}' "$name:$tag" 2>/dev/null || true)
  if ! out=$(DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0} docker build -q \
      -f "$repo/docker/$name.Dockerfile" -t "$name:$tag" "$ctx" 2>&1); then
    echo "$out" >&2
    exit 1
  fi
  # The image this tag named before is left untagged: remove it, unless still in use.
  if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect -f '{{.Id}}' "$name:$tag")" ] &&
    [ -z "$(docker image inspect -f '{{join .RepoTags ","}}' "$old_id" 2>/dev/null)" ]; then
    docker rmi "$old_id" >/dev/null 2>&1 || true
  fi
  size=$(docker image inspect -f '{{.Size}}' "$name:$tag")
  awk -v n="$name:$tag" -v s="$size" 'BEGIN { printf "image %s %d bytes (%.2f MB)\n", n, s, s / 1e6 }'
done
