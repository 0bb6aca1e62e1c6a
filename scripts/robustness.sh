#!/usr/bin/env bash
# Reruns everything ROBUSTNESS.md reports: the long fuzz run (every target, two at a
# time) and the long soak (rustnfs, httpd local, httpd over NFS, one after the other).
#
#   scripts/robustness.sh            # 30 min per fuzz target (ASan), 10 min soak per server
#   FUZZ_SECONDS=60 SOAK_SECONDS=120 scripts/robustness.sh   # a quicker look
#
# Results: fuzz/logs/<target>.log (libFuzzer's final stats), fuzz/corpus/, fuzz/artifacts/;
# target/soak/{summary.txt,soak.svg,soak-<server>.csv,load-<server>.json}.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SANITIZER="${FUZZ_SANITIZER:-address}" FUZZ_JOBS="${FUZZ_JOBS:-2}" \
  fuzz/run.sh "${FUZZ_SECONDS:-1800}"
SOAK_SECONDS="${SOAK_SECONDS:-600}" cargo test --release --test tests -- --ignored \
  --nocapture soak::long_soak
cat target/soak/summary.txt
