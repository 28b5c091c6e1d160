#!/usr/bin/env bash
# Fuzzing: builds the fuzz targets (fuzz/) with clang, libFuzzer, AddressSanitizer
# and UndefinedBehaviorSanitizer in build-fuzz/ (or $FUZZ_BUILD_DIR), then runs
# each target for $FUZZ_SECONDS seconds (default 25) on its seed corpus
# (generated from ../shared/vectors at build time) plus what earlier runs found.
# Any crash, leak, timeout or sanitizer report fails the script; the input that
# caused it is kept in build-fuzz/artifacts/. Prints executions per target.
#   scripts/fuzz.sh [TARGET...]      targets: request_line line_framer
#                                    normalize_field money derive (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${FUZZ_BUILD_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-25}
all_targets=(request_line line_framer normalize_field money derive)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
flags="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined"
flags+=" -fno-sanitize-recover=undefined"
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_CXX_FLAGS="$flags" -DINTENTD_FUZZ=ON -DINTENTD_BUILD_TESTS=OFF \
  -DINTENTD_BUILD_BENCH=OFF >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target intentd_fuzz_seeds "${targets[@]/#/fuzz_}"

build_dir=$(cd "$build_dir" && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# fuzz_request_line keeps its RocksDB store under $TMPDIR (removed at exit).
export TMPDIR="$build_dir/tmp"
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR" "$build_dir/artifacts"

failed=()
summary=()
for t in "${targets[@]}"; do
  corpus="$build_dir/corpus/$t"
  mkdir -p "$corpus"
  log="$build_dir/fuzz_$t.log"
  echo "fuzz: $t for ${seconds}s" >&2
  set +e
  "$build_dir/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$build_dir/artifacts/$t-" \
    "$corpus" "$build_dir/fuzz/seeds/$t" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  summary+=("$(printf '%-16s %10s executions  %s  exit %d' "$t" "${execs:-?}" "${cov:-}" "$rc")")
  if [ $rc -ne 0 ] || grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$log"; then
    failed+=("$t")
    echo "fuzz: $t FAILED (log $log):" >&2
    grep -E -B2 -A30 'ERROR:|runtime error:|deadly signal' "$log" | head -60 >&2 || true
  fi
done
rm -rf "$TMPDIR"
echo "fuzz results (${seconds}s each):"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: no crash, leak or sanitizer report"
