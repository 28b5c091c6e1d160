#!/usr/bin/env bash
# Gates the sandbox of the packaged intentd.service:
# `systemd-analyze security --offline=yes` must rate it at most 1.5.
source "$(dirname "$0")/lib.sh"
unpack_deb
readonly MAX_EXPOSURE=1.5

unit_dir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || echo /lib/systemd/system)
say "systemd-analyze security --offline=yes --root=<unpacked package> intentd.service"
# The exit status is not the verdict (it is non-zero for other reasons on
# some versions); the printed overall exposure is.
out=$(systemd-analyze security --no-pager --offline=yes --root="$ROOT" intentd.service 2>&1 || true)
line=$(grep -E 'Overall exposure level for intentd\.service:' <<<"$out" || true)
if [ -z "$line" ]; then
  printf '%s\n' "$out" >&2
  fail "no 'Overall exposure level' line in the output"
fi
score=$(sed -E 's/.*intentd\.service: *([0-9]+(\.[0-9]+)?).*/\1/' <<<"$line")
say "$line"
say "exposures still counted:"
grep -E '^✗' <<<"$out" | sed -E 's/ {2,}/  /g; s/^/    /' || true
check "the score '$score' is a number" grep -qE '^[0-9]+(\.[0-9]+)?$' <<<"$score"
check "overall exposure $score <= $MAX_EXPOSURE" \
  "$PYTHON3" -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$score" "$MAX_EXPOSURE"

# The gate is real: the same unit without its sandbox scores far worse.
weak=$SCRATCH/weak
mkdir -p "$weak$unit_dir"
grep -vE '^(Protect|Private|Restrict|SystemCall|Capability|NoNewPrivileges|MemoryDeny|LockPersonality|IPAddress|UMask|Device|ProcSubset|RemoveIPC|KeyringMode)' \
  "$ROOT$unit_dir/intentd.service" >"$weak$unit_dir/intentd.service"
weak_line=$(systemd-analyze security --no-pager --offline=yes --root="$weak" intentd.service 2>&1 | grep -E 'Overall exposure level' || true)
weak_score=$(sed -E 's/.*intentd\.service: *([0-9]+(\.[0-9]+)?).*/\1/' <<<"$weak_line")
say "without the sandbox lines: $weak_line"
check "the unsandboxed variant fails the gate ($weak_score > $MAX_EXPOSURE)" \
  "$PYTHON3" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' "$weak_score" "$MAX_EXPOSURE"

done_ok
