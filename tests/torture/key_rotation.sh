#!/usr/bin/env bash
# The crash torture (intentd_torture) with the HMAC secret rotated under
# load: the agent reads a keyring file, and after every third SIGKILL the
# current secret steps down and a new one becomes current before the
# restart. The torture's checker then proves that no acknowledged intent
# changed its key and that no key was granted twice; a rotation that derived
# any frozen intent's key again would fail it. Last, the store must hold
# intents under several key ids (the rotations took effect).
#
# Usage: key_rotation.sh INTENTD_TORTURE INTENTD
set -euo pipefail
torture=${1:?usage: key_rotation.sh INTENTD_TORTURE INTENTD}
intentd=${2:?usage: key_rotation.sh INTENTD_TORTURE INTENTD}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ring=$dir/keyring
umask 077
printf '*%s\n' "$("$intentd" keygen --id 0)" >"$ring"
# Run by the torture after kill number $INTENTD_TORTURE_KILL, before the
# restart: every third one, the marked line loses its mark and a new
# current line is added.
printf '%s\n' \
  'k=$INTENTD_TORTURE_KILL' \
  'if [ $((k % 3)) -eq 0 ]; then' \
  '  sed -i "s/^\*//" "$RING"' \
  '  printf "*%s\n" "$("$INTENTD" keygen --id "r$((k / 3))")" >>"$RING"' \
  'fi' >"$dir/rotate.sh"
mkdir "$dir/data"
RING=$ring INTENTD=$intentd "$torture" --clients 16 --min-kills 9 --min-seconds 15 \
  --max-seconds 45 --intentd "$intentd" --data-dir "$dir/data" \
  --serve-arg --hmac-key-file --serve-arg "$ring" --after-kill "sh $dir/rotate.sh"
ids=$("$intentd" export --data-dir "$dir/data" | grep -o '"key_id":"[^"]*"' | sort -u)
echo "key ids of the stored intents:" $ids
count=$(printf '%s\n' "$ids" | grep -c key_id || true)
if [ "$count" -lt 3 ]; then
  echo "key_rotation: the store holds intents under $count key ids; expected at least 3" >&2
  exit 1
fi
echo "key_rotation: passed"
