#!/usr/bin/env bash
# Sanitizers (part of the test command, scripts/test.sh):
#   asan: the whole test suite (every test of intentd_tests, and the real
#         intentd binary the agent tests start) built with AddressSanitizer +
#         UndefinedBehaviorSanitizer (clang) in build-asan/: the libraries and
#         the agent at -O1, the test sources at -O0 (half their compile time;
#         the code under test is the libraries');
#   tsan: the concurrency tests ($tsan_tests below: store races on both
#         backends, the transport's threads, clients racing the real binary,
#         ...) built with ThreadSanitizer (gcc) in build-tsan/: the libraries
#         and the agent at -O1, the test sources at tests/CMakeLists.txt's
#         default (-O0 -g1), from the test files that hold them only.
# Only intentd and intentd_tests are built, never the benchmarks. The tests run
# next to a private PostgreSQL (scripts/with-postgres.sh), so the PostgreSQL
# backend's tests run too, one process per test suite (asan) or per pattern
# (tsan), $(nproc) at a time (not GTEST_SHARD_INDEX: tests that re-execute the
# binary would inherit it). A run fails when a test fails, when fewer tests
# ran than the binary lists (a test lost), when a process exceeds its time
# limit, or when any sanitizer report was written: reports from the test
# process or from an agent it started (which a test may SIGKILL before its
# report reaches a test assertion) go to <build>/sanitizer-reports/.
#   scripts/sanitize.sh [asan|tsan|all]    (default all)
# With $INTENTD_TIMES_FILE set, "phase seconds" lines are appended to it.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
jobs=$(nproc)

# The log of the test process of PATTERN in OUTDIR.
log_of() {  # outdir, pattern
  echo "$1/$(printf '%s' "$2" | tr -c 'A-Za-z0-9_.' '_').log"
}

# One test process: sanitize.sh --one BINARY OUTDIR SECONDS PATTERN
# (internal; run by run_tests through xargs).
if [ "${1:-}" = --one ]; then
  bin=$2 out=$3 limit=$4 pattern=$5
  log=$(log_of "$out" "$pattern")
  rc=0
  timeout -k 10 "$limit" "$bin" --gtest_brief=1 --gtest_filter="$pattern" >"$log" 2>&1 || rc=$?
  if [ $rc -ne 0 ]; then
    [ $rc -ne 124 ] || echo "sanitize: $pattern: killed after ${limit}s" >>"$log"
    echo "$pattern $rc" >>"$out/failed"
  fi
  exit 0
fi
# The test processes: sanitize.sh --batches BINARY OUTDIR SECONDS (internal; run
# by run_tests next to PostgreSQL). OUTDIR/alone holds the patterns that run
# one at a time, first, OUTDIR/patterns the others, $(nproc) at a time.
if [ "${1:-}" = --batches ]; then
  if [ -s "$3/alone" ]; then
    xargs -a "$3/alone" -d '\n' -n 1 -P 1 bash "$0" --one "$2" "$3" "$4"
  fi
  if [ -s "$3/patterns" ]; then
    xargs -a "$3/patterns" -d '\n' -n 1 -P "$(nproc)" bash "$0" --one "$2" "$3" "$4"
  fi
  exit 0
fi

mode=${1:-all}

# The concurrency tests, for TSan: every test with threads of its own or
# racing clients (gtest patterns; each must match at least one test).
tsan_tests=(
  'Derive.GivesTheSameKeysFromConcurrentThreads'
  'Concurrency.*'
  'Concurrency/LookupAndUncertain.*'
  'Backends/ConcurrencyContract.*'
  'Backends/MessagesConcurrency.*'
  'Backends/AllowanceRace.*'
  'LockSet.*'
  'ServerDurability.*'
  'WalFilesTest.*'
  'WalSpares.*'
  'RocksStoreWalSpares.*'
  'Memtables/FaultTest.*'
  'PostgresSchema.ConcurrentMigrationsSerialize'
  'PostgresPurge.BackgroundThreadPurgesOnItsOwn'
  'PostgresConnection.KilledSessionsAreReplacedWithoutFailingRequests'
  'PostgresBatcher.*'
  'PostgresGroupCommit.*'
  'DispatcherAsync.*'
  'ServerFraming.*'
  'ServerLimits.*'
  'ServerListen.*'
  'ServerStop.*'
  'ServerStarted.*'
  'Serve.FiftyClientsRacingOneIntentGetOneExecute'
  'Serve.SigtermAnswersInFlightRequestsAndExitsZero'
  'Serve.ThousandPipelinedRequestsAnswerInOrder'
  'PostgresAgents.ClientsRacingThroughTwoAgentsGetOneExecutePerIntent'
  'PostgresAgents.SeenRacingThroughTwoAgentsIsFirstOncePerMessageAndSurvivesSigkill'
  'Seen.SixtyFourConnectionsRacingOneMessageGetOneFirst'
  'Backup.UnderLoadRestoresAndTheRestoredAgentReplaysTheSameResponses'
  'MetricsHttp.*'
  'Systemd.*'
  'Hostile.FloodOfPipelinedRequestsIsAnsweredInOrder'
  'Hostile.TwoThousandConnectionsAtOnceExcessGetOverloadedOthersServed'
)
# Suites that run longest under ASan go first, so that the processes finish
# close together.
asan_first=(Serve Crash PostgresAgents PostgresRestart Backup ServerLimits)
# Patterns (extended regular expression) that run alone, before the others: the
# hostile-client tests measure a well-behaved client's latency while the agent
# is attacked on this machine's cores, and assert a ceiling on it; a second
# test process competing for the cores is not part of that measurement.
alone_regex='^Hostile\.'

REPORT_PREFIX=sanitize
# shellcheck source=scripts/report.sh
source scripts/report.sh

build_asan() {
  # A build-asan/ configured with another compiler is started afresh.
  if [ -f build-asan/CMakeCache.txt ] &&
     ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' build-asan/CMakeCache.txt; then
    rm -rf build-asan
  fi
  # -gline-tables-only: file:line in every report, for a fraction of the
  # compile time of full debug information.
  # -U: every test folder and file, whatever an earlier configure left cached.
  cmake -S . -B build-asan -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=None \
    -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" -DINTENTD_TEST_COMPILE_OPTIONS=-O0 \
    -UINTENTD_TEST_DIRS -UINTENTD_TEST_SOURCES -DINTENTD_SANITIZE=ON -DINTENTD_TSAN=OFF \
    -DINTENTD_FUZZ=OFF -DINTENTD_BUILD_BENCH=OFF >/dev/null &&
    cmake --build build-asan -j"$jobs" --target intentd intentd_tests
}

build_tsan() {  # cmake options...
  # -g1: file:line in every report. -Wno-tsan: gcc warns that TSan does not
  # model std::atomic_thread_fence, which Boost.Asio's handlers use (in the
  # metrics endpoint); the warning repeats for every handler type.
  # -U: the test folders and the test sources' options as tests/CMakeLists.txt
  # sets them now, whatever an earlier configure left cached.
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1 -Wno-tsan" \
    -UINTENTD_TEST_DIRS -UINTENTD_TEST_COMPILE_OPTIONS -DINTENTD_TSAN=ON -DINTENTD_SANITIZE=OFF \
    -DINTENTD_FUZZ=OFF -DINTENTD_BUILD_BENCH=OFF "$@" >/dev/null &&
    cmake --build build-tsan -j"$jobs" --target intentd intentd_tests
}

# Fails unless BINARY carries the sanitizer's runtime (a build that silently
# lost its sanitizer flags must not pass).
check_instrumented() {  # binary, asan|tsan
  # (grep reads all: with -q, nm could die of SIGPIPE and fail the pipe.)
  if ! nm -D "$1" 2>/dev/null | grep -w "__$2_init" >/dev/null; then
    echo "sanitize: $1 has no $2 runtime: the sanitizer flags did not apply" >&2
    return 1
  fi
}

# After a sanitizer build: both binaries carry the runtime, the build time
# is recorded, and the reports directory starts empty.
after_build() {  # asan|tsan, build dir, start (SECONDS)
  check_instrumented "$2/tests/intentd_tests" "$1" || return 1
  check_instrumented "$2/agent/intentd" "$1" || return 1
  record "$1-build" $((SECONDS - $3))
  rm -rf "$2/sanitizer-reports" && mkdir -p "$2/sanitizer-reports"
}

# Fails (prints them) when any sanitizer report was written.
check_reports() {  # reports_dir, name
  local found=()
  mapfile -t found < <(compgen -G "$1/*" | sort)
  [ ${#found[@]} -gt 0 ] || return 0
  echo "sanitize: $2: sanitizer reports:" >&2
  for f in "${found[@]}"; do
    echo "--- $f" >&2
    head -80 "$f" >&2
  done
  { echo "sanitize: $2: ${#found[@]} sanitizer report(s), the first (${found[0]}):"
    head -30 "${found[0]}"; } | note_failure
  return 1
}

# Suite.Test of every enabled test of BINARY.
list_tests() {  # binary
  "$1" --gtest_list_tests | awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }' |
    grep -v -E '(^|[./])DISABLED_'
}

# Runs the tests of BINARY matched by each pattern (one process per pattern,
# $jobs at a time, those matching $alone_regex alone and first) next to a
# private PostgreSQL, then checks that every listed test ran and passed.
run_tests() {  # name, binary, outdir, seconds_per_process, patterns...
  local name=$1 bin=$2 out=$3 limit=$4
  shift 4
  rm -rf "$out" && mkdir -p "$out"
  local all p expected=0 n
  all=$(list_tests "$bin")
  for p in "$@"; do
    n=0
    while IFS= read -r t; do
      # shellcheck disable=SC2053  # glob match, as gtest's filter does
      [[ $t == $p ]] && n=$((n + 1))
    done <<<"$all"
    if [ $n -eq 0 ]; then
      echo "sanitize: $name: pattern '$p' matches no test (renamed?)" >&2
      return 1
    fi
    expected=$((expected + n))
  done
  printf '%s\n' "$@" | { grep -E "$alone_regex" || true; } >"$out/alone"
  printf '%s\n' "$@" | { grep -v -E "$alone_regex" || true; } >"$out/patterns"
  local rc=0
  bash scripts/with-postgres.sh bash "$0" --batches "$bin" "$out" "$limit" || rc=1
  local ran passed skipped
  ran=$(cat "$out"/*.log 2>/dev/null | awk '/^\[==========\] [0-9]+ tests? from .* ran/ { n += $2 } END { print n + 0 }')
  passed=$(cat "$out"/*.log 2>/dev/null | awk '/^\[  PASSED  \] [0-9]+ test/ { n += $4 } END { print n + 0 }')
  skipped=$(cat "$out"/*.log 2>/dev/null | awk '/^\[  SKIPPED \] [0-9]+ test/ { n += $4 } END { print n + 0 }')
  if [ -s "$out/failed" ]; then
    rc=1
    local log
    while read -r p code; do
      log=$(log_of "$out" "$p")
      echo "sanitize: $name: '$p' failed (exit $code); log $log:" >&2
      grep -E '^\[  FAILED  \]' "$log" >&2 || true
      tail -60 "$log" >&2
      { echo "sanitize: $name: '$p' failed (exit $code); log $log:"; log_digest "$log"; } |
        note_failure
    done <"$out/failed"
  fi
  if [ "$ran" -ne "$expected" ]; then
    echo "sanitize: $name: $ran tests ran, $expected expected" | tee >(note_failure) >&2
    rc=1
  fi
  echo "sanitize: $name: $passed of $expected tests passed ($skipped skipped) in $# processes"
  return $rc
}

run_asan() {
  local start=$SECONDS rc=0
  # (set -e does not apply inside a function called with ||: every step says.)
  build_asan || {
    echo "sanitize: asan+ubsan: the build failed" >&2
    return 1
  }
  after_build asan build-asan $start || return 1
  start=$SECONDS
  local reports=$PWD/build-asan/sanitizer-reports sym
  sym=$(symbolizer_options)
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1:$sym:log_path=$reports/asan"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:$sym:log_path=$reports/ubsan"
  # Every suite with at least one enabled test.
  local suites first patterns=()
  suites=$(list_tests build-asan/tests/intentd_tests | sed 's/\..*//' | uniq)
  for first in "${asan_first[@]}"; do
    if grep -qx "$first" <<<"$suites"; then patterns+=("$first.*"); fi
  done
  while IFS= read -r s; do
    [[ " ${asan_first[*]} " == *" $s "* ]] || patterns+=("$s.*")
  done <<<"$suites"
  run_tests asan+ubsan build-asan/tests/intentd_tests build-asan/test-logs 1500 "${patterns[@]}" ||
    rc=1
  unset ASAN_OPTIONS UBSAN_OPTIONS
  check_reports "$reports" asan+ubsan || rc=1
  record asan-run $((SECONDS - start))
  return $rc
}

# ThreadSanitizer suppressions, for Debian's RocksDB only. librocksdb.a is not
# instrumented: the synchronization inside it (the write group's leader and
# followers hand their WriteBatches over through std::atomic CAS/spinning in
# WriteThread; the memtable skiplist publishes nodes with acquire/release
# atomics) is invisible to TSan, while the memory accesses it makes through
# TSan's interceptors (memcpy, memcmp, write, operator new) and through
# out-of-line std::string code are seen. So the write-group leader appending a
# follower's batch to the merged batch (WriteBatchInternal::Append ->
# std::string::append, reached from RocksStoreImpl::Begin/Finish at their
# Commit), or a Get comparing memtable keys another writer inserted, is
# reported as a race: 71 reports in an unsuppressed run of the tests below at
# 1d14c3b, each with one access inside RocksDB (58 with a RocksDB frame, 13 in
# std::string::_M_append). Hence:
#   race:rocksdb::  any report with a RocksDB frame in a stack;
#   race:...::_M_append  the leader's append, whose RocksDB caller does not show
#     (uninstrumented code leaves no frame in TSan's shadow stack);
#   race:...unordered_set<std::string>::find  RocksDB's function-local static
#     BlockBasedTable::PrefetchIndexAndFilterBlocks()::kBuiltinNameAndAliases
#     (a std::unordered_set<std::string>; its only caller of that find in the
#     binary, by objdump): the first RocksDB background thread to open a table
#     builds it inside __cxa_guard_acquire/release, which TSan intercepts, but
#     the other threads test the guard inline, an acquire load in uninstrumented
#     code that TSan never sees, so their lookups (memcmp) look like races with
#     its construction (Backup.UnderLoadRestores..., in every run at 1d14c3b,
#     never before 2939c8a changed the store's timing; both threads are
#     RocksDB's, with no frame of ours).
# The cost: a race between two of our own threads where one side is an
# out-of-line std::string append, or a lookup in a std::unordered_set of
# std::string (our code has none), is no longer reported; every other race in
# our code still is (checked with a deliberate race on a std::string and an
# int). Building RocksDB with TSan is not an option (Debian packages only), and
# linking librocksdb.so instead makes it worse (it then calls our instrumented
# copies of the std::string templates).
write_tsan_suppressions() {  # file
  cat >"$1" <<'SUPP'
race:rocksdb::
race:std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_append
race:std::_Hashtable<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::allocator<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > >, std::__detail::_Identity,*>::find
SUPP
}

# The tests/<dir>/*_test.cc files that define the tests of $tsan_tests, as a
# CMake list (relative to tests/).
tsan_sources() {
  local p suite test files=()
  for p in "${tsan_tests[@]}"; do
    suite=${p%%.*}
    suite=${suite##*/}  # Backends/ConcurrencyContract -> ConcurrencyContract
    test=${p#*.}
    [[ $test == *'*'* ]] && test='[A-Za-z0-9_]+'
    mapfile -t -O ${#files[@]} files < <(cd tests && grep -l -E \
      "^ *TEST(_F|_P)?\( *$suite, *$test *\)" ./*/*_test.cc | sed 's|^\./||')
  done
  printf '%s\n' "${files[@]}" | sort -u | paste -s -d ';'
}

run_tsan() {
  local start=$SECONDS rc=0 sources
  # Only the files holding the concurrency tests (run_tests checks that every
  # pattern still matches a test).
  sources=$(tsan_sources)
  build_tsan -DINTENTD_TEST_SOURCES="$sources" || {
    echo "sanitize: tsan: the build failed" >&2
    return 1
  }
  after_build tsan build-tsan $start || return 1
  start=$SECONDS
  write_tsan_suppressions build-tsan/tsan.supp
  local reports=$PWD/build-tsan/sanitizer-reports
  # halt_on_error=0: a report does not kill the agent mid-test; the report
  # files fail the run instead. suppress_equal_addresses=0: TSan otherwise
  # remembers every address it found racy (suppressed reports included) in a
  # list it scans on each new race; with RocksDB's unordered writes
  # (store/rocks/options.cc) every memtable key another thread inserted is
  # such an address (see above), and the agent's pipelined flood test slowed
  # from 19 s to over 60 s, all in __tsan::FindRacyAddress. Reports are then
  # deduplicated by stack only (suppress_equal_stacks, the default): nothing
  # is reported less.
  export TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1:history_size=4:suppress_equal_addresses=0:log_path=$reports/tsan:suppressions=$PWD/build-tsan/tsan.supp"
  run_tests tsan build-tsan/tests/intentd_tests build-tsan/test-logs 900 "${tsan_tests[@]}" ||
    rc=1
  unset TSAN_OPTIONS
  check_reports "$reports" tsan || rc=1
  record tsan-run $((SECONDS - start))
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
