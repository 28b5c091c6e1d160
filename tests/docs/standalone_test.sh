#!/usr/bin/env bash
# The repository stands on its own: no tracked file reaches outside it
# through the sibling folder the project grew from, and no file dates a
# figure by a development session instead of the command that measures it.
#   tests/docs/standalone_test.sh SOURCE_DIR
set -u
src=${1:?usage: standalone_test.sh SOURCE_DIR}
cd "$src" || exit 1
# The patterns are split so that this file does not match itself.
outside='\.\./'"shared"
dated='session [0-9]'
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  list() { git ls-files -z; }
else
  list() { find . -type f -not -path './build*' -not -path './.git/*' -print0; }
fi
passed=0 failed=0
check() {  # name pattern grep-flags
  local hits
  hits=$(list | xargs -0 grep -n -I $3 -E -- "$2" 2>/dev/null | head -20)
  if [ -z "$hits" ]; then
    echo "ok: $1"; passed=$((passed + 1))
  else
    echo "FAILED: $1:"; echo "$hits"; failed=$((failed + 1))
  fi
}
check "no file reaches outside the repository" "$outside" ""
check "no file names a development session" "$dated" "-i"
for doc in docs/protocol.md docs/key-derivation.md docs/operations.md docs/integrating.md tests/vectors/key-derivation.jsonl; do
  if [ -s "$doc" ]; then echo "ok: $doc is in the repository"; passed=$((passed + 1))
  else echo "FAILED: $doc is missing"; failed=$((failed + 1)); fi
done
# Relative links in the Markdown files point at files that exist.
links_py='
import os, re, sys
for path in sys.argv[1:]:
    text = open(path, encoding="utf-8").read()
    # Fenced code is code, whatever it looks like: `f[a](b(c))` is no link.
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        target = target.split("#", 1)[0]
        if not os.path.exists(os.path.join(os.path.dirname(path), target)):
            print(f"{path}: {target}")
'
broken=$(list | grep -z '\.md$' | xargs -0 python3 -c "$links_py")
if [ -z "$broken" ]; then echo "ok: relative Markdown links resolve"; passed=$((passed + 1))
else echo "FAILED: broken relative Markdown links:"; echo "$broken"; failed=$((failed + 1)); fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
