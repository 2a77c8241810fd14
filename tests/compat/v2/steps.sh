# Step helpers for the v2 compatibility scenarios (sourced by tests/compat/v2.sh).
# Every helper writes one step to stdout: a "$ ..." line naming what was run (paths only, no
# host or port), then its output in the raw form normalize.py understands.
# Expected variables: U (client base URL), CTL2 (etcdctl v2 binary or empty), TMPD (a scratch
# directory of this scenario), CURL_MAX (seconds per curl call).

LAST_MI=  # modifiedIndex of the node in the last curl response (first one in the body)
LAST_IDX= # X-Etcd-Index of the last curl response

# _http OUT_PREFIX METHOD PATH [curl args...]: one request, headers/body into OUT_PREFIX.{h,b}
_http() {
  local out="$1" method="$2" path="$3"
  shift 3
  local mflag=(-X "$method")
  [ "$method" = HEAD ] && mflag=(--head)
  [ "$method" = GET ] && mflag=()
  curl -s -N --path-as-is --max-time "${CURL_MAX:-5}" "${mflag[@]}" -D "$out.h" -o "$out.b" "$@" "$U$path"
  local rc=$?
  [ "$method" = HEAD ] && : >"$out.b" # curl --head writes the headers to -o as well
  return $rc
}

# _show OUT_PREFIX CURL_EXIT: prints a response captured by _http
_show() {
  echo "@@ headers"
  [ -f "$1.h" ] && tr -d '\r' <"$1.h" | sed '/^$/d'
  echo "@@ body"
  if [ -s "$1.b" ]; then
    cat "$1.b"
    if [ "$(tail -c1 "$1.b" | od -An -c | tr -d ' ')" != '\n' ]; then
      printf '\n@@ end no-eol\n'
    else
      echo "@@ end"
    fi
  else
    echo "@@ end"
  fi
  echo "[curl exit $2]"
}

_remember() {
  LAST_MI="$(grep -o '"modifiedIndex":[0-9]*' "$1.b" 2>/dev/null | head -1 | cut -d: -f2)"
  LAST_IDX="$(tr -d '\r' <"$1.h" 2>/dev/null | awk -F': ' 'tolower($1)=="x-etcd-index"{print $2}' | tail -1)"
}

# req METHOD PATH [curl args...]: one request, printed in full
req() {
  local method="$1" path="$2"
  shift 2
  local f="$TMPD/req"
  rm -f "$f.h" "$f.b"
  echo "\$ curl -X $method $path${*:+ $*}"
  _http "$f" "$method" "$path" "$@"
  local rc=$?
  _show "$f" "$rc"
  _remember "$f"
}

# quiet METHOD PATH [curl args...]: a request whose response is not part of the transcript
quiet() {
  local method="$1" path="$2"
  shift 2
  _http "$TMPD/quiet" "$method" "$path" "$@" >/dev/null 2>&1
}

# note TEXT: a comment line in the transcript
note() { echo "# $*"; }

# bg_req NAME PATH [curl args...]: a GET in the background (a watch); collect prints it
declare -A BG_PIDS
bg_req() {
  local name="$1" path="$2"
  shift 2
  rm -f "$TMPD/bg.$name".*
  echo "GET $path${*:+ $*}" >"$TMPD/bg.$name.cmd"
  _http "$TMPD/bg.$name" GET "$path" "$@" &
  BG_PIDS[$name]=$!
}

# collect NAME: waits for a background request to finish and prints it
collect() {
  local name="$1" rc
  wait "${BG_PIDS[$name]}"
  rc=$?
  echo "\$ curl -X $(cat "$TMPD/bg.$name.cmd")  (background)"
  _show "$TMPD/bg.$name" "$rc"
  wait_watchers 0
}

# collect_stream NAME EVENTS: waits until the background body holds EVENTS lines (at most
# 4 s), stops the curl (its exit status is then not printed) and prints what it received
collect_stream() {
  local name="$1" n="$2"
  for _ in $(seq 40); do
    [ "$(cat "$TMPD/bg.$name.b" 2>/dev/null | grep -c .)" -ge "$n" ] && break
    sleep 0.1
  done
  sleep 0.2
  kill "${BG_PIDS[$name]}" 2>/dev/null
  wait "${BG_PIDS[$name]}" 2>/dev/null
  echo "\$ curl -X $(cat "$TMPD/bg.$name.cmd")  (background, stopped after $n events)"
  _show "$TMPD/bg.$name" stopped
  wait_watchers 0
}

# wait_watchers N: waits (at most 3 s) until /v2/stats/store reports exactly N watchers, so
# that a write that should wake a watch does not overtake its registration, and (N = 0, after
# each collect) that a stopped watch is gone before the next one is counted; silent
wait_watchers() {
  for _ in $(seq 30); do
    if curl -s --max-time 1 "$U/v2/stats/store" | grep "\"watchers\":$1[,}]" >/dev/null; then
      sleep 0.05
      return 0
    fi
    sleep 0.1
  done
  sleep 0.3
}

# ctl ARGS...: one etcdctl v2 command (stdout and stderr together), with its exit status
ctl() {
  echo "\$ etcdctl $*"
  if [ -z "$CTL2" ]; then
    echo "[etcdctl v2 not available]"
    return 0
  fi
  ETCDCTL_API=2 timeout 15 "$CTL2" --endpoints "$U" "$@" </dev/null 2>&1
  echo "[exit $?]"
}

# ctl_bg NAME ARGS...: an etcdctl v2 command in the background (watch --forever, exec-watch)
ctl_bg() {
  local name="$1"
  shift
  echo "$*" >"$TMPD/ctl.$name.cmd"
  [ -z "$CTL2" ] && return 0
  ETCDCTL_API=2 timeout 20 "$CTL2" --endpoints "$U" "$@" </dev/null >"$TMPD/ctl.$name.out" 2>&1 &
  BG_PIDS[ctl.$name]=$!
}

# ctl_collect NAME LINES: waits until the output holds LINES lines (at most 4 s), stops the
# command and prints its output
ctl_collect() {
  local name="$1" n="$2"
  echo "\$ etcdctl $(cat "$TMPD/ctl.$name.cmd")  (background, stopped after $n lines)"
  if [ -z "$CTL2" ]; then
    echo "[etcdctl v2 not available]"
    return 0
  fi
  for _ in $(seq 40); do
    [ "$(grep -c . "$TMPD/ctl.$name.out" 2>/dev/null)" -ge "$n" ] && break
    sleep 0.1
  done
  sleep 0.2
  kill "${BG_PIDS[ctl.$name]}" 2>/dev/null
  wait "${BG_PIDS[ctl.$name]}" 2>/dev/null
  cat "$TMPD/ctl.$name.out"
  wait_watchers 0
}
