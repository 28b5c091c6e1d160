#!/usr/bin/env bash
# The rooms of the tree and what each may include (README.md,
# "Architecture"): a #include of a room not listed for the including folder
# fails this test, naming the file and the line.
#   tests/source/layering_test.sh [SOURCE_DIR]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"

# folder: the include roots it may name. "store" is store/'s public headers
# (store/*.h); store/rocks/ and store/postgres/ are store/'s own.
# protocol/limits.h is the protocol's numbers (lease bounds, result and
# listing limits), header-only, shared with the clients of the protocol.
declare -A allowed=(
  [normalizers]="normalizers"
  [store]="store store/rocks store/postgres"
  [transport]="transport"
  [reconcile]="reconcile normalizers protocol/limits.h"
  [common]="common normalizers store reconcile"
  [protocol]="protocol common normalizers store transport"
  [cli]="cli common normalizers store reconcile protocol/limits.h"
  [agent]="agent protocol common cli normalizers store transport reconcile"
)

violations=0
for folder in "${!allowed[@]}"; do
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    target=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"${rest#*:}")
    case "$target" in
      store/rocks/*) room=store/rocks ;;
      store/postgres/*) room=store/postgres ;;
      */*) room=${target%%/*} ;;
      *) continue ;;  # a same-folder or system header
    esac
    ok=0
    for a in ${allowed[$folder]}; do
      if [ "$a" = "$room" ] || [ "$a" = "$target" ]; then ok=1; break; fi
    done
    if [ $ok -eq 0 ]; then
      echo "layering_test: $file:$line includes $target: $folder/ may include only ${allowed[$folder]}" >&2
      violations=$((violations + 1))
    fi
  done < <(grep -rnE '^#include "[^"]+"' --include='*.cc' --include='*.h' "$folder" || true)
done
if [ $violations -gt 0 ]; then
  echo "layering_test: $violations includes cross a room's boundary" >&2
  exit 1
fi
echo "layering_test: every include of ${!allowed[*]} stays within its room's dependencies"
