# shellcheck shell=bash
# Sourced by scripts/sanitize.sh, scripts/fuzz.sh and scripts/test.sh: what
# they report the same way. Set REPORT_PREFIX (the script's name in its
# messages) first.

# Prints "PREFIX: phase: N s", and appends "phase N" to $INTENTD_TIMES_FILE
# when set (scripts/test.sh prints those in its summary).
record() {  # phase, seconds
  echo "$REPORT_PREFIX: $1: $2 s"
  if [ -n "${INTENTD_TIMES_FILE:-}" ]; then echo "$1 $2" >>"$INTENTD_TIMES_FILE"; fi
}

# The sanitizer option for symbolized reports from clang's runtime:
# llvm-symbolizer when installed, else binutils' addr2line.
symbolizer_options() {
  local path
  path=$(command -v llvm-symbolizer || command -v llvm-symbolizer-14 || true)
  if [ -n "$path" ]; then echo "external_symbolizer_path=$path"; else echo "allow_addr2line=1"; fi
}

# Appends its standard input to $INTENTD_FAILURES_FILE when set (else drops
# it): scripts/test.sh repeats that file after its summary, so that a
# failure's cause is in the last lines of a long output (all that a CI page may
# keep). The caller prints the full story on stderr as well.
note_failure() {
  if [ -n "${INTENTD_FAILURES_FILE:-}" ]; then cat >>"$INTENTD_FAILURES_FILE"; else cat >/dev/null; fi
}

# The lines of a failed test's or tool's LOG that say why: gtest failures,
# sanitizer and libFuzzer errors, aborts, time limits (the last lines when
# none matches); at most 30.
log_digest() {  # log
  local pattern='Failure$|^\[  FAILED  \]|killed after|WARNING: ThreadSanitizer|ERROR: [A-Za-z]*Sanitizer|runtime error:|deadly signal|terminate called|Assertion'
  if grep -q -E "$pattern" "$1"; then
    grep -E -A6 "$pattern" "$1" | head -30
  else
    tail -15 "$1"
  fi
}
