# Shared helpers of the packaging tests (sourced, not run).
# Environment from ctest (packaging/CMakeLists.txt): INTENTD_BUILD_DIR,
# INTENTD_DEB_DIR, INTENTD_SOURCE_DIR, INTENTD_VERSION.
set -eEuo pipefail
# A command that fails outside check() must not end the test silently.
trap 'printf "\n[%s] FAIL: unexpected error at line %s: %s\n\n" "${TEST_NAME:-test}" "$LINENO" "$BASH_COMMAND" >&2' ERR

: "${INTENTD_BUILD_DIR:?set by ctest}"
: "${INTENTD_DEB_DIR:?set by ctest}"
: "${INTENTD_SOURCE_DIR:?set by ctest}"
: "${INTENTD_VERSION:?set by ctest}"

# The distribution's python3 (package python3): a version-manager shim on PATH
# can take seconds to start.
PYTHON3=/usr/bin/python3
[ -x "$PYTHON3" ] || PYTHON3=$(command -v python3)

TEST_NAME=${TEST_NAME:-$(basename "$0" .sh)}
CHECKS=0

say() { printf '[%s] %s\n' "$TEST_NAME" "$*"; }

fail() {
  printf '\n[%s] FAIL: %s\n\n' "$TEST_NAME" "$*" >&2
  exit 1
}

# check "what is checked" command...: runs the command, fails loudly with its output.
check() {
  local what=$1
  shift
  local out
  if out=$("$@" 2>&1); then
    CHECKS=$((CHECKS + 1))
    say "ok: $what"
  else
    printf '%s\n' "$out" >&2
    fail "$what (command: $*)"
  fi
}

# check_none "what" "$offending_lines": passes when nothing offends.
check_none() {
  if [ -n "$2" ]; then
    printf '%s\n' "$2" >&2
    fail "$1"
  fi
  CHECKS=$((CHECKS + 1))
  say "ok: $1"
}

done_ok() { say "PASS ($CHECKS checks)"; }

# A scratch directory removed on exit (also on failure); cleanup hooks run
# first. A nested script (INTENTD_PKG_NESTED=1) shares its parent's SCRATCH.
CLEANUP_HOOKS=()
if [ "${INTENTD_PKG_NESTED:-0}" = 1 ]; then
  : "${SCRATCH:?a nested test script gets SCRATCH from its parent}"
else
  SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/intentd-pkg-test.XXXXXX")
  on_exit() {
    local rc=$?
    local hook
    for hook in "${CLEANUP_HOOKS[@]+"${CLEANUP_HOOKS[@]}"}"; do
      eval "$hook" || true
    done
    rm -rf "$SCRATCH"
    exit "$rc"
  }
  trap on_exit EXIT
fi

# The .deb built by deb_contents_test.sh (the ctest fixture).
find_deb() {
  local debs=("$INTENTD_DEB_DIR"/intentd_*.deb)
  if [ ! -f "${debs[0]}" ]; then
    fail "no intentd_*.deb in $INTENTD_DEB_DIR (packaging.deb_builds_with_expected_contents builds it)"
  fi
  if [ ${#debs[@]} -ne 1 ]; then
    fail "expected one .deb in $INTENTD_DEB_DIR, found: ${debs[*]}"
  fi
  printf '%s\n' "${debs[0]}"
}

# Unpacks the package into $SCRATCH/root and sets ROOT, BIN.
unpack_deb() {
  DEB=$(find_deb)
  ROOT=$SCRATCH/root
  mkdir -p "$ROOT"
  dpkg-deb -x "$DEB" "$ROOT" || fail "dpkg-deb -x $DEB"
  BIN=$ROOT/usr/bin/intentd
  [ -x "$BIN" ] || fail "the package has no executable /usr/bin/intentd"
  say "unpacked $(basename "$DEB") into a scratch root"
}

# wait_for "what" seconds command...: polls the command until it succeeds.
# (A readiness poll of a real process, not a timing assumption.)
wait_for() {
  local what=$1 seconds=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      fail "timed out after ${seconds}s waiting for: $what"
    fi
    sleep 0.1
  done
}

# A 64-hex-character secret in a 0600 file.
make_key_file() {
  local path=$1
  (umask 077 && "$BIN" keygen >"$path") || fail "intentd keygen"
}
