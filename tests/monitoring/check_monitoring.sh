#!/usr/bin/env bash
# Checks packaging/monitoring: the Prometheus rules parse and pass their unit
# tests (promtool, Debian package prometheus), the Grafana dashboard is sane
# (check_dashboard.py), and every intentd_* metric that the rules, their tests
# and the dashboard name is a family the agent exports (grepped in
# agent/, protocol/ and common/ *.cc), so that renaming a metric breaks this test.
#
# Usage: bash tests/monitoring/check_monitoring.sh SOURCE_DIR
# Prints "N passed, M failed" last; exits 1 when a check failed.
set -uo pipefail

src=${1:?usage: check_monitoring.sh SOURCE_DIR}
mon=$src/packaging/monitoring
rules=$mon/intentd-alerts.yml
rules_test=$mon/intentd-alerts.test.yml
dashboard=$mon/intentd-dashboard.json
here=$(cd "$(dirname "$0")" && pwd)
python3=/usr/bin/python3
[ -x "$python3" ] || python3=$(command -v python3)

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

passed=0
failed=0
pass() { passed=$((passed + 1)); printf 'ok   %s\n' "$1"; }
flunk() {
  failed=$((failed + 1))
  printf 'FAIL %s\n' "$1"
  [ -z "${2:-}" ] || printf '%s\n' "$2" | sed 's/^/     /'
}
# check "what" command...: passes when the command exits 0; shows its output otherwise.
check() {
  local what=$1 out
  shift
  if out=$("$@" 2>&1); then pass "$what"; else flunk "$what" "$out"; fi
}

for f in "$rules" "$rules_test" "$dashboard" "$mon/README.md"; do
  check "${f#"$src"/} exists" test -s "$f"
done

# --- 1. the rules: promtool ---------------------------------------------------
if command -v promtool >/dev/null 2>&1; then
  check "promtool check rules intentd-alerts.yml" promtool check rules "$rules"
  # rule_files in the test file are relative to it.
  check "promtool test rules intentd-alerts.test.yml" promtool test rules "$rules_test"
  # Every alert has a unit test that shows it firing.
  alerts=$(sed -nE 's/^ *- alert: *([A-Za-z0-9_]+) *$/\1/p' "$rules" | sort -u)
  untested=$(comm -23 <(printf '%s\n' "$alerts") \
    <(sed -nE 's/^ *alertname: *([A-Za-z0-9_]+) *$/\1/p' "$rules_test" | sort -u))
  if [ -n "$alerts" ] && [ -z "$untested" ]; then
    pass "every alert ($(wc -l <<<"$alerts")) has a unit test"
  else
    flunk "every alert has a unit test" "untested: ${untested:-no alert found}"
  fi
  # Each alert: for, severity, summary, description and a runbook in docs/operations.md.
  missing=$(awk '
    function flush() {
      if (name != "" && (!f || !sev || !sum || !desc || !rb)) print name
    }
    /^ *- alert:/ { flush(); name = $3; f = sev = sum = desc = rb = 0; next }
    /^ *for: /                { f = 1 }
    /^ *severity: *(critical|warning|info) *$/ { sev = 1 }
    /^ *summary: /            { sum = 1 }
    /^ *description: /        { desc = 1 }
    /^ *runbook_url: *"?docs\/operations\.md#[a-z0-9-]+"? *$/ { rb = 1 }
    END { flush() }' "$rules")
  if [ -n "$alerts" ] && [ -z "$missing" ]; then
    pass "every alert has for, severity, summary, description and a docs/operations.md runbook_url"
  else
    flunk "every alert has for, severity, summary, description and a docs/operations.md runbook_url" \
      "incomplete: ${missing:-no alert found}"
  fi
  # The dashboard's expressions parse as PromQL.
  if "$python3" "$here/check_dashboard.py" --promql-rules "$dashboard" "$scratch/dashboard-rules.yml" \
      >"$scratch/out" 2>&1; then
    check "the dashboard's expressions parse (promtool check rules)" \
      promtool check rules "$scratch/dashboard-rules.yml"
  else
    flunk "the dashboard's expressions parse (promtool check rules)" "$(cat "$scratch/out")"
  fi
else
  flunk "promtool is installed" \
    "install the Debian package prometheus (scripts/install-deps.sh lists it)"
fi

# --- 2. the dashboard ---------------------------------------------------------
"$python3" "$here/check_dashboard.py" "$dashboard" >"$scratch/dashboard.out" 2>&1
rc=$?
sed -n '/^ok \|^FAIL \|^     /p' "$scratch/dashboard.out"
n_ok=$(grep -c '^ok ' "$scratch/dashboard.out")
n_fail=$(grep -c '^FAIL ' "$scratch/dashboard.out")
passed=$((passed + n_ok))
failed=$((failed + n_fail))
if [ "$rc" -ne 0 ] && [ "$n_fail" -eq 0 ]; then
  flunk "check_dashboard.py ran" "$(cat "$scratch/dashboard.out")"
fi

# --- 3. every intentd_* metric named exists in the agent ------------------------
# Family names: a histogram's _bucket/_sum/_count series are its family's.
names=$(cat "$rules" "$rules_test" "$dashboard" | grep -oE 'intentd_[a-z0-9_]*[a-z0-9]' |
  sed -E 's/_(bucket|sum|count)$//' | sort -u)
if [ -z "$names" ]; then
  flunk "the rules and the dashboard name intentd_* metrics" "none found"
fi
shopt -s nullglob
agent_sources=("$src"/agent/*.cc "$src"/protocol/*.cc "$src"/common/*.cc)
shopt -u nullglob
if [ ${#agent_sources[@]} -eq 0 ]; then
  flunk "agent sources found in $src/agent, protocol and common" ""
else
  for name in $names; do
    # The family name as a string literal, e.g. p->Family("intentd_requests_total", ...).
    if grep -qF "\"$name\"" "${agent_sources[@]}"; then
      pass "metric $name is exported by the agent"
    else
      flunk "metric $name is exported by the agent" \
        "no \"$name\" in the agent's sources: renamed or removed? fix packaging/monitoring"
    fi
  done
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
