#!/usr/bin/env bash
# Checks intentd_loadgen --server-pid (about 4 s):
#   loadgen_server_cpu_test.sh LOADGEN INTENTD
# The "server" is a shell that runs short CPU-bound children one after the
# other, as PostgreSQL runs sessions that end: each child lives about 20 ms,
# so nearly all of the tree's CPU in the window is in children already
# ended and reaped. The shell's tree spends CPU at a steady rate, which this
# script reads over the whole run from /proc/PID/stat (the shell's own and
# its reaped children's time). The loadgen's server CPU over its 2 s window
# (per request times requests) must be at least half of that rate times the
# window, which counting only the living processes does not reach (two
# runs made so: 0.24-0.25 s in the window, the shell's own forks, where the
# tree spent about 1.8 s; counted whole, 1.73-1.76 s), and at most what the
# tree spent over the whole run plus 0.05 s (the child still living at the
# window's end, and the rounding to ticks).
set -euo pipefail
loadgen=$1 intentd=$2
burner_pid=""
cleanup() { if [ -n "$burner_pid" ]; then kill "$burner_pid" 2>/dev/null || true; wait "$burner_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT
bash -c 'while :; do sh -c "i=0; while [ \$i -lt 5000 ]; do i=\$((i+1)); done"; done' &
burner_pid=$!
tree_s() {  # the shell's own and reaped children's user+system time, seconds
  awk -v tick="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($12 + $13 + $14 + $15) / tick }' \
    "/proc/$burner_pid/stat"
}
sleep 0.2
before=$(tree_s) start=$EPOCHREALTIME
out=$("$loadgen" --spawn-intentd "$intentd" --connections 4 --duration 2 --warmup 0.3 \
  --server-pid "$burner_pid")
after=$(tree_s) end=$EPOCHREALTIME
echo "$out"
result=$(echo "$out" | grep '^RESULT ')
field() { echo "$result" | grep -o " $1=[0-9.]*" | cut -d= -f2; }
per_request=$(field server_cpu_us) rate=$(field requests_per_s) seconds=$(field seconds)
if [ -z "$per_request" ] || [ -z "$rate" ] || [ -z "$seconds" ]; then
  echo "loadgen_server_cpu_test: no server_cpu_us in: $result" >&2
  exit 1
fi
echo "$out" | grep -q ', server [0-9.]*;' ||
  { echo "loadgen_server_cpu_test: no ', server' figure in the CPU line" >&2; exit 1; }
awk -v p="$per_request" -v r="$rate" -v s="$seconds" -v b="$before" -v a="$after" \
    -v t0="$start" -v t1="$end" 'BEGIN {
  measured = p * r * s / 1e6; whole = a - b; expected = whole * s / (t1 - t0)
  printf "loadgen_server_cpu_test: server %.2f s in the %.1f s window; the tree %.2f s in %.1f s\n",
    measured, s, whole, t1 - t0
  if (measured < expected / 2) { print "loadgen_server_cpu_test: ended children were not counted" > "/dev/stderr"; exit 1 }
  if (measured > whole + 0.05) { print "loadgen_server_cpu_test: more than the tree spent" > "/dev/stderr"; exit 1 }
}'
