# The v2 cluster scenarios (sourced by tests/compat/v2-cluster.sh after tests/compat/v2/steps.sh).
# Each sc_NAME runs against a fresh cluster (m1..m3, or the TLS member t1 for sc_tls).
# Expected: NAME, CPORT, PPORT, MID (hex member ids), curl_url, kill_member, CTL2, CTL3, CERTS,
# TMPD, READY_AT, and steps.sh's _http/_show/_remember/wait_watchers/ctl_collect/bg_req/collect.
#
# Transcript markers read (and removed) by prenorm.py:
#   @@ leader HEXID   the leader from here on (found with the v3 etcdctl's endpoint status,
#                     independently of the v2 answers under test), or "none"
#   @@ id NAME HEXID  a member id made at run time (m4's), shown as <NAME>

SCENARIOS=(three membership degraded tls)

# cctl I ARGS...: one etcdctl v2 command through member I only (--no-sync keeps it there)
cctl() {
  local i="$1"
  shift
  echo "\$ etcdctl [${NAME[$i]}] $*"
  ETCDCTL_API=2 timeout 20 "$CTL2" --no-sync --endpoints "$(curl_url "$i")" "$@" </dev/null 2>&1
  echo "[exit $?]"
}

# cctl_sync I ARGS...: the same, letting etcdctl sync its endpoints from member I's member list
cctl_sync() {
  local i="$1"
  shift
  echo "\$ etcdctl [${NAME[$i]}, synced] $*"
  ETCDCTL_API=2 timeout 20 "$CTL2" --endpoints "$(curl_url "$i")" "$@" </dev/null 2>&1
  echo "[exit $?]"
}

# cctl_bg NAME I ARGS...: an etcdctl v2 command through member I in the background
cctl_bg() {
  local name="$1" i="$2"
  shift 2
  echo "[${NAME[$i]}] $*" >"$TMPD/ctl.$name.cmd"
  ETCDCTL_API=2 timeout 20 "$CTL2" --no-sync --endpoints "$(curl_url "$i")" "$@" </dev/null >"$TMPD/ctl.$name.out" 2>&1 &
  BG_PIDS[ctl.$name]=$!
}

# creq I METHOD PATH [curl args...]: one request to member I, printed in full
creq() {
  local i="$1"
  shift
  creq_as "${NAME[$i]}" "$i" "$@"
}

# creq_as LABEL I METHOD PATH [curl args...]: the same, the member shown as LABEL
creq_as() {
  local label="$1" i="$2" method="$3" path="$4"
  shift 4
  local f="$TMPD/req"
  rm -f "$f.h" "$f.b"
  echo "\$ curl -X $method $path${*:+ $*}  [$label]"
  U="$(curl_url "$i")" _http "$f" "$method" "$path" "$@"
  local rc=$?
  _show "$f" "$rc"
  _remember "$f"
}

# until_ok SECONDS CMD...: polls CMD every 0.1 s until it succeeds; on timeout, says so in the
# transcript (so that a side that never gets there differs)
until_ok() {
  local n=$(($1 * 10))
  shift
  for _ in $(seq "$n"); do
    "$@" && return 0
    sleep 0.1
  done
  echo "# timed out waiting for: $*"
  return 1
}
key_status() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$(curl_url "$1")/v2/keys$2")" = "$3" ]; }
key_gone_everywhere() { key_status 1 "$1" 404 && key_status 2 "$1" 404 && key_status 3 "$1" 404; }
# leaderless I: member I's /v2/members/leader says there is no leader (503; the v3 status
# RPC does not answer without a leader, so the v2 answer under test is the signal: a side that
# never gets there times out, which shows in its transcript)
leaderless() {
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$(curl_url "$1")/v2/members/leader")" = 503 ]
}
health_is() { curl -s --max-time 2 "$(curl_url "$1")/health" | grep "\"health\":\"$2\"" >/dev/null; }

# mark_leader I...: waits until the live members I... agree on a leader (v3 endpoint status)
# and writes the marker; sets LEADER_I (0 when there is none)
LEADER_I=0
mark_leader() {
  local eps="" i out
  for i in "$@"; do eps+="${eps:+,}127.0.0.1:${CPORT[$i]}"; done
  for _ in $(seq 50); do
    out="$("$CTL3" --endpoints="$eps" --command-timeout=1s endpoint status -w json 2>/dev/null | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    sys.exit()
leaders = {format(e["Status"]["leader"], "x") for e in d}
if len(d) == int(sys.argv[1]) and len(leaders) == 1 and "0" not in leaders:
    print(leaders.pop())' "$#")"
    if [ -n "$out" ]; then
      echo "@@ leader $out"
      LEADER_I=0
      for i in 1 2 3; do [ "${MID[$i]}" = "$out" ] && LEADER_I=$i; done
      return 0
    fi
    sleep 0.1
  done
  echo "@@ leader none"
  LEADER_I=0
}

sc_three() {
  mark_leader 1 2 3
  note "the members, through each member"
  cctl 1 member list
  cctl 2 member list
  cctl 3 member list
  cctl_sync 2 member list
  cctl 1 cluster-health
  cctl 2 cluster-health
  cctl 3 cluster-health
  creq 1 GET /v2/members
  creq 3 GET /v2/members/
  creq 2 GET /v2/machines
  note "keys: written through m1, read through m2 (quorum) and m3 (local, once applied there)"
  cctl 1 set /a 1
  cctl 2 get --quorum /a
  until_ok 10 key_status 3 /a 200
  cctl 3 get /a
  cctl 3 -o extended get /a
  cctl 2 set /d/x 2
  cctl 3 set /d/y 3
  cctl 1 ls
  cctl 1 ls --recursive --sort
  until_ok 10 key_status 2 /d/y 200
  cctl 2 ls --sort /d
  cctl_sync 3 get --quorum /d/x
  creq 2 GET '/v2/keys/?recursive=true&sorted=true&quorum=true'
  note "a key with a TTL of 2 s, set through m3, polled until it is gone on all three"
  cctl 3 set --ttl 2 /t tv
  cctl 1 get --quorum /t
  until_ok 15 key_gone_everywhere /t
  cctl 1 get /t
  cctl 2 get /t
  cctl 3 get /t
  creq 1 GET /v2/keys/t
  note "mk / rm"
  cctl 2 mk /m 1
  cctl 3 mk /m 2
  cctl 1 -o extended get --quorum /m
  cctl 1 rm /m
  cctl 2 rm /m
  cctl 3 mkdir /md
  cctl 1 rmdir /md
  cctl 2 rm --recursive /d
  note "watch through m2 for writes through m1"
  cctl 1 set /w 1
  creq 1 GET '/v2/keys/w?quorum=true'
  local mi="$LAST_MI"
  cctl 2 watch --after-index "$((mi - 1))" /w
  cctl 2 -o json watch --after-index "$((mi - 1))" /w
  cctl 2 watch --after-index "$((mi - 2))" /w
  cctl_bg one 2 watch /w
  U="$(curl_url 2)" wait_watchers 1
  quiet_on 1 PUT '/v2/keys/w?value=2'
  U="$(curl_url 2)" ctl_collect one 1
  cctl_bg forever 2 -o extended watch --forever --recursive /wd
  U="$(curl_url 2)" wait_watchers 1
  quiet_on 1 PUT '/v2/keys/wd/a?value=x'
  sleep 0.3
  quiet_on 3 DELETE '/v2/keys/wd/a'
  U="$(curl_url 2)" ctl_collect forever 14
  note "a curl watch on m3 woken by a write through m2"
  U="$(curl_url 3)" bg_req w1 '/v2/keys/cw?wait=true'
  U="$(curl_url 3)" wait_watchers 1
  quiet_on 2 PUT '/v2/keys/cw?value=1'
  U="$(curl_url 3)" collect w1
  note "leadership (the leader's identity normalized: it differs by run)"
  mark_leader 1 2 3
  creq 1 GET /v2/members/leader
  creq 2 GET /v2/members/leader
  creq 3 GET /v2/members/leader
  creq 1 GET /v2/stats/self
  creq 2 GET /v2/stats/self
  creq 3 GET /v2/stats/self
  local l="$LEADER_I" f=1
  [ "$l" = 0 ] && l=1
  [ "$l" = 1 ] && f=2
  creq_as leader "$l" GET /v2/stats/leader
  creq_as follower "$f" GET /v2/stats/leader
  cctl 3 member list
}

# quiet_on I METHOD PATH: a request to member I whose response is not part of the transcript
quiet_on() {
  local i="$1"
  shift
  U="$(curl_url "$i")" quiet "$@"
}

sc_membership() {
  # etcd refuses membership changes until every peer stream has been up for 5 s (its
  # --strict-reconfig-check health rule): let that much time pass since the cluster was ready.
  local left=$((READY_AT + 6 - SECONDS))
  [ "$left" -gt 0 ] && sleep "$left"
  mark_leader 1 2 3
  cctl 1 member list
  echo "\$ etcdctl [m1] member add m4 http://127.0.0.1:${PPORT[4]}"
  local out rc id
  out="$(ETCDCTL_API=2 timeout 20 "$CTL2" --no-sync --endpoints "$(curl_url 1)" member add m4 "http://127.0.0.1:${PPORT[4]}" </dev/null 2>&1)"
  rc=$?
  id="$(echo "$out" | sed -n 's/^Added member named m4 with ID \([0-9a-f]*\) to cluster$/\1/p')"
  [ -n "$id" ] && echo "@@ id m4 $id"
  echo "$out"
  echo "[exit $rc]"
  mark_leader 1 2 3
  cctl 2 member list
  cctl 3 member list
  creq 3 GET /v2/members
  cctl 1 cluster-health
  # A loaded machine can cost the reference its leader for a moment here (one CI run saw etcd
  # answer "has no leader" to the refused adds); the refusals under test need one.
  mark_leader 1 2 3
  note "refused while m4 has never connected (etcd's strict reconfiguration check)"
  cctl 2 member add m5 "http://127.0.0.1:${PPORT[4]}"
  cctl 2 member add m5 "http://127.0.0.1:${PPORT[1]}"
  creq 2 POST /v2/members -H 'Content-Type: application/json' -d "{\"peerURLs\":[\"http://127.0.0.1:${PPORT[4]}\"]}"
  cctl 2 member remove "${id:-1234}"
  cctl 3 member remove "${id:-1234}"
  cctl 3 member remove zz
  creq 1 DELETE "/v2/members/${id:-1234}"
  creq 1 PUT "/v2/members/${id:-1234}" -H 'Content-Type: application/json' -d "{\"peerURLs\":[\"http://127.0.0.1:${PPORT[4]}\"]}"
  note "an existing peer URL, once m4 is gone"
  cctl 2 member add m5 "http://127.0.0.1:${PPORT[1]}"
  creq 2 POST /v2/members -H 'Content-Type: application/json' -d "{\"peerURLs\":[\"http://127.0.0.1:${PPORT[2]}\"]}"
  mark_leader 1 2 3
  cctl 1 member list
  cctl 2 member list
  creq 2 GET /v2/members
  cctl 3 cluster-health
}

sc_degraded() {
  mark_leader 1 2 3
  cctl 1 cluster-health
  cctl 1 set /k v
  note "SIGKILL m3"
  kill_member 3
  until_ok 10 health_is 1 true
  until_ok 10 health_is 2 true
  cctl 1 cluster-health
  cctl 2 cluster-health
  cctl_sync 2 cluster-health
  cctl 2 set /k v2
  cctl 1 get --quorum /k
  mark_leader 1 2
  cctl 1 member list
  creq 2 GET /v2/machines
  note "SIGKILL m2"
  kill_member 2
  until_ok 10 health_is 1 false
  until_ok 10 leaderless 1
  cctl 1 cluster-health
  cctl 1 get /k
  creq 1 GET /v2/keys/k
  creq 1 GET /v2/members
  creq 1 GET /v2/members/leader
  cctl 1 member list
}

# The TLS member t1, alone: etcdctl with --ca-file, curl with --cacert. curl is held to
# HTTP/1.1 (what etcdctl v2 and Go's HTTP clients speak): offered h2 over TLS, etcd also
# serves the v2 API over HTTP/2, which actcd does not (it gives HTTP/2 to gRPC only).
TU() { echo "https://127.0.0.1:${CPORT[5]}"; }
tctl() {
  echo "\$ etcdctl [t1] --ca-file CA $*"
  ETCDCTL_API=2 timeout 20 "$CTL2" --no-sync --endpoints "$(TU)" --ca-file "$CERTS/ca.pem" "$@" </dev/null 2>&1
  echo "[exit $?]"
}
treq() {
  local method="$1" path="$2"
  shift 2
  local f="$TMPD/req"
  rm -f "$f.h" "$f.b"
  echo "\$ curl --cacert CA -X $method $path${*:+ $*}  [t1]"
  U="$(TU)" _http "$f" "$method" "$path" --cacert "$CERTS/ca.pem" --http1.1 "$@"
  local rc=$?
  _show "$f" "$rc"
  _remember "$f"
}

sc_tls() {
  tctl set /a 1
  tctl get /a
  tctl -o extended get /a
  tctl set /d/x 2
  tctl ls
  tctl ls --recursive --sort
  tctl member list
  tctl cluster-health
  echo "\$ etcdctl [t1, synced] --ca-file CA get /d/x"
  ETCDCTL_API=2 timeout 20 "$CTL2" --endpoints "$(TU)" --ca-file "$CERTS/ca.pem" get /d/x </dev/null 2>&1
  echo "[exit $?]"
  tctl mk /a 2
  tctl rm /a
  treq GET /v2/keys/d/x
  treq PUT '/v2/keys/c?value=curl'
  treq GET '/v2/keys/?recursive=true&sorted=true'
  treq GET /v2/members
  treq GET /v2/stats/self
  treq GET /health
  note "no CA: the client refuses the server's certificate"
  echo "\$ etcdctl [t1] get /d/x"
  ETCDCTL_API=2 timeout 20 "$CTL2" --no-sync --endpoints "$(TU)" get /d/x </dev/null 2>&1
  echo "[exit $?]"
  echo "\$ curl -X GET /v2/keys/d/x  [t1, no CA]"
  curl -s --max-time 5 -o /dev/null "$(TU)/v2/keys/d/x"
  echo "[curl exit $?]"
  note "plain HTTP to the TLS client port"
  local f="$TMPD/req"
  rm -f "$f.h" "$f.b"
  echo "\$ curl -X GET http:/v2/keys/d/x  [t1, plain HTTP]"
  U="http://127.0.0.1:${CPORT[5]}" _http "$f" GET /v2/keys/d/x
  _show "$f" "$?"
}
