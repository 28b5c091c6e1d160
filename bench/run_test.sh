#!/usr/bin/env bash
# bench/run.sh end to end at its smallest (about 20 s): every system at 2
# connections for 1 s, with --baseline (this build's agent as the baseline),
# --fleet 2 and --pg-statements, durable only. The figures of a loaded test
# machine mean nothing; what is checked is that the benchmark that judges
# the fleet path's throughput still measures what it says:
#   run_test.sh BUILD_DIR
# Fails when run.sh fails, or accepts an unknown argument; when a system's row
# is missing, reports no actions, a violation or an error; when a ratio or
# a CPU figure is missing ("-"); when the fleet's row does not sum its two
# agents; or when an intentd-pg system's statements are not in its own
# database (the baseline on `intentd_baseline`, the build on `intentd`).
# Needs root (run.sh runs its private PostgreSQL as `postgres`), PostgreSQL
# 15 and redis-server (scripts/test.sh installs them); skipped (exit 77)
# without them.
set -euo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
skip() { echo "run_test: skipped: $*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "bench/run.sh runs its private PostgreSQL as postgres: needs root"
for p in postgresql-15 redis-server; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
    skip "$p is not installed (scripts/test.sh installs it)"
done
fail() { echo "run_test: FAIL: $*" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/intentd-bench-run-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"  # the private PostgreSQL, run as postgres, reaches its data below

rc=0
bash "$root/bench/run.sh" --no-such-flag >"$work/out" 2>"$work/err" || rc=$?
if [ "$rc" != 2 ] || ! grep -q 'unknown argument --no-such-flag' "$work/err"; then
  fail "an unknown argument: exit $rc, not 2 with its name: $(cat "$work/err")"
fi

rc=0
bash "$root/bench/run.sh" --connections 2 --modes durable --duration 1 --warmup 0.2 \
  --build-dir "$build" --tmp-parent "$work" --baseline "$build/agent/intentd" \
  --fleet 2 --fleet-connections 4 --pg-statements >"$work/out" 2>"$work/err" || rc=$?
cat "$work/out"
if [ "$rc" != 0 ]; then
  tail -40 "$work/err" >&2
  fail "bench/run.sh exited $rc"
fi
# run.sh removes its temporary directory; only the test's output is left.
leftover=$(find "$work" -mindepth 1 -maxdepth 1 ! -name out ! -name err)
[ -z "$leftover" ] || fail "run.sh left $leftover"

# A markdown table's rows whose first cells are `durable | 2`, as fields.
rows() { grep '^| durable | 2 |' "$work/out" | sed 's/^| //; s/ |$//; s/ | /|/g'; }

# The results table: | mode | conns | system | actions/s | p50 | p99 | p99.9 |
# begin p99 | violations | errors |
for system in intentd-baseline intentd intentd-pg-baseline intentd-pg postgres redis; do
  row=$(rows | awk -F'|' -v s="$system" 'NF == 10 && $3 == s')
  [ -n "$row" ] || fail "no results row for $system"
  echo "$row" | awk -F'|' '{ exit !($4 > 0 && $8 > 0 && $9 == 0 && $10 == 0) }' ||
    fail "$system: no actions or begin p99, or violations or errors: $row"
done
# The ratios table (9 cells with --baseline) and the CPU table (9 cells,
# its busy shares as "N% / M%"): every cell is a figure.
ratios=$(rows | awk -F'|' 'NF == 9 && $3 ~ /x$/')
[ "$(echo "$ratios" | grep -c .)" = 1 ] || fail "no single ratios row: $ratios"
echo "$ratios" | awk -F'|' '{ for (i = 3; i <= 9; i++) if ($i !~ /^[0-9.]+x$/) exit 1 }' ||
  fail "a ratio is missing: $ratios"
cpu=$(rows | awk -F'|' 'NF == 9 && $8 ~ /%/')
[ "$(echo "$cpu" | grep -c .)" = 1 ] || fail "no single CPU row: $cpu"
echo "$cpu" | awk -F'|' '{ for (i = 3; i <= 7; i++) if ($i !~ /^[0-9.]+$/) exit 1;
                           if ($8 !~ /^[0-9]+% \/ [0-9]+%$/ || $9 !~ /^[0-9.]+x$/) exit 1 }' ||
  fail "a CPU figure is missing: $cpu"

# The fleet table: | mode | agents | conns | total | per agent | p50 | p99 |
# p99.9 | PostgreSQL CPU | violations | errors |, here agents 2 of 2
# connections each: the total is the sum of the two agents' figures.
fleet=$(grep '^| durable | 2 | 4 |' "$work/out" | sed 's/^| //; s/ |$//; s/ | /|/g')
[ -n "$fleet" ] || fail "no fleet row for 2 agents and 4 connections"
echo "$fleet" | awk -F'|' '{ n = split($5, a, "/"); if (n != 2) exit 1;
    exit !(a[1] > 0 && a[2] > 0 && ($4 - a[1] - a[2]) ^ 2 <= 1 && $9 > 0 && $10 == 0 && $11 == 0) }' ||
  fail "the fleet's row does not sum two agents with no violations or errors: $fleet"

# --pg-statements: each intentd-pg system's report names its own database
# and holds its statements (an insert into intencao, called at least once);
# on one shared database the baseline's report would be empty.
while read -r system db; do
  report=$(awk -v h="run.sh: $system, 2 connections: the $db database's statements in the server" \
    'index($0, h) == 1 { on = 1; next } on && /^\([0-9]+ rows?\)$/ { exit } on' "$work/err")
  echo "$report" | grep -Eq '^ +[1-9][0-9]* \|.*INSERT INTO intencao' ||
    fail "$system: no intent inserts in the $db database's statements: $report"
done <<'EOF'
intentd-pg-baseline intentd_baseline
intentd-pg intentd
EOF
echo "run_test: bench/run.sh measured every system, its ratios, CPU and fleet, each intentd-pg on its own database"
