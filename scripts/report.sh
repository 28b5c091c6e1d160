# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: what both report the
# same way. Set REPORT_PREFIX (the script's name in its messages) first.

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
