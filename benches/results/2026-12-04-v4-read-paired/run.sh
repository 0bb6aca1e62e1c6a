#!/bin/sh
# Issue 32 §2, paired: rustnfs v4.x READ against rustnfs v3 and against NFS-Ganesha over
# the same minor version, and the metadata mix, measured in short runs whose order
# rotates every round, so a ratio is taken between runs a few seconds apart.
#
# Why a second script beside 2026-12-03-v4-read/run.sh: on this VM the host steals
# 10–20 % of the CPU time (/proc/stat's steal column) and the rate of a 3 s run moved by
# up to 2 × between rounds; a fixed order put every v4 run after the v3 run, and a
# round-long drift landed in the ratio. Here each round rotates the order, the ratio is
# computed per round (v4.x against the same round's v3; rustnfs against the same round's
# Ganesha), and the summary gives the median of those paired ratios and their range.
# Server CPU is read from /proc/PID/stat (utime + stime of the whole process, exited
# threads included: Ganesha's workers come and go, which made the per-thread schedstat
# sum of the older script go negative).
#
#   flock -o /tmp/bench.lock sh benches/results/2026-12-04-v4-read-paired/run.sh OUT_DIR
#   python3 benches/results/2026-12-04-v4-read-paired/summary.py OUT_DIR... > summary.md
#
# ROUNDS (8) rounds of SECS (2s) runs; 4 clients; 1 MiB READs of a 64 MiB file in the
# page cache, and `--workload metadata --files 100`. Servers pinned to CPU 1, the load
# tool to CPU 0. Writes OUT_DIR/rates.tsv and each run's report (.txt).
set -eu
OUT=$1
ROUNDS=${ROUNDS:-8}
SECS=${SECS:-2s}
BIN=${BIN:-target/release}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/v4-paired.XXXXXX)
R=$WORK/rustnfs G=$WORK/ganesha
mkdir -p "$R" "$G"
head -c 64M /dev/urandom >"$R/big"
cp "$R/big" "$G/big"
chmod 777 "$R" "$G"; chmod 644 "$R/big" "$G/big"
RP=20741 GP=20743 GM=20744 GN=20745 GQ=20746

taskset -c 1 "$BIN/rustnfs" --export "$R" --listen 127.0.0.1:$RP >"$WORK/rustnfs.log" 2>&1 &
RPID=$!
cat >"$WORK/ganesha.conf" <<CONF
NFS_CORE_PARAM { Protocols = 3, 4; NFS_Port = $GP; MNT_Port = $GM; NLM_Port = $GN;
 Rquota_Port = $GQ; Bind_addr = 127.0.0.1; Enable_NLM = false; Enable_RQUOTA = false; }
NFSV4 { Graceless = true; Only_Numeric_Owners = true; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT { Export_Id = 1; Path = $G; Pseudo = /; Access_Type = RW; Squash = No_Root_Squash;
 Protocols = 3, 4; Transports = TCP; SecType = sys; FSAL { Name = VFS; } }
LOG { Default_Log_Level = WARN; }
CONF
pgrep -x rpcbind >/dev/null || { echo "start rpcbind first (rpcbind -w), outside the lock" >&2; exit 2; }
taskset -c 1 ganesha.nfsd -F -f "$WORK/ganesha.conf" -L "$WORK/ganesha.log" \
    -p "$WORK/ganesha.pid" &
GPID=$!
cleanup() { kill $RPID $GPID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap "exit 130" INT TERM
trap cleanup EXIT
sleep 4

url() { # server version path
    case $1 in rustnfs) p=$RP ;; ganesha) p=$GP ;; esac
    case $1:$2 in
    rustnfs:3) echo "nfs://127.0.0.1//$3?version=3&nfsport=$p&mountport=$p" ;;
    ganesha:3) echo "nfs://127.0.0.1$G/$3?version=3&nfsport=$GP&mountport=$GM&uid=0&gid=0" ;;
    *) echo "nfs://127.0.0.1/$3?version=$2&nfsport=$p&uid=0&gid=0" ;;
    esac
}
ticks() { awk '{print $14 + $15}' /proc/"$1"/stat; }
steal() { awk '/^cpu /{print $9}' /proc/stat; }
CONFIGS="read:rustnfs:3 read:rustnfs:4 read:rustnfs:4.1 read:rustnfs:4.2 read:ganesha:4 read:ganesha:4.1 read:ganesha:4.2 metadata:rustnfs:4 metadata:rustnfs:4.1 metadata:rustnfs:4.2 metadata:ganesha:4 metadata:ganesha:4.1 metadata:ganesha:4.2"
N=$(echo $CONFIGS | wc -w)
printf 'round\twork\tserver\tversion\tops_per_s\tfailed\tserver_cpu_us_per_op\tsteal_ticks\tload1\n' >"$OUT/rates.tsv"
one() { # round work server version
    r=$1 w=$2 s=$3 v=$4
    case $s in rustnfs) pid=$RPID ;; ganesha) pid=$GPID ;; esac
    case $w in
    read) u=$(url "$s" "$v" big); extra="--block 1M" ;;
    metadata) u=$(url "$s" "$v" ""); extra="--workload metadata --files 100" ;;
    esac
    j="$WORK/run.json"; rm -f "$j"
    t0=$(ticks $pid) st0=$(steal)
    # shellcheck disable=SC2086
    taskset -c 0 "$BIN/servelab" load "$u" -c 4 -z "$SECS" --no-progress --json "$j" $extra \
        >"$OUT/$r-$w-$s-v$v.txt" 2>&1 || true
    t1=$(ticks $pid) st1=$(steal)
    python3 - "$j" "$r" "$w" "$s" "$v" "$((t1 - t0))" "$((st1 - st0))" \
        "$(cut -d' ' -f1 /proc/loadavg)" "$(getconf CLK_TCK)" >>"$OUT/rates.tsv" <<'PY'
import json, sys
j, r, w, s, v, ticks, steal, load, hz = sys.argv[1:]
try:
    d = json.load(open(j))
    per = int(ticks) * 1e6 / int(hz) / max(d["requests"], 1)
    print(f"{r}\t{w}\t{s}\t{v}\t{d['requests_per_second']:.1f}\t{d['failed']}\t{per:.1f}\t{steal}\t{load}")
except (OSError, ValueError, KeyError):
    print(f"{r}\t{w}\t{s}\t{v}\tNA\tNA\tNA\t{steal}\t{load}")
PY
}
for r in $(seq 1 "$ROUNDS"); do
    # Rotate: round r starts at configuration r (mod N).
    k=$(( (r - 1) % N ))
    set -- $CONFIGS
    i=0
    for c in "$@"; do
        if [ $i -ge $k ]; then one "$r" $(echo "$c" | tr : ' '); fi
        i=$((i + 1))
    done
    i=0
    for c in "$@"; do
        if [ $i -lt $k ]; then one "$r" $(echo "$c" | tr : ' '); fi
        i=$((i + 1))
    done
done
cat "$OUT/rates.tsv"
