#!/usr/bin/env bash
# Side-by-side benchmark: intentd against PostgreSQL 15 and Redis 7 on this
# machine, the same logical flow (begin -> complete, 3% redeliveries) driven by
# the same generator (intentd_loadgen). Private instances listen on Unix
# sockets only, in a temporary directory on a disk-backed filesystem. The
# system intentd-pg is intentd on its PostgreSQL store (serve --store
# postgresql://...), on the same private PostgreSQL as the raw statements, in
# a database of its own (intentd), spawned by the load generator per point.
#
#   bench/run.sh [--duration S] [--warmup S] [--connections "1 16 64"]
#                [--modes "durable relaxed"] [--build-dir DIR] [--tmp-parent DIR]
#                [--keep] [--plot] [--plot-dir DIR] [--baseline BIN]
#                [--fleet "2 4"] [--fleet-connections C] [--pg-statements]
#
# --plot: also writes throughput.png and p99.png (against connections, one
# panel per mode; bench/plot.py, Debian python3-matplotlib, installed when
# missing) and the run's raw RESULT lines (results.txt) into --plot-dir
# (default bench/), the figures bench/RESULTS.md shows.
#
# --baseline BIN: also runs BIN (another build's agent, e.g. of the previous
# commit) as the system intentd-baseline, started and measured like intentd,
# just before it at every point, so that a change is compared with the same
# run's PostgreSQL and in the same minutes (the table adds the ratio
# intentd/intentd-baseline); likewise BIN on the PostgreSQL store as
# intentd-pg-baseline, just before intentd-pg, on a database of its own (on
# one database, the build that ran second ran on the first's rows too).
#
# --fleet "N...": also, per mode, N agents (`intentd serve --store
# postgresql://...`, each with its own socket, as on N hosts) on the one
# private PostgreSQL, the load spread over their sockets: one loadgen per
# agent, started together, each with C/N of --fleet-connections C (default 64)
# connections. A second table reports the fleet's total actions/s (the sum of
# the loadgens' RESULT lines, which measure the same window), the worst
# agent's latency and PostgreSQL's CPU per request over all the agents'
# requests (each loadgen samples the server's process tree in that window).
# Off by default (it adds N agents' start and one
# --duration per N and mode).
#
# --pg-statements: also loads pg_stat_statements into the private PostgreSQL
# and prints, after each intentd-pg (and intentd-pg-baseline) point, the
# statements of the intentd database that took the server's time in it
# (calls, rows, mean and total execution time, how many times each was
# planned and the total planning time; the batches' common unnest prefix
# elided), to stderr. Off by default.
#
# durable: intentd --sync always, PostgreSQL synchronous_commit=on,
#          Redis appendonly + appendfsync always; intentd-pg --sync always
#          (its sessions SET synchronous_commit=on)
# relaxed: intentd --sync none, PostgreSQL synchronous_commit=off,
#          Redis appendonly + appendfsync everysec; intentd-pg --sync none
#          (its sessions SET synchronous_commit=off)
# The systems are interleaved per connection count, so background load on a
# shared machine hits them alike. Installs postgresql-15 and redis-server from
# Debian when missing (needs root). Prints a markdown table with the ratios
# intentd/PostgreSQL, intentd/Redis and intentd-pg/PostgreSQL measured in this
# run, and one of each server's CPU per request (the loadgen's --server-pid:
# intentd's process, PostgreSQL's and Redis's process trees). Exit status 1
# when any run reported a violation (a redelivery told to execute) or errors.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
duration=10
warmup=1
connections="1 16 64"
modes="durable relaxed"
build_dir="$root/build-bench"
tmp_parent=/var/tmp
keep=0
plot=0
plot_dir="$root/bench"
baseline=""
fleet=""
fleet_connections=64
pg_statements=0
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --tmp-parent) tmp_parent=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --plot) plot=1; shift ;;
    --plot-dir) plot_dir=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --fleet) fleet=$2; shift 2 ;;
    --fleet-connections) fleet_connections=$2; shift 2 ;;
    --pg-statements) pg_statements=1; shift ;;
    -h|--help) sed -n '2,55p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done

log() { echo "run.sh: $*" >&2; }

# --- packages ---------------------------------------------------------------
need=()
pkgs=(postgresql-15 redis-server libpq-dev libhiredis-dev)
[ "$plot" = 0 ] || pkgs+=(python3-matplotlib)
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  [ "$(id -u)" -eq 0 ] || { log "need root to install ${need[*]}"; exit 2; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # policy-rc.d 101: the packages' own system-wide services stay stopped.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d.intentd-bench
  chmod +x /usr/sbin/policy-rc.d.intentd-bench
  [ -e /usr/sbin/policy-rc.d ] || ln -s policy-rc.d.intentd-bench /usr/sbin/policy-rc.d
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  [ "$(readlink /usr/sbin/policy-rc.d 2>/dev/null)" = policy-rc.d.intentd-bench ] && rm -f /usr/sbin/policy-rc.d
  rm -f /usr/sbin/policy-rc.d.intentd-bench
fi
pg_bin=/usr/lib/postgresql/15/bin
id postgres >/dev/null 2>&1 || useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin postgres

# --- build ------------------------------------------------------------------
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S "$root" -B "$build_dir" -G Ninja >/dev/null
fi
cmake --build "$build_dir" --target intentd intentd_loadgen -j2 >/dev/null
intentd="$build_dir/agent/intentd"
loadgen="$build_dir/bench/intentd_loadgen"

# --- private instances --------------------------------------------------------
tmp=$(mktemp -d "$tmp_parent/intentd-bench.XXXXXX")
chmod 755 "$tmp"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ -d "$tmp/pg" ]; then
    runuser -u postgres -- "$pg_bin/pg_ctl" -D "$tmp/pg" -m fast -w stop >/dev/null 2>&1 || true
  fi
  if [ "$keep" = 1 ]; then log "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# The disk's flush rate decides what durable systems can do.
probe=$("$loadgen" --fsync-probe "$tmp" --duration 2)
echo "$probe" | grep -v '^FSYNC' >&2
fsync_line=$(echo "$probe" | grep '^FSYNC' | sed 's/^FSYNC //')
fs_type=$(df -T "$tmp" | awk 'NR==2 {print $2}')

secret=$(python3 -c 'print("k" * 40)')
export IDEMPOTENCY_HMAC_KEY="$secret"

wait_for() {  # wait_for SECONDS COMMAND...
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}

start_intentd() {  # sync [binary] [name]: sets intentd_pid and intentd_socket
  local bin=${2:-$intentd} name=${3:-intentd}
  local dir="$tmp/$name-$1"
  mkdir -p "$dir"
  "$bin" serve --socket "$dir/intentd.sock" --data-dir "$dir/data" --sync "$1" \
    --log-level warning 2>"$dir/log" &
  intentd_pid=$!
  pids+=("$intentd_pid")
  wait_for 30 "$bin" ping --socket "$dir/intentd.sock" || { cat "$dir/log" >&2; exit 1; }
  intentd_socket="$dir/intentd.sock"
}

stop_intentd() {  # pid
  kill -TERM "$1"
  wait "$1" || true
}

start_postgres() {  # synchronous_commit
  rm -rf "$tmp/pg" "$tmp/pgsock"
  mkdir -p "$tmp/pg" "$tmp/pgsock"  # pgsock: the socket and the log
  chown postgres: "$tmp/pg" "$tmp/pgsock"
  chmod 700 "$tmp/pg"
  runuser -u postgres -- "$pg_bin/initdb" -D "$tmp/pg" -U postgres -A trust --no-sync >/dev/null
  runuser -u postgres -- "$pg_bin/pg_ctl" -D "$tmp/pg" -l "$tmp/pgsock/log" -w -t 60 start -o \
    "-c listen_addresses='' -c unix_socket_directories='$tmp/pgsock' -c max_connections=200 \
     -c fsync=on -c synchronous_commit=$1 -c shared_buffers=256MB -c max_wal_size=4GB \
     $([ "$pg_statements" = 1 ] && echo "-c shared_preload_libraries=pg_stat_statements \
       -c pg_stat_statements.track_planning=on")" >/dev/null
  pg_conninfo="host=$tmp/pgsock dbname=postgres user=postgres"
  pg_pid=$(head -n 1 "$tmp/pg/postmaster.pid")  # the loadgen's --server-pid
  if [ "$pg_statements" = 1 ]; then
    pg_sql -c "CREATE EXTENSION pg_stat_statements"
  fi
  # intentd's PostgreSQL store names its tables like the raw statements'
  # (intencao, acao_idempotente): a database of its own.
  runuser -u postgres -- "$pg_bin/createdb" -h "$tmp/pgsock" -U postgres intentd
  pg_store_url="postgresql:///intentd?host=$tmp/pgsock&user=postgres"
  if [ -n "$baseline" ]; then
    runuser -u postgres -- "$pg_bin/createdb" -h "$tmp/pgsock" -U postgres intentd_baseline
    pg_baseline_url="postgresql:///intentd_baseline?host=$tmp/pgsock&user=postgres"
  fi
}

pg_sql() {  # psql on the private server's postgres database, quiet
  runuser -u postgres -- "$pg_bin/psql" -h "$tmp/pgsock" -U postgres -X -q -v ON_ERROR_STOP=1 \
    postgres "$@"
}

# --pg-statements: what an intentd database's statements cost the server
# since the last reset (pg_stat_statements sees every database).
pg_statements_reset() {
  [ "$pg_statements" = 1 ] || return 0
  pg_sql -c "SELECT pg_stat_statements_reset()" >/dev/null
}
pg_statements_report() {  # label connections database
  [ "$pg_statements" = 1 ] || return 0
  log "$1, $2 connections: the $3 database's statements in the server"
  pg_sql -c "SELECT calls, rows, round(mean_exec_time::numeric, 3) AS mean_ms,
      round(total_exec_time::numeric) AS total_ms, plans,
      round(total_plan_time::numeric) AS plan_ms,
      left(regexp_replace(regexp_replace(query, '\s+', ' ', 'g'),
        '^WITH r AS \(SELECT \* FROM unnest\(.*?\) WITH ORDINALITY AS r\([^)]*\)\), ',
        'WITH r AS (unnest ...), '), 90) AS statement
    FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
    WHERE d.datname = '$3' AND s.calls > 0
    ORDER BY total_exec_time DESC LIMIT 8" >&2
}

stop_postgres() {
  runuser -u postgres -- "$pg_bin/pg_ctl" -D "$tmp/pg" -m fast -w stop >/dev/null
  rm -rf "$tmp/pg"
}

start_redis() {  # appendfsync
  local dir="$tmp/redis-$1"
  mkdir -p "$dir"
  redis-server --port 0 --unixsocket "$dir/redis.sock" --unixsocketperm 700 --dir "$dir" \
    --appendonly yes --appendfsync "$1" --save '' --daemonize no --logfile "$dir/log" &
  redis_pid=$!
  pids+=("$redis_pid")
  wait_for 30 redis-cli -s "$dir/redis.sock" ping || { cat "$dir/log" >&2; exit 1; }
  redis_socket="$dir/redis.sock"
}

stop_redis() {
  kill -TERM "$redis_pid"
  wait "$redis_pid" || true
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
results="$tmp/results.txt"
: > "$results"
failed=0
run_one() {  # mode label args...
  local mode=$1 label=$2; shift 2
  local out
  set +e
  out=$("$loadgen" "$@" --duration "$duration" --warmup "$warmup" --label "$label" 2>&1)
  local rc=$?
  set -e
  echo "$out" | grep -v '^RESULT' >&2
  [ $rc -eq 0 ] || { failed=1; log "$label exited $rc"; }
  echo "$out" | grep '^RESULT' | sed "s/^RESULT /RESULT mode=$mode rc=$rc /" >> "$results"
}

# N agents on the one PostgreSQL, one loadgen on each agent's socket, all
# measuring the same window; their RESULT lines go to $fleet_results with the
# fleet's size and the agent's number.
fleet_results="$tmp/fleet.txt"
: > "$fleet_results"
run_fleet() {  # mode sync agents
  local mode=$1 sync=$2 n=$3 i dir rc
  local per=$((fleet_connections / n))
  [ "$per" -ge 1 ] || per=1
  local agent_pids=() loadgen_pids=()
  "$intentd" migrate --store "$pg_store_url" >/dev/null
  for i in $(seq "$n"); do
    dir="$tmp/fleet-$mode-$n-$i"
    mkdir -p "$dir"
    "$intentd" serve --store "$pg_store_url" --sync "$sync" --socket "$dir/intentd.sock" \
      --data-dir "$dir/data" --log-level warning 2>"$dir/log" &
    agent_pids+=("$!")
    pids+=("$!")
  done
  for i in $(seq "$n"); do
    dir="$tmp/fleet-$mode-$n-$i"
    wait_for 30 "$intentd" ping --socket "$dir/intentd.sock" || { cat "$dir/log" >&2; exit 1; }
  done
  log "fleet: $n agents on one PostgreSQL, $per connections each"
  for i in $(seq "$n"); do
    dir="$tmp/fleet-$mode-$n-$i"
    "$loadgen" --system intentd --socket "$dir/intentd.sock" --connections "$per" \
      --duration "$duration" --warmup "$warmup" --label "intentd-pg-fleet" \
      --run-id "fleet-$mode-$n-$i-$$" --server-pid "$pg_pid" >"$dir/out" 2>&1 &
    loadgen_pids+=("$!")
  done
  for i in $(seq "$n"); do
    dir="$tmp/fleet-$mode-$n-$i"
    rc=0
    wait "${loadgen_pids[$((i - 1))]}" || rc=$?
    grep -v '^RESULT' "$dir/out" >&2 || true
    [ $rc -eq 0 ] || { failed=1; log "fleet of $n: the loadgen of agent $i exited $rc"; }
    grep '^RESULT' "$dir/out" |
      sed "s/^RESULT /RESULT mode=$mode agents=$n agent=$i rc=$rc /" >> "$fleet_results"
  done
  for i in "${agent_pids[@]}"; do stop_intentd "$i"; done
}

for mode in $modes; do
  case "$mode" in
    durable) sync=always pg_sync=on redis_sync=always ;;
    relaxed) sync=none pg_sync=off redis_sync=everysec ;;
    *) log "unknown mode $mode"; exit 2 ;;
  esac
  log "mode $mode: intentd --sync $sync, PostgreSQL synchronous_commit=$pg_sync, Redis appendfsync $redis_sync, intentd-pg --sync $sync"
  if [ -n "$baseline" ]; then
    start_intentd "$sync" "$baseline" intentd-baseline
    baseline_pid=$intentd_pid baseline_socket=$intentd_socket
  fi
  start_intentd "$sync"
  start_postgres "$pg_sync"
  start_redis "$redis_sync"
  for c in $connections; do
    if [ -n "$baseline" ]; then
      run_one "$mode" intentd-baseline --system intentd --socket "$baseline_socket" --connections "$c" \
        --server-pid "$baseline_pid"
    fi
    run_one "$mode" intentd --system intentd --socket "$intentd_socket" --connections "$c" \
      --server-pid "$intentd_pid"
    if [ -n "$baseline" ]; then
      pg_statements_reset
      run_one "$mode" intentd-pg-baseline --system intentd --spawn-intentd "$baseline" \
        --spawn-store "$pg_baseline_url" --spawn-sync "$sync" --connections "$c" \
        --server-pid "$pg_pid"
      pg_statements_report intentd-pg-baseline "$c" intentd_baseline
    fi
    pg_statements_reset
    run_one "$mode" intentd-pg --system intentd --spawn-intentd "$intentd" \
      --spawn-store "$pg_store_url" --spawn-sync "$sync" --connections "$c" --server-pid "$pg_pid"
    pg_statements_report intentd-pg "$c" intentd
    run_one "$mode" postgres --system postgres --pg "$pg_conninfo" --connections "$c" \
      --server-pid "$pg_pid"
    run_one "$mode" redis --system redis --redis-socket "$redis_socket" --connections "$c" \
      --server-pid "$redis_pid"
  done
  for n in $fleet; do
    run_fleet "$mode" "$sync" "$n"
  done
  stop_intentd "$intentd_pid"
  [ -z "$baseline" ] || stop_intentd "$baseline_pid"
  stop_postgres
  stop_redis
done

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load average before $load_before, after $load_after"
python3 - "$results" "$fsync_line" "$fs_type" "$duration" "$warmup" <<'PY'
import sys
path, fsync_line, fs_type, duration, warmup = sys.argv[1:]
fsync = dict(kv.split("=", 1) for kv in fsync_line.split())
rows = []
for line in open(path):
    fields = dict(kv.split("=", 1) for kv in line.split()[1:])
    rows.append(fields)
def find(mode, label, c):
    for r in rows:
        if r["mode"] == mode and r["label"] == label and r["connections"] == c:
            return r
    return None
modes = [m for m in ("durable", "relaxed") if any(r["mode"] == m for r in rows)]
conns = sorted({r["connections"] for r in rows}, key=int)
ms = lambda r, k: "%.2f" % (float(r[k]) / 1000)
print("fdatasync of 4 KiB appends on the data directory's filesystem (%s): %s/s with the CPU idle,"
      " %s/s with a busy CPU beside it" % (fs_type, fsync["idle_per_s"], fsync["busy_per_s"]))
print("%s s measured per point after %s s warm-up; latency is per request (begin or complete), in ms."
      % (duration, warmup))
print()
print("| mode | conns | system | actions/s | p50 | p99 | p99.9 | begin p99 | violations | errors |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for m in modes:
    for c in conns:
        for label in ("intentd-baseline", "intentd", "intentd-pg-baseline", "intentd-pg",
                      "postgres", "redis"):
            r = find(m, label, c)
            if r is None: continue
            errors = int(r["errors"]) + int(r["unexpected"]) + int(r["lost"])
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                m, c, label, r["actions_per_s"], ms(r, "p50_us"), ms(r, "p99_us"),
                ms(r, "p999_us"), ms(r, "begin_p99_us"), r["violations"], errors))
print()
baseline = any(r["label"] == "intentd-baseline" for r in rows)
print("| mode | conns | intentd/PostgreSQL | intentd/Redis | intentd-pg/PostgreSQL-raw |"
      + (" intentd-baseline/PostgreSQL | intentd/intentd-baseline |"
         " intentd-pg-baseline/PostgreSQL-raw | intentd-pg/intentd-pg-baseline |"
         if baseline else ""))
print("|---|---:|---:|---:|---:|" + ("---:|---:|---:|---:|" if baseline else ""))
for m in modes:
    for c in conns:
        i, ipg, p, r = (find(m, l, c) for l in ("intentd", "intentd-pg", "postgres", "redis"))
        ratio = lambda a, b: ("%.1fx" % (float(a["actions_per_s"]) / float(b["actions_per_s"]))
                              if a and b and float(b["actions_per_s"]) > 0 else "-")
        ratio2 = lambda a, b: ("%.2fx" % (float(a["actions_per_s"]) / float(b["actions_per_s"]))
                               if a and b and float(b["actions_per_s"]) > 0 else "-")
        line = "| %s | %s | %s | %s | %s |" % (m, c, ratio(i, p), ratio(i, r), ratio2(ipg, p))
        if baseline:
            b = find(m, "intentd-baseline", c)
            pb = find(m, "intentd-pg-baseline", c)
            line += " %s | %s | %s | %s |" % (ratio(b, p), ratio2(i, b), ratio2(pb, p),
                                             ratio2(ipg, pb))
        print(line)
print()
print("CPU per request (us) in the same windows (the load generator's samples of /proc): each"
      " server's process tree (intentd's own process; PostgreSQL's, for intentd-pg and for the raw"
      " statements; Redis's), intentd-pg's agent, and the machine's busy share. The last column is"
      " how many requests the same PostgreSQL CPU serves through intentd-pg for one of the raw"
      " statements': what a database host shared by a fleet carries, its agents on the bot hosts.")
print()
print("| mode | conns | intentd | intentd-pg: PostgreSQL | intentd-pg: agent | raw: PostgreSQL"
      " | Redis | busy intentd-pg / raw | PostgreSQL CPU raw / intentd-pg |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for m in modes:
    for c in conns:
        i, ipg, p, r = (find(m, l, c) for l in ("intentd", "intentd-pg", "postgres", "redis"))
        cpu = lambda row, k: row[k] if row and k in row else "-"
        busy = lambda row: row["busy_pct"] + "%" if row and "busy_pct" in row else "-"
        per = ("%.2fx" % (float(p["server_cpu_us"]) / float(ipg["server_cpu_us"]))
               if p and ipg and "server_cpu_us" in p and "server_cpu_us" in ipg
               and float(ipg["server_cpu_us"]) > 0 else "-")
        print("| %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |" % (
            m, c, cpu(i, "server_cpu_us"), cpu(ipg, "server_cpu_us"), cpu(ipg, "agent_cpu_us"),
            cpu(p, "server_cpu_us"), cpu(r, "server_cpu_us"), busy(ipg), busy(p), per))
PY
if [ -s "$fleet_results" ]; then
  echo
  python3 - "$fleet_results" "$fleet_connections" <<'PY'
import sys
path, total = sys.argv[1:]
groups = {}
for line in open(path):
    fields = dict(kv.split("=", 1) for kv in line.split()[1:])
    groups.setdefault((fields["mode"], int(fields["agents"])), []).append(fields)
print("Fleet: N agents on one PostgreSQL (each its own socket, --store-pool 16), one loadgen per"
      " agent with %s/N connections; actions/s summed over the agents, latency of the worst agent"
      " (ms). PostgreSQL's CPU per request (us) is its process tree's CPU in the measured window,"
      " which every loadgen samples, over all the agents' requests." % total)
print()
print("| mode | agents | conns | actions/s (total) | per agent | p50 | p99 | p99.9"
      " | PostgreSQL CPU per request | violations | errors |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (mode, n), rs in sorted(groups.items(), key=lambda kv: (kv[0][0] != "durable", kv[0][1])):
    total_s = sum(float(r["actions_per_s"]) for r in rs)
    worst = lambda k: "%.2f" % (max(float(r[k]) for r in rs) / 1000)
    errors = sum(int(r["errors"]) + int(r["unexpected"]) + int(r["lost"]) for r in rs)
    # Agent i's figure is the window's server CPU over its own requests, so
    # the window's CPU over all the requests is 1 / sum(1 / figure).
    per = [float(r.get("server_cpu_us", 0)) for r in rs]
    server = "%.1f" % (1 / sum(1 / x for x in per)) if all(x > 0 for x in per) else "-"
    print("| %s | %d | %d | %.0f | %s | %s | %s | %s | %s | %d | %d |" % (
        mode, n, sum(int(r["connections"]) for r in rs), total_s,
        "/".join("%.0f" % float(r["actions_per_s"]) for r in rs), worst("p50_us"),
        worst("p99_us"), worst("p999_us"), server, sum(int(r["violations"]) for r in rs),
        errors))
PY
fi
if [ "$plot" = 1 ]; then
  mkdir -p "$plot_dir"
  cp "$results" "$plot_dir/results.txt"
  # Debian's interpreter: python3-matplotlib is installed for it, whatever
  # python3 comes first in PATH.
  /usr/bin/python3 "$root/bench/plot.py" "$results" "$plot_dir"
fi
exit $failed
