#!/bin/sh
# One invocation of the issue 32 §2 comparison: 4 clients, 1 MiB READs and the metadata
# mix, rustnfs (this branch: v4 READ data sent with sendfile) beside NFS-Ganesha, over v3
# and NFSv4.0/4.1/4.2, plus rustnfs with RUSTNFS_READ_SENDFILE=0 ("copy": READ data
# copied into the reply, which is what main's v4 READ always did). Servers pinned to
# CPU 1, the load tool to CPU 0; ROUNDS rounds, the configurations interleaved in each.
#
#   flock -o /tmp/bench.lock sh benches/results/2026-12-03-v4-read/run.sh OUT_DIR
#
# Writes OUT_DIR/<round>-<config>.json (servelab load --json; not kept in the repo: the
# .txt beside it is its report, percentiles included), .txt and
# OUT_DIR/rates.tsv: ops/s, and the server's CPU time per operation (the sum of its
# threads' /proc/PID/task/*/schedstat run times over the run, divided by the
# operations): on a machine others load, throughput follows who else runs, the CPU an
# operation costs much less so.
set -eu
OUT=$1
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-4s}
BIN=${BIN:-target/release}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/h32-v4read-bench.XXXXXX)
R=$WORK/rustnfs G=$WORK/ganesha C=$WORK/copy
mkdir -p "$R" "$G" "$C"
head -c 64M /dev/urandom >"$R/big"
cp "$R/big" "$G/big"; cp "$R/big" "$C/big"
chmod 777 "$R" "$G" "$C"; chmod 644 "$R/big" "$G/big" "$C/big"
RP=20731 CP=20732 GP=20733 GM=20734 GN=20735 GQ=20736

taskset -c 1 "$BIN/rustnfs" --export "$R" --listen 127.0.0.1:$RP >"$WORK/rustnfs.log" 2>&1 &
RPID=$!
RUSTNFS_READ_SENDFILE=0 taskset -c 1 "$BIN/rustnfs" --export "$C" --listen 127.0.0.1:$CP \
    >"$WORK/copy.log" 2>&1 &
CPID=$!
cat >"$WORK/ganesha.conf" <<CONF
NFS_CORE_PARAM { Protocols = 3, 4; NFS_Port = $GP; MNT_Port = $GM; NLM_Port = $GN;
 Rquota_Port = $GQ; Bind_addr = 127.0.0.1; Enable_NLM = false; Enable_RQUOTA = false; }
NFSV4 { Graceless = true; Only_Numeric_Owners = true; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT { Export_Id = 1; Path = $G; Pseudo = /; Access_Type = RW; Squash = No_Root_Squash;
 Protocols = 3, 4; Transports = TCP; SecType = sys; FSAL { Name = VFS; } }
LOG { Default_Log_Level = WARN; }
CONF
pgrep -x rpcbind >/dev/null || rpcbind -w
taskset -c 1 ganesha.nfsd -F -f "$WORK/ganesha.conf" -L "$WORK/ganesha.log" \
    -p "$WORK/ganesha.pid" &
GPID=$!
cleanup() { kill $RPID $CPID $GPID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap "exit 130" INT TERM
trap cleanup EXIT
sleep 3

url() { # server version
    case $1 in
    rustnfs) p=$RP ;; copy) p=$CP ;; ganesha) p=$GP ;;
    esac
    case $2 in
    3) echo "nfs://127.0.0.1//$3?version=3&nfsport=$p&mountport=$p" ;;
    *) echo "nfs://127.0.0.1/$3?version=$2&nfsport=$p&uid=0&gid=0" ;;
    esac
}
# Ganesha's v3 export path is the directory itself.
gurl3() { echo "nfs://127.0.0.1$G/$1?version=3&nfsport=$GP&mountport=$GM&uid=0&gid=0"; }

READS="rustnfs:3 rustnfs:4 rustnfs:4.1 rustnfs:4.2 ganesha:3 ganesha:4 ganesha:4.1 ganesha:4.2 copy:3 copy:4 copy:4.1 copy:4.2"
META="rustnfs:4 rustnfs:4.1 rustnfs:4.2 ganesha:4 ganesha:4.1 ganesha:4.2"
printf 'round\twork\tserver\tversion\tops_per_s\tfailed\tcpu_us_per_op\tload1\n' \
    >"$OUT/rates.tsv"
cpu_ns() { # pid: nanoseconds its threads have run
    cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{n += $1} END {printf "%.0f", n}'
}
one() { # round workload server version url extra...
    r=$1 w=$2 s=$3 v=$4 u=$5; shift 5
    case $s in rustnfs) pid=$RPID ;; copy) pid=$CPID ;; ganesha) pid=$GPID ;; esac
    j="$OUT/$r-$w-$s-v$v.json"
    before=$(cpu_ns $pid)
    taskset -c 0 "$BIN/servelab" load "$u" -c 4 -z "$SECS" --no-progress --json "$j" "$@" \
        >"$OUT/$r-$w-$s-v$v.txt" 2>&1 || true
    after=$(cpu_ns $pid)
    python3 - "$j" "$r" "$w" "$s" "$v" "$((after - before))" "$(cut -d' ' -f1 /proc/loadavg)" \
        >>"$OUT/rates.tsv" <<'PY'
import json, sys
j, r, w, s, v, ns, load = sys.argv[1:]
try:
    d = json.load(open(j))
    per = int(ns) / 1000 / max(d["requests"], 1)
    print(f"{r}\t{w}\t{s}\t{v}\t{d['requests_per_second']:.1f}\t{d['failed']}\t{per:.1f}\t{load}")
except OSError:
    print(f"{r}\t{w}\t{s}\t{v}\tNA\tNA\tNA\t{load}")
PY
}
for r in $(seq 1 "$ROUNDS"); do
    for sv in $READS; do
        s=${sv%%:*} v=${sv#*:}
        if [ "$s:$v" = ganesha:3 ]; then u=$(gurl3 big); else u=$(url "$s" "$v" big); fi
        one "$r" read "$s" "$v" "$u" --block 1M
    done
    for sv in $META; do
        s=${sv%%:*} v=${sv#*:}
        one "$r" metadata "$s" "$v" "$(url "$s" "$v" "")" --workload metadata --files 100
    done
done
cat "$OUT/rates.tsv"
