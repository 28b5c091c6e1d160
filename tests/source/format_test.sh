#!/usr/bin/env bash
# The tree is formatted with its own .clang-format: every tracked C++ file,
# as Debian 12's clang-format (14) formats it. Fails on any drift, naming the
# files and the first lines that differ; `clang-format -i FILE` mends them.
#   tests/source/format_test.sh [SOURCE_DIR]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"
if ! command -v clang-format >/dev/null 2>&1; then
  echo "format_test: clang-format is not installed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
if [ -d .git ] || git rev-parse --git-dir >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cc' '*.h')
else
  mapfile -t files < <(find . -path ./build -prune -o \( -name '*.cc' -o -name '*.h' \) -print |
                       grep -v '^\./build')
fi
drift=0
for f in "${files[@]}"; do
  if ! diff -q <(clang-format --style=file "$f") "$f" >/dev/null; then
    echo "format_test: $f differs from clang-format's output:" >&2
    { diff <(clang-format --style=file "$f") "$f" || true; } | head -8 | sed "s/^/  /" >&2
    drift=$((drift + 1))
  fi
done
if [ "$drift" -gt 0 ]; then
  echo "format_test: $drift of ${#files[@]} files drift from .clang-format (clang-format -i them)" >&2
  exit 1
fi
echo "format_test: ${#files[@]} files formatted as .clang-format says"
