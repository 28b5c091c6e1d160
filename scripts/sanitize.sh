#!/usr/bin/env bash
# Sanitizers (gcc, -O1):
#   asan: the whole test suite (intentd_tests, and the real intentd binary it
#         starts) built with AddressSanitizer + UndefinedBehaviorSanitizer in
#         build-asan/, run as 2 gtest shards in parallel;
#   tsan: the concurrency tests (store races, the transport's threads, 50
#         clients racing the real binary, ...) built with ThreadSanitizer in
#         build-tsan/.
# Only the targets intentd and intentd_tests are built. Every sanitizer report,
# from the test process or from an agent it started (which a test may
# SIGKILL before its report reaches a test assertion), is written under
# <build>/sanitizer-reports/ and fails the run.
#   scripts/sanitize.sh [asan|tsan|all]    (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
jobs=$(nproc)

# The concurrency tests, for TSan.
tsan_filter="Concurrency.*:LockSet.*:ServerLimits.*:ServerStop.*:ServerFraming.*"
tsan_filter+=":Serve.FiftyClientsRacingOneIntentGetOneExecute"
tsan_filter+=":Serve.SigtermAnswersInFlightRequestsAndExitsZero"
tsan_filter+=":Serve.ThousandPipelinedRequestsAnswerInOrder"
tsan_filter+=":Derive.GivesTheSameKeysFromConcurrentThreads"
tsan_filter+=":Hostile.FloodOfPipelinedRequestsIsAnsweredInOrder"

build() {  # build_dir, cmake options...
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g" \
    -DINTENTD_BUILD_BENCH=OFF "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" --target intentd intentd_tests
}

# Fails (prints them) when any sanitizer report was written.
check_reports() {  # reports_dir, name
  if compgen -G "$1/*" >/dev/null; then
    echo "sanitize: $2: sanitizer reports:" >&2
    for f in "$1"/*; do
      echo "--- $f" >&2
      head -80 "$f" >&2
    done
    return 1
  fi
}

run_asan() {
  build build-asan -DINTENTD_SANITIZE=ON -DINTENTD_TSAN=OFF
  local reports=$PWD/build-asan/sanitizer-reports
  rm -rf "$reports" && mkdir -p "$reports"
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1:log_path=$reports/asan"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan"
  local start=$SECONDS pids=() rc=0 shards=2
  for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i build-asan/tests/intentd_tests \
      --gtest_brief=1 >"build-asan/shard$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < shards; i++)); do
    if ! wait "${pids[$i]}"; then
      rc=1
      echo "sanitize: asan shard $i failed:" >&2
      tail -60 "build-asan/shard$i.log" >&2
    fi
  done
  unset ASAN_OPTIONS UBSAN_OPTIONS
  check_reports "$reports" asan || rc=1
  local tests
  tests=$(cat build-asan/shard*.log |
          awk '/^\[  PASSED  \] [0-9]+ test/ { n += $4 } END { print n + 0 }')
  echo "sanitize: asan+ubsan: ${tests:-0} tests passed in $((SECONDS - start)) s, rc $rc"
  return $rc
}

# Only documented false positives of uninstrumented system libraries belong here.
write_tsan_suppressions() {
  cat >"$1" <<'SUPP'
SUPP
}

run_tsan() {
  build build-tsan -DINTENTD_TSAN=ON -DINTENTD_SANITIZE=OFF
  local reports=$PWD/build-tsan/sanitizer-reports
  rm -rf "$reports" && mkdir -p "$reports"
  write_tsan_suppressions build-tsan/tsan.supp
  # halt_on_error=0: a report does not kill the agent mid-test; the report
  # files fail the run instead.
  export TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1:history_size=4:log_path=$reports/tsan:suppressions=$PWD/build-tsan/tsan.supp"
  local start=$SECONDS rc=0
  build-tsan/tests/intentd_tests --gtest_brief=1 --gtest_filter="$tsan_filter" \
    >build-tsan/tsan.log 2>&1 || rc=1
  unset TSAN_OPTIONS
  [ $rc -eq 0 ] || { echo "sanitize: tsan tests failed:" >&2; tail -60 build-tsan/tsan.log >&2; }
  check_reports "$reports" tsan || rc=1
  local tests
  tests=$(awk '/^\[  PASSED  \] [0-9]+ test/ { n += $4 } END { print n + 0 }' build-tsan/tsan.log)
  echo "sanitize: tsan: ${tests:-0} tests passed in $((SECONDS - start)) s, rc $rc"
  return $rc
}

rc=0
case "$mode" in
  asan) run_asan || rc=1 ;;
  tsan) run_tsan || rc=1 ;;
  all)
    run_asan || rc=1
    run_tsan || rc=1
    ;;
  *) echo "usage: scripts/sanitize.sh [asan|tsan|all]" >&2; exit 2 ;;
esac
exit $rc
