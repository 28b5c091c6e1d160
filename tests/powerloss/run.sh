#!/usr/bin/env bash
# Power-loss torture: the crash torture (tests/torture, intentd_torture) with
# the agent's data directory on intentd_plfs (tests/powerloss/plfs.cc), whose
# power is cut after every SIGKILL and before the restart. The restarted agent
# finds only what it had made durable, and every invariant of the crash
# torture (each acknowledged intent, complete and grant is still there) is
# checked after each restart and at the end.
#
#   run.sh --cuts N [--wal-spares on|off] [--sync always|none] [--seed S]
#          [--mode plain|keep-prefix|torn|mixed] [--expect-loss]
#          [--min-seconds S] [--max-seconds S] [--faults LIST]
#          [--serve-arg ARG]... [--intentd PATH] [--torture PATH] [--plfs PATH]
#
# --cuts: at least N SIGKILL + cut rounds (one more before the final check).
# --mode: what a cut keeps of the unsynced writes (plfs.cc, "Cut variants");
#   mixed (default) draws one of the three per cut from the seed.
# --expect-loss: the test of the test (with --sync none): succeed only when the
#   checker reports lost acknowledged writes.
# --faults: storage faults injected while the clients run (plfs.cc, "Faults on
#   demand"), a comma-separated list of: enospc (writes, creates and
#   fallocates failing at random, short writes among them), full (the disk
#   full for a moment, then space again), eio (fsyncs failing with EIO, their
#   pages lost at the next cut), vanish (the data directory moved away for a
#   moment, then back); "all" for every one. A driver draws one fault at a
#   time for 0.1-0.5 s, with pauses between. 8 clients then pipeline 16
#   requests each (a fifth of them `seen`), the agent is killed at most every
#   4 s, and the torture also checks that no write answered storage_error
#   took effect, every acknowledged sighting survived and every request was
#   answered within 3 s while the agent ran (tests/torture/checker.h).
# --serve-arg: one more argument of `intentd serve` (repeatable).
# Binaries default to those of the build directory build/ (intentd_plfs is
# built there when missing).
#
# Output: the torture's (tests/torture/torture_main.cc), then a line "cuts: ..."
# (cuts per mode, how many found unsynced data to drop, acknowledged
# operations checked), and as last line "N passed, M failed" where N and M
# count invariants (with --expect-loss: the one expectation, loss reported).
# On a failure, the clients' logs, the agent's log, the cut log and the store
# at the end (the last cut, then what the last agent wrote) are kept in
# /tmp/intentd-torture-SEED.
# Exit status: 0 on success, 1 on failure, 2 on a usage error, 77 (skipped)
# without root, /dev/fuse or fusermount3.
set -euo pipefail

SELF=$(realpath "${BASH_SOURCE[0]}")
ROOT=$(cd "$(dirname "$SELF")/../.." && pwd)

# The durability invariants of tests/torture/checker.h: a FAIL of one of them
# is a lost (or changed) acknowledged write.
LOSS_PATTERN='^ *FAIL (no two grants|a second grant|every acknowledged|every replay|final records)'

usage() {
  sed -n '/^#   run.sh/,/^#          \[--intentd/p' "$SELF" | sed 's/^# \{0,3\}//' >&2
  exit 2
}

# Internal: the --after-kill command. Cuts the power of the plfs instance on
# SOCKET, in MODE (mixed: drawn from SEED and the kill number), and appends
# "KILL MODE CUT_SEED STATS_BEFORE" to LOG.
cut_once() {
  local plfs=$1 socket=$2 mode=$3 seed=$4 log=$5
  local kill=${INTENTD_TORTURE_KILL:?run by intentd_torture --after-kill}
  if [[ $mode == mixed ]]; then
    local modes=(plain keep-prefix torn) hash
    hash=$(printf '%s-%s' "$seed" "$kill" | cksum | cut -d' ' -f1)
    mode=${modes[hash % 3]}
  fi
  local cut_seed=$((seed * 1000 + kill)) before reply
  # Faults end with the power: the data directory back where the restart
  # expects it, and the fault driver kept away from it while the agent
  # starts (faults_lock, hold).
  if [[ -n ${FAULTS_LOCK:-} ]]; then
    flock "$FAULTS_LOCK" bash -c '"$0" ctl "$1" fault clear >/dev/null; "$0" ctl "$1" return data >/dev/null 2>&1 || true; touch "$2"' \
      "$plfs" "$socket" "$FAULTS_HOLD"
  fi
  before=$("$plfs" ctl "$socket" stats)
  case $mode in
    plain) reply=$("$plfs" ctl "$socket" cut || true) ;;
    *) reply=$("$plfs" ctl "$socket" cut "$mode" "$cut_seed" || true) ;;
  esac
  if [[ $reply != ok ]]; then
    echo "cut after kill $kill ($mode): $reply" >&2
    return 1
  fi
  echo "$kill $mode $cut_seed $before" >>"$log"
}

if [[ ${1:-} == __cut ]]; then
  shift
  cut_once "$@"
  exit
fi

cuts='' spares=on sync=always seed='' mode=mixed expect_loss=0 min_seconds=0 max_seconds=''
faults='' serve_args=()
intentd=$ROOT/build/agent/intentd
torture=$ROOT/build/tests/torture/intentd_torture
plfs=$ROOT/build/tests/powerloss/intentd_plfs
plfs_given=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --expect-loss) expect_loss=1; shift; continue ;;
    --help | -h) usage ;;
  esac
  [[ $# -ge 2 ]] || usage
  case $1 in
    --cuts) cuts=$2 ;;
    --wal-spares) spares=$2 ;;
    --sync) sync=$2 ;;
    --seed) seed=$2 ;;
    --mode) mode=$2 ;;
    --min-seconds) min_seconds=$2 ;;
    --max-seconds) max_seconds=$2 ;;
    --intentd) intentd=$2 ;;
    --torture) torture=$2 ;;
    --plfs) plfs=$2; plfs_given=1 ;;
    --faults) faults=$2 ;;
    --serve-arg) serve_args+=(--serve-arg "$2") ;;
    *) usage ;;
  esac
  shift 2
done
[[ $cuts =~ ^[0-9]+$ ]] || usage
[[ $spares == on || $spares == off ]] || usage
[[ $sync == always || $sync == none ]] || usage
[[ $mode =~ ^(plain|keep-prefix|torn|mixed)$ ]] || usage
[[ $faults == all ]] && faults=enospc,full,eio,vanish
[[ -z $faults || $faults =~ ^(enospc|full|eio|vanish)(,(enospc|full|eio|vanish))*$ ]] || usage
[[ -z $seed ]] && seed=$((RANDOM * 32768 + RANDOM))
[[ $seed =~ ^[1-9][0-9]*$ ]] || usage
# Enough for the cuts at this machine's pace (a round takes about a second).
[[ -z $max_seconds ]] && max_seconds=$((cuts * 10 + 60))

skip() {
  echo "SKIPPED: $*"
  exit 77
}
[[ $(id -u) -eq 0 ]] || skip "needs root (mounts a FUSE file system)"
[[ -c /dev/fuse ]] || skip "no /dev/fuse"
command -v fusermount3 >/dev/null || skip "no fusermount3 (Debian package fuse3)"

if [[ ! -x $plfs && $plfs_given -eq 0 ]]; then
  cmake --build "$ROOT/build" --target intentd_plfs >&2
fi
for bin in "$intentd" "$torture" "$plfs"; do
  [[ -x $bin ]] || { echo "run.sh: $bin is not an executable" >&2; exit 2; }
done
intentd=$(realpath "$intentd") torture=$(realpath "$torture") plfs=$(realpath "$plfs")

work=$(mktemp -d /tmp/intentd-powerloss.XXXXXX)
backing=$work/backing mnt=$work/mnt socket=$work/plfs.sock cut_log=$work/cuts.log
mkdir "$backing" "$mnt"
: >"$cut_log"
plfs_pid='' torture_pid='' tail_pid='' faults_pid=''
fault_log=$work/faults.log
: >"$fault_log"

mounted() { awk -v m="$mnt" '$2 == m { found = 1 } END { exit !found }' /proc/mounts; }

# Ends the torture (its process group: the agent too), unmounts, removes the
# temporary directory. Runs on every exit.
# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
  if [[ -n $faults_pid ]]; then kill "$faults_pid" 2>/dev/null || true; fi
  if [[ -n $torture_pid ]]; then kill -KILL -- "-$torture_pid" 2>/dev/null || true; fi
  if [[ -n $tail_pid ]]; then kill "$tail_pid" 2>/dev/null || true; fi
  if mounted && ! fusermount3 -u "$mnt" 2>/dev/null; then
    sleep 0.5
    fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt" || true
  fi
  if [[ -n $plfs_pid ]]; then
    for _ in $(seq 50); do kill -0 "$plfs_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$plfs_pid" 2>/dev/null || true
  fi
  mounted || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount_plfs() {
  "$plfs" "$backing" "$mnt" --control "$socket" -f -s 2>"$work/plfs.log" &
  plfs_pid=$!
  for _ in $(seq 200); do
    if mounted && [[ -S $socket ]]; then return 0; fi
    kill -0 "$plfs_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "intentd_plfs did not mount:" >&2
  cat "$work/plfs.log" >&2
  return 1
}

# The store never syncs the parent of its directory: the harness makes the
# entry of the data directory durable, as an installer would.
make_data_dir() {
  mkdir "$mnt/data"
  python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.close(fd)' \
    "$mnt"
  local pending
  pending=$("$plfs" ctl "$socket" pending)
  if [[ $pending != none ]]; then
    echo "the data directory is not durable after fsync of the mount: $pending" >&2
    return 1
  fi
}

# The fault driver (--faults): one fault at a time, drawn from the list and
# the seed, each for 0.1-0.5 s, then a pause of 0.2-0.6 s. Each fault is
# made (a vanish also undone) under $FAULTS_LOCK, and none within 3 s of a
# kill's cut (the hook touches $FAULTS_HOLD): the restart must find the
# directory, and space on it.
# It stops when the torture's clients have stopped (--on-stop), before the
# records are read back.
drive_faults() {
  local kinds i=0 kind ms made
  IFS=, read -r -a kinds <<<"$faults"
  RANDOM=$seed
  while [[ ! -e $work/faults.stop ]]; do
    kind=${kinds[RANDOM % ${#kinds[@]}]}
    ms=$((100 + RANDOM % 400))
    i=$((i + 1))
    # Not while the agent restarts (a start on a full disk fails, rightly):
    # the hold is read and the fault made under $FAULTS_LOCK, which the
    # kill's hook holds while it clears the faults and touches the hold, so
    # that no fault drawn before a cut is made after it. A vanish is also
    # undone under the lock: the restart must find the directory.
    made=$(flock "$FAULTS_LOCK" bash -c '
      [[ -e $2 && $(( $(date +%s) - $(stat -c %Y "$2") )) -lt 3 ]] && exit 0
      case $3 in
        enospc) "$0" ctl "$1" fault enospc 0.05 "$4" ;;
        full) "$0" ctl "$1" fault full ;;
        eio) "$0" ctl "$1" fault eio-fsync 0.3 "$4" ;;
        vanish) "$0" ctl "$1" vanish data && sleep "$5" && "$0" ctl "$1" return data ;;
      esac >/dev/null && echo made' "$plfs" "$socket" "$FAULTS_HOLD" "$kind" $((seed + i)) \
      "0.$((ms / 100))") || true  # a fault that could not be made is skipped
    if [[ $made != made ]]; then
      sleep 0.2
      continue
    fi
    echo "$i $kind ${ms}ms" >>"$fault_log"
    if [[ $kind != vanish ]]; then  # a vanish was undone under the lock
      sleep "0.$(printf %03d "$ms")"
      "$plfs" ctl "$socket" fault clear >/dev/null || true
    fi
    sleep 0.$((2 + RANDOM % 5))
  done
}

# Runs the torture in a process group of its own (so that cleanup ends the
# agent with it); its output goes to the terminal and to $work/torture.out.
run_torture() {
  local after_kill
  after_kill="bash $(printf %q "$SELF") __cut $(printf %q "$plfs") $(printf %q "$socket") $mode $seed $(printf %q "$cut_log")"
  # An expected failure keeps no logs; others keep them in /tmp/intentd-torture-SEED.
  local keep=()
  [[ $expect_loss -eq 1 ]] && keep=(--keep-logs "$work/logs")
  : >"$work/torture.out"
  # TMPDIR: the torture's own temporary directory (socket, agent log) goes
  # with $work, also when a signal ends the torture.
  local load=(--clients 16)
  [[ -n $faults ]] && load=(--clients 8 --pipeline 16 --seen-percent 20 --kill-every-ms 4000 --stall-ms 3000
    --on-stop "touch $(printf %q "$work/faults.stop"); $(printf %q "$plfs") ctl $(printf %q "$socket") fault clear")
  TMPDIR=$work setsid "$torture" "${keep[@]}" "${load[@]}" --min-kills "$cuts" \
    --min-seconds "$min_seconds" \
    --max-seconds "$max_seconds" --seed "$seed" --intentd "$intentd" --data-dir "$mnt/data" \
    --after-kill "$after_kill" --serve-arg --sync --serve-arg "$sync" \
    --serve-arg --wal-spares --serve-arg "$spares" "${serve_args[@]}" >"$work/torture.out" 2>&1 &
  torture_pid=$!
  # In the background, so that a signal's trap runs at once (`wait` returns).
  tail -n +1 -f --pid="$torture_pid" "$work/torture.out" &
  tail_pid=$!
  local rc=0
  wait "$torture_pid" || rc=$?
  torture_pid=''
  wait "$tail_pid" || true
  tail_pid=''
  return "$rc"
}

# "cuts: ..." from the cut log and the torture's "checked:" line.
print_counts() {
  local total dropped per_mode acked
  total=$(wc -l <"$cut_log")
  dropped=$(grep -cvE 'unsynced_bytes=0 .*pending_names=0 ' "$cut_log" || true)
  per_mode=$(awk '{ n[$2]++ } END { for (m in n) printf " %s=%d", m, n[m] }' "$cut_log")
  acked=$(sed -n 's/.*; \([0-9]*\) acknowledged operations checked after the last restart, \([0-9]*\) examined in all/\1 (\2 over all checks)/p' \
    "$work/torture.out")
  echo "cuts: $total (mode $mode:$per_mode), $dropped of them dropped unsynced data;" \
    "acknowledged operations checked: ${acked:-none}"
}

echo "power loss: --cuts $cuts --wal-spares $spares --sync $sync --mode $mode --seed $seed${faults:+ --faults $faults}"
mount_plfs
make_data_dir
if [[ -n $faults ]]; then
  export FAULTS_LOCK=$work/faults.lock FAULTS_HOLD=$work/faults.hold
  : >"$FAULTS_LOCK"
  touch "$FAULTS_HOLD"  # not before the agent's first start
  drive_faults &
  faults_pid=$!
fi
start=$SECONDS
torture_rc=0
run_torture || torture_rc=$?
if [[ -n $faults_pid ]]; then
  kill "$faults_pid" 2>/dev/null || true
  wait "$faults_pid" 2>/dev/null || true
  faults_pid=''
  echo "faults: $(awk '{ n[$2]++ } END { for (k in n) printf "%s=%d ", k, n[k] }' "$fault_log")"
fi
print_counts
echo "duration: $((SECONDS - start)) s; plfs: $("$plfs" ctl "$socket" stats 2>/dev/null || echo gone)"

if [[ $expect_loss -eq 1 ]]; then
  if grep -qE "$LOSS_PATTERN" "$work/torture.out"; then
    echo "expected loss reported: the torture catches unsynced acknowledged writes"
    echo "1 passed, 0 failed"
    exit 0
  fi
  echo "FAILED: no lost acknowledged write reported (torture exit status $torture_rc)"
  echo "0 passed, 1 failed"
  exit 1
fi
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$work/torture.out" | tail -n 1 || true)
if [[ $torture_rc -ne 0 ]]; then
  # The store at the end (the last cut, then the last agent's writes), for a
  # post-mortem.
  kept=/tmp/intentd-torture-$seed
  mkdir -p "$kept" && cp -a "$backing" "$kept/store" && cp "$cut_log" "$kept/"
  echo "FAILED (torture exit status $torture_rc; seed $seed; the last cuts, by kill number:)"
  tail -n 5 "$cut_log"
  echo "store and cuts.log kept in $kept"
fi
echo "${summary:-0 passed, 1 failed}"
exit $((torture_rc == 0 ? 0 : 1))
