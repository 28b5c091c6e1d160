#!/usr/bin/env bash
# Fuzzing: builds the fuzz targets (fuzz/) with clang, libFuzzer, AddressSanitizer
# and UndefinedBehaviorSanitizer in build-fuzz/ (or $FUZZ_BUILD_DIR), then runs
# each target for $FUZZ_SECONDS seconds (default 25) on its seed corpus
# (generated from tests/vectors at build time) plus what earlier runs found.
# $(nproc) targets run at a time (libFuzzer uses one core). Any crash, leak,
# timeout or sanitizer report fails the script; the input that caused it is
# kept in build-fuzz/artifacts/. Prints executions per target.
# Part of the test command (scripts/test.sh runs every target, FUZZ_SECONDS=20).
# The build is not shared with scripts/sanitize.sh's ASan build: libFuzzer's
# coverage instrumentation (a callback per comparison and switch) would also
# slow down the agent that the ASan tests run and time.
# With $INTENTD_TIMES_FILE set, "phase seconds" lines are appended to it.
#   scripts/fuzz.sh [TARGET...]      targets: request_line line_framer
#                                    normalize_field money derive (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${FUZZ_BUILD_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-25}
all_targets=(request_line line_framer normalize_field money derive)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")

REPORT_PREFIX=fuzz
# shellcheck source=scripts/report.sh
source scripts/report.sh

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# -gline-tables-only: file:line in every report, for a fraction of the compile
# time of full debug information.
flags="-O1 -gline-tables-only -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined"
flags+=" -fno-sanitize-recover=undefined"
start=$SECONDS
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_CXX_FLAGS="$flags" -DINTENTD_FUZZ=ON -DINTENTD_BUILD_TESTS=OFF \
  -DINTENTD_BUILD_BENCH=OFF >/dev/null
if ! cmake --build "$build_dir" -j"$(nproc)" --target intentd_fuzz_seeds "${targets[@]/#/fuzz_}"; then
  echo "fuzz: the build failed" >&2
  exit 1
fi
record fuzz-build $((SECONDS - start))
start=$SECONDS

build_dir=$(cd "$build_dir" && pwd)
sym=$(symbolizer_options)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1:$sym}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:$sym}
# fuzz_request_line keeps its RocksDB store under $TMPDIR (removed at exit).
export TMPDIR="$build_dir/tmp"
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR" "$build_dir/artifacts"

# Runs one target, leaving its log in fuzz_TARGET.log, its exit status in
# fuzz_TARGET.rc.
run_target() {  # target
  local t=$1 rc=0
  mkdir -p "$build_dir/corpus/$t"
  "$build_dir/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$build_dir/artifacts/$t-" \
    "$build_dir/corpus/$t" "$build_dir/fuzz/seeds/$t" >"$build_dir/fuzz_$t.log" 2>&1 || rc=$?
  echo "$rc" >"$build_dir/fuzz_$t.rc"
}

# A libFuzzer process uses one core: $(nproc) targets at a time.
running=0
for t in "${targets[@]}"; do
  if [ $running -ge "$(nproc)" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  echo "fuzz: $t for ${seconds}s" >&2
  run_target "$t" &
  running=$((running + 1))
done
wait

failed=()
summary=()
for t in "${targets[@]}"; do
  log="$build_dir/fuzz_$t.log"
  rc=$(cat "$build_dir/fuzz_$t.rc" 2>/dev/null || echo 255)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  summary+=("$(printf '%-16s %10s executions  %s  exit %d' "$t" "${execs:-?}" "${cov:-}" "$rc")")
  if [ "$rc" -ne 0 ] || grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$log"; then
    failed+=("$t")
    echo "fuzz: $t FAILED (exit $rc, log $log):" >&2
    grep -E -B2 -A30 'ERROR:|runtime error:|deadly signal' "$log" | head -60 >&2 || true
    { echo "fuzz: $t FAILED (exit $rc, log $log):"; log_digest "$log"; } | note_failure
  fi
done
rm -rf "$TMPDIR"
record fuzz-run $((SECONDS - start))
echo "fuzz results (${seconds}s each):"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: no crash, leak or sanitizer report"
