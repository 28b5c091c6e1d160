#!/usr/bin/env bash
# Smoke check of intentd_loadgen against an agent on PostgreSQL (about 8 s):
#   loadgen_postgres_smoke.sh LOADGEN INTENTD
# A private server from scripts/with-postgres.sh's helper
# ($INTENTD_TEST_POSTGRES_CTL), a spawned agent on it, 8 connections for 2 s.
# Fails on a redelivery told to execute, a failed request, an unclean agent
# exit, or a report without the agent's PostgreSQL batches (the
# `PostgreSQL batches:` line and the RESULT fields bench/RESULTS.md reads):
# requests per statement at least 1 and a round trip over 0 ms, for both
# kinds; or without the server's CPU per request (--server-pid, the
# postmaster) of at least 10 us (270 us in this check's run here). Exits 77
# (skipped) when the helper is unset.
set -euo pipefail
loadgen=$1 intentd=$2
if [ -z "${INTENTD_TEST_POSTGRES_CTL:-}" ]; then
  echo "loadgen_postgres_smoke: skipped: INTENTD_TEST_POSTGRES_CTL is unset; run the tests" \
       "under scripts/with-postgres.sh" >&2
  exit 77
fi
ctl=$INTENTD_TEST_POSTGRES_CTL
work=$(mktemp -d "${TMPDIR:-/tmp}/intentd-loadgen-pg.XXXXXX")
# The server runs as postgres when this runs as root: it must reach it.
if [ "$(id -u)" -eq 0 ]; then chmod 755 "$work"; fi
cleanup() {
  if [ -e "$work/server/data/postmaster.pid" ]; then "$ctl" stop "$work/server" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
"$ctl" init "$work/server" >/dev/null
"$ctl" start "$work/server" >/dev/null
out=$(TMPDIR=$work "$loadgen" --system intentd --spawn-intentd "$intentd" \
  --spawn-store "postgresql:///intentd_test?host=$work/server" --connections 8 --duration 2 \
  --warmup 0.5 --redeliveries 0.2 --server-pid "$(head -n 1 "$work/server/data/postmaster.pid")")
echo "$out"
result=$(echo "$out" | grep '^RESULT ')
for kind in begin complete; do
  requests=$(echo "$result" | grep -o " ${kind}_batch_requests=[0-9.]*" | cut -d= -f2)
  ms=$(echo "$result" | grep -o " ${kind}_batch_ms=[0-9.]*" | cut -d= -f2)
  if [ -z "$requests" ] || [ -z "$ms" ] ||
     ! awk -v r="$requests" -v m="$ms" 'BEGIN { exit !(r >= 1 && m > 0) }'; then
    echo "loadgen_postgres_smoke: no figures for the $kind batches in: $result" >&2
    exit 1
  fi
done
server=$(echo "$result" | grep -o " server_cpu_us=[0-9.]*" | cut -d= -f2)
if [ -z "$server" ] || ! awk -v s="$server" 'BEGIN { exit !(s >= 10) }'; then
  echo "loadgen_postgres_smoke: no server CPU per request of 10 us or more in: $result" >&2
  exit 1
fi
echo "$out" | grep -q '^  PostgreSQL batches: begin ' ||
  { echo "loadgen_postgres_smoke: no 'PostgreSQL batches:' line" >&2; exit 1; }
