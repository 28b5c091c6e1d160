#!/usr/bin/env bash
# The test command (CI runs it on a clean clone: .ci/run). Installs what is
# needed, then, in this order:
#   asan   the whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan   the concurrency tests under ThreadSanitizer       (scripts/sanitize.sh)
#   fuzz   every fuzz target for $FUZZ_SECONDS (default 20) (scripts/fuzz.sh)
#   build  the normal build (scripts/build.sh)
#   ctest  every test: unit, integration, torture, hostile clients, packaging,
#          clients and the demo, next to a private PostgreSQL 15 on a Unix
#          socket for the PostgreSQL backend's tests (scripts/with-postgres.sh).
# Every phase runs even when an earlier one failed; the command then fails and
# names the failed phases. A summary of the phases' wall times ends the output.
# INTENTD_QUICK=1 skips asan, tsan and fuzz (a developer's quick run; CI never
# sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
# prometheus: its promtool checks packaging/monitoring's rules in ctest;
# redis-server: bench/run.sh's test (bench/run_test.sh) runs the benchmark.
bash scripts/install-deps.sh prometheus redis-server

REPORT_PREFIX=test.sh
# shellcheck source=scripts/report.sh
source scripts/report.sh

times=$(mktemp "${TMPDIR:-/tmp}/intentd-test-times.XXXXXX")
failures=$(mktemp "${TMPDIR:-/tmp}/intentd-test-failures.XXXXXX")
ctest_log=$(mktemp "${TMPDIR:-/tmp}/intentd-test-ctest.XXXXXX")
trap 'rm -f "$times" "$failures" "$ctest_log"' EXIT
export INTENTD_TIMES_FILE=$times
# Why each failed phase failed, in short, repeated after the summary.
export INTENTD_FAILURES_FILE=$failures
failed=()
results=()
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
total_start=$SECONDS

phase() {  # name, command...
  local name=$1 start=$SECONDS rc=0
  shift
  echo "=== test.sh: $name ===" >&2
  "$@" || rc=$?
  if [ $rc -eq 0 ]; then
    results+=("$(printf '%-6s %5d s  passed' "$name" $((SECONDS - start)))")
  else
    results+=("$(printf '%-6s %5d s  FAILED (exit %d)' "$name" $((SECONDS - start)) $rc)")
    failed+=("$name")
  fi
}

run_ctest() {
  local rc=0
  rm -f build/Testing/Temporary/LastTestsFailed.log
  (cd build && bash ../scripts/with-postgres.sh ctest --output-on-failure -j"$(nproc)") \
    2>&1 | tee "$ctest_log" || rc=$?
  [ $rc -eq 0 ] || ctest_digest "$ctest_log" build/Testing/Temporary/LastTestsFailed.log
  return $rc
}

# For each failed ctest test: the lines of its output that say why.
ctest_digest() {  # ctest output, ctest's LastTestsFailed.log
  local name out
  if [ ! -s "$2" ]; then
    { echo "ctest: failed, no test named (the last lines):"; tail -15 "$1"; } | note_failure
    return 0
  fi
  while IFS=: read -r _ name; do
    # Its output follows its "Test #N: NAME ...***Failed" line, up to the next
    # ctest progress line.
    out=$(mktemp "${TMPDIR:-/tmp}/intentd-test-one.XXXXXX")
    awk -v name="$name" '
      index($0, "Test #") && index($0, ": " name " ") { on = 1; next }
      on && /^ *(Start +[0-9]+:|[0-9]+\/[0-9]+ Test +#|[0-9]+% tests passed)/ { on = 0 }
      on { print }' "$1" >"$out"
    { echo "ctest: $name failed:"; log_digest "$out"; } | note_failure
    rm -f "$out"
  done <"$2"
}

if [ "${INTENTD_QUICK:-0}" = 1 ]; then
  echo "test.sh: INTENTD_QUICK=1: sanitizers and fuzzing SKIPPED" >&2
else
  phase asan bash scripts/sanitize.sh asan
  phase tsan bash scripts/sanitize.sh tsan
  phase fuzz env FUZZ_SECONDS="${FUZZ_SECONDS:-20}" bash scripts/fuzz.sh
fi
phase build bash scripts/build.sh
if [[ " ${failed[*]} " == *" build "* ]]; then
  results+=("ctest      -    not run (the build failed)")
  failed+=(ctest)
else
  phase ctest run_ctest
fi

echo
echo "test.sh summary (load average at start $load_start, at end $(cut -d' ' -f1-3 /proc/loadavg)):"
printf '  %s\n' "${results[@]}"
if [ -s "$times" ]; then
  echo "  of which:"
  awk '{ printf "    %-10s %5d s\n", $1, $2 }' "$times"
fi
echo "  total  $((SECONDS - total_start)) s"
if [ ${#failed[@]} -gt 0 ]; then
  if [ -s "$failures" ]; then
    echo "test.sh: why (repeated from above, at most 60 lines):" >&2
    head -60 "$failures" | sed 's/^/  /' >&2
  fi
  echo "test.sh: FAILED: ${failed[*]} (see the messages above)" >&2
  exit 1
fi
if [ "${INTENTD_QUICK:-0}" = 1 ]; then
  echo "test.sh: passed, WITHOUT sanitizers and fuzzing (INTENTD_QUICK=1)"
else
  echo "test.sh: every phase passed"
fi
