#!/usr/bin/env bash
# Runs this repo's etcdctl scenarios (tests/compat/*.sh) and gateway scenarios
# (tests/compat/http/*.sh) together with the shared differential
# harness's own, against etcd 3.5.1 and a release build of actcd, and diffs the normalized output.
#   tests/compat/run.sh HARNESS_DIR [--only REGEX]
# The server binary is $ACTCD_BIN if set (CI points it at the debug build it already has), else
# target/release/actcd, built if missing.
# HARNESS_DIR is the shared compat harness (compare.sh, lib/, scenarios/). It is copied to a
# temporary directory so our scenarios sit beside its own without touching it.
set -euo pipefail
harness="${1:?usage: tests/compat/run.sh HARNESS_DIR [--only REGEX]}"
shift
repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$harness"/. "$work"/
cp "$repo"/tests/compat/*.sh "$work"/scenarios/
cp "$repo"/tests/compat/http/*.sh "$work"/http-scenarios/
rm -f "$work"/scenarios/run.sh "$work"/scenarios/cluster.sh "$work"/scenarios/v2.sh "$work"/scenarios/v2-cluster.sh
# The harness reads any etcd 3.5.x version as the same API level; actcd reports etcd 3.7's on
# purpose (docs/compatibility.md, "The version actcd reports": so Kubernetes uses RangeStream), a documented
# difference: the copy reads 3.7.x as that level too.
sed -i 's/(?<!\[0-9.\])3\\\.5\\\.\\d+(?!\[0-9.\])/(?<![0-9.])3\\.[57]\\.\\d+(?![0-9.])/' "$work"/lib/normalize.py
grep -q '3\\\.\[57\]' "$work"/lib/normalize.py || { echo "compat: the harness's version pattern has changed; see tests/compat/run.sh" >&2; exit 1; }
# Only etcd 3.5.1 (PyPI) is compared against; skip the Debian 3.4 packages.
# The harness's installer reads `etcd --version | head -1` under pipefail, which now and then
# dies of SIGPIPE (exit 141) when etcd is still writing: try it up to three times.
for attempt in 1 2 3; do
  if SKIP_APT=1 "$work"/install-ref.sh >/dev/null; then break; fi
  [ "$attempt" = 3 ] && { echo "compat: installing etcd 3.5.1 failed" >&2; exit 1; }
done
bin="${ACTCD_BIN:-$repo/target/release/actcd}"
[ -x "$bin" ] || (cd "$repo" && cargo build --release)
"$work"/compare.sh "$@" --candidate-cmd "$bin --name default --data-dir {datadir} \
--listen-client-urls http://127.0.0.1:{port} --advertise-client-urls http://127.0.0.1:{port} \
--listen-peer-urls http://127.0.0.1:{peerport} --initial-advertise-peer-urls http://127.0.0.1:{peerport} \
--initial-cluster default=http://127.0.0.1:{peerport}"
