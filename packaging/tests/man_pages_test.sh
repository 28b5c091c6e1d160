#!/usr/bin/env bash
# The packaged man pages: one per subcommand of the packaged binary, each
# documenting exactly the flags its `--help` lists, and rendering without
# groff warnings.
source "$(dirname "$0")/lib.sh"
unpack_deb
MAN=$ROOT/usr/share/man/man8

# The subcommands, from `intentd --help` ("Commands:" then "  name  summary").
commands=$("$BIN" --help | awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
[ -n "$commands" ] || fail "could not read the subcommands from intentd --help"
say "subcommands: $(echo $commands)"

check "intentd(8) is packaged" test -f "$MAN/intentd.8.gz"
top=$(zcat "$MAN/intentd.8.gz")
for cmd in $commands; do
  check "intentd(8) names the subcommand '$cmd'" grep -q "\\\\fB$cmd\\\\fR" <<<"$top"
  [ "$cmd" = version ] && continue  # one line, documented in intentd(8)
  page=$MAN/intentd-$cmd.8.gz
  check "intentd-$cmd(8) is packaged" test -f "$page"
  # Flags in --help: "  --name VALUE   text" (the help flag is documented in intentd(8)).
  help_flags=$("$BIN" "$cmd" --help | sed -nE 's/^ {2,}--([a-z][a-z0-9-]*).*/\1/p' | { grep -vx help || true; } | sort -u)
  # Flags documented as option terms (.TP) in the page's OPTIONS section.
  man_flags=$(zcat "$page" | awk '/^\.SH "OPTIONS"/ { on = 1; next } /^\.SH/ { on = 0 }
                                  on && prev == ".TP" { print } { prev = $0 }' |
              grep -oE '\\-\\-[a-z]([a-z0-9]|\\-)*' | sed 's/\\-/-/g; s/^--//' | sort -u || true)
  check_none "intentd-$cmd(8) documents every flag of 'intentd $cmd --help'" \
    "$(comm -23 <(echo "$help_flags") <(echo "$man_flags") | sed 's/^/    undocumented: --/')"
  check_none "intentd-$cmd(8) documents no flag the binary lacks" \
    "$(comm -13 <(echo "$help_flags") <(echo "$man_flags") | sed 's/^/    not in --help: --/')"
done

# Every packaged page renders without warnings (groff -ww).
if command -v groff >/dev/null 2>&1; then
  for page in "$MAN"/*.8.gz; do
    name=$(basename "$page" .8.gz)
    warnings=$(zcat "$page" | groff -man -ww -z -Tutf8 2>&1 || echo "groff failed")
    check_none "$name(8) renders without groff warnings" "$warnings"
    check "$name(8) has NAME, SYNOPSIS, DESCRIPTION or COMMANDS, and SEE ALSO" \
      bash -c 'p=$(zcat "$1"); for s in NAME SYNOPSIS "SEE ALSO"; do grep -qE "^\.SH \"?$s\"?$" <<<"$p" || exit 1; done'  _ "$page"
  done
else
  say "SKIP rendering: groff is not installed (apt-get install groff-base)"
fi
check "the pages are gzipped with -n (no name, no time stamp: reproducible)" \
  bash -c 'for p in "$1"/*.8.gz; do [ "$(od -An -tx1 -j4 -N4 "$p" | tr -d " ")" = 00000000 ] || exit 1; done' _ "$MAN"

done_ok
