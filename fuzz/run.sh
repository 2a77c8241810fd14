#!/usr/bin/env bash
# fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]: builds the fuzz targets (fuzz_targets/*.rs) as
# cargo-fuzz would, with the installed nightly and without cargo-fuzz, then runs each from its
# seeds (seeds/<target>/, grown in corpus/<target>/, which git ignores) for the given seconds
# (default 20) and prints the executions each reached. Exits non-zero if a target crashes,
# hangs, or passes the memory limit; libFuzzer leaves the input in artifacts/<target>/.
#
# Environment: FUZZ_JOBS targets run at once (default: the number of cores; each run is one
# process on one core); CARGO_BUILD_JOBS as usual for the build.
#
# No sanitizer (cargo-fuzz's `--sanitizer none`): a smaller, faster build for CI. Rust code is
# bounds-checked anyway; what ASan would add is checks of C code, and none of these decoders
# has any. With cargo-fuzz the same targets run as `cargo fuzz run <target> seeds/<target>`.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-20}"
shift || true
mapfile -t all < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^actcd-fuzz$')
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all[@]}"); fi

host="$(rustc +nightly -vV | sed -n 's/^host: //p')"
# cargo-fuzz's flags for `--sanitizer none`, with debug assertions and overflow checks on.
# `--target` keeps them off build scripts and proc macros, as cargo-fuzz does.
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"
export CARGO_INCREMENTAL=0
start=$SECONDS
cargo +nightly build --release --locked --target "$host" --target-dir target \
  $(printf -- '--bin %s ' "${targets[@]}")
echo "fuzz: built ${#targets[@]} targets in $((SECONDS - start)) s" >&2

jobs="${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}"
mkdir -p logs
run_one() {
  local t="$1"
  mkdir -p "corpus/$t" "artifacts/$t"
  # libFuzzer writes new inputs to the first directory only: the seeds stay as committed.
  # -rss_limit_mb is checked by libFuzzer's own thread; -malloc_limit_mb needs a sanitizer's
  # malloc hooks, so without one the RSS limit is what bounds memory.
  rm -f "logs/$t.rc"
  "target/$host/release/$t" "corpus/$t" "seeds/$t" \
    -max_total_time="$seconds" -timeout=5 -rss_limit_mb=1024 -malloc_limit_mb=256 \
    -print_final_stats=1 -artifact_prefix="artifacts/$t/" >"logs/$t.log" 2>&1 && rc=0 || rc=$?
  echo "$rc" >"logs/$t.rc"
}
failed=()
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_one "$t" &
  running=$((running + 1))
done
wait
for t in "${targets[@]}"; do
  if [ "$(cat "logs/$t.rc" 2>/dev/null)" = 0 ]; then
    status=ok
  else
    status=FAILED
    failed+=("$t")
  fi
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log" | tail -1)"
  corpus="$(sed -n 's/^stat::new_units_added: *//p' "logs/$t.log" | tail -1)"
  printf 'fuzz: %-14s %-6s %12s executions in %s s, %s new inputs\n' \
    "$t" "$status" "${execs:-?}" "$seconds" "${corpus:-?}"
done
echo "fuzz: done in $((SECONDS - start)) s" >&2
if [ "${#failed[@]}" -gt 0 ]; then
  for t in "${failed[@]}"; do
    echo "---- fuzz: $t failed; its log (logs/$t.log) ends:" >&2
    tail -40 "logs/$t.log" >&2
    ls "artifacts/$t" >&2 || true
  done
  exit 1
fi
