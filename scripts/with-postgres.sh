#!/usr/bin/env bash
# Runs a command next to a private, throw-away PostgreSQL 15:
#   scripts/with-postgres.sh ctest --output-on-failure ...
# The server listens only on a Unix socket in a temporary directory (no TCP),
# holds one database, and is stopped and removed when the command ends. The
# command sees:
#   INTENTD_TEST_POSTGRES       libpq URI of the database (postgresql:///intentd_test?host=DIR)
#   INTENTD_TEST_POSTGRES_CTL   a helper for tests that need a server of their own:
#                               `CTL init DIR` (new cluster, not started), `CTL start DIR`,
#                               `CTL stop DIR`; its URI is postgresql:///intentd_test?host=DIR.
#                               For replication tests (tests/torture/failover.sh) also
#                               `CTL standby DIR PRIMARY` (a streaming standby of the running
#                               cluster PRIMARY, not started), `CTL kill DIR` (SIGKILL the
#                               server: a crash), `CTL promote DIR` and `CTL psql DIR ARGS...`
# When PostgreSQL 15 cannot be installed, the command still runs, without these
# variables: the PostgreSQL tests then skip and say why. The exit status is the
# command's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ $# -eq 0 ]; then
  echo "usage: $0 COMMAND [ARGS...]" >&2
  exit 2
fi

bindir=/usr/lib/postgresql/15/bin
if [ ! -x "$bindir/initdb" ]; then
  # Debian's postgresql-15 creates and starts a default cluster on install
  # unless told not to; this wrapper wants only its private one.
  if [ "$(id -u)" -eq 0 ] && [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/intentd-tests.conf
  fi
  if ! bash "$here/install-deps.sh" postgresql-15 || [ ! -x "$bindir/initdb" ]; then
    echo "with-postgres: PostgreSQL 15 could not be installed; running without it" \
         "(the PostgreSQL tests will be skipped)" >&2
    exec "$@"
  fi
fi

workdir="$(mktemp -d "${TMPDIR:-/tmp}/intentd-pg.XXXXXX")"
ctl="$workdir/pgctl"
# The helper runs the server as `postgres` when called by root (the server
# refuses to run as root), else as the caller.
cat > "$ctl" <<EOF
#!/usr/bin/env bash
# pgctl init|start|stop DIR: a private PostgreSQL 15 on a Unix socket in DIR.
# pgctl standby DIR PRIMARY | kill DIR | promote DIR | psql DIR ARGS...: the same
# server as a streaming standby of PRIMARY, crashed, promoted, or queried.
set -euo pipefail
bindir=$bindir
usage="usage: pgctl init|start|stop|kill|promote DIR | standby DIR PRIMARY | psql DIR ARGS..."
cmd="\${1:?\$usage}"
dir="\${2:?\$usage}"
as_owner() {
  if [ "\$(id -u)" -eq 0 ]; then runuser -u postgres -- "\$@"; else "\$@"; fi
}
case "\$cmd" in
  init)
    mkdir -p "\$dir"
    chmod 700 "\$dir"
    if [ "\$(id -u)" -eq 0 ]; then chown postgres: "\$dir"; fi
    # trust: only the socket directory's owner (and root) can reach the socket.
    as_owner "\$bindir/initdb" -D "\$dir/data" --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 \
      -U postgres >"\$dir/initdb.log" 2>&1 || { cat "\$dir/initdb.log" >&2; exit 1; }
    # A throw-away test cluster: no fsync (the store's durability is PostgreSQL's own).
    cat >> "\$dir/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '\$dir'
max_connections = 300
fsync = off
full_page_writes = off
synchronous_commit = on
# Statement counts, for the tests that check how often a statement is planned.
shared_preload_libraries = 'pg_stat_statements'
CONF
    "\$0" start "\$dir"
    as_owner "\$bindir/psql" -h "\$dir" -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 \
      -c "CREATE DATABASE intentd_test" >/dev/null
    # The tests run as the caller (often root): let that role in as a superuser.
    me="\$(id -un)"
    if [ "\$me" != postgres ]; then
      as_owner "\$bindir/psql" -h "\$dir" -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 \
        -c "CREATE ROLE \\"\$me\\" LOGIN SUPERUSER" >/dev/null
    fi
    "\$0" stop "\$dir"
    ;;
  start)
    as_owner "\$bindir/pg_ctl" -D "\$dir/data" -l "\$dir/server.log" -w -t 60 start >/dev/null
    ;;
  stop)
    as_owner "\$bindir/pg_ctl" -D "\$dir/data" -m fast -w -t 60 stop >/dev/null
    ;;
  standby)
    # A base backup of the running cluster PRIMARY that streams its WAL from
    # it (standby.signal, primary_conninfo): the standby reports itself as
    # application_name "standby" (cluster_name), the name a primary lists in
    # synchronous_standby_names. It never asks for a synchronous standby of
    # its own, so that once promoted it commits alone.
    primary="\${3:?\$usage}"
    mkdir -p "\$dir"
    chmod 700 "\$dir"
    if [ "\$(id -u)" -eq 0 ]; then chown postgres: "\$dir"; fi
    as_owner "\$bindir/pg_basebackup" -h "\$primary" -U postgres -D "\$dir/data" -R -X stream \
      -c fast >"\$dir/basebackup.log" 2>&1 || { cat "\$dir/basebackup.log" >&2; exit 1; }
    cat >> "\$dir/data/postgresql.conf" <<CONF
unix_socket_directories = '\$dir'
cluster_name = 'standby'
synchronous_standby_names = ''
CONF
    ;;
  kill)
    # A crash: SIGKILL to the postmaster and to every process it started, at
    # once (no shutdown checkpoint, nothing more sent to a standby).
    # Its children are found in /proc (no procps in a minimal Debian).
    pid="\$(head -n 1 "\$dir/data/postmaster.pid")"
    pids="\$pid \$(awk -v p="\$pid" '{ s = \$0; sub(/^.*\) /, "", s); split(s, f, " ")
      if (f[2] == p) { n = FILENAME; gsub(/[^0-9]/, "", n); print n } }' \
      /proc/[0-9]*/stat 2>/dev/null || true)"
    # shellcheck disable=SC2086  # a list of process ids
    kill -KILL \$pids 2>/dev/null || true
    # Gone, or a zombie that its parent (often init) has not reaped yet.
    for _ in \$(seq 100); do
      state="\$(awk '{ sub(/^.*\) /, ""); print \$1 }' "/proc/\$pid/stat" 2>/dev/null || true)"
      if [ -z "\$state" ] || [ "\$state" = Z ]; then exit 0; fi
      sleep 0.1
    done
    echo "pgctl: the server of \$dir survived SIGKILL" >&2
    exit 1
    ;;
  promote)
    as_owner "\$bindir/pg_ctl" -D "\$dir/data" -w -t 60 promote >/dev/null
    ;;
  psql)
    shift 2
    as_owner "\$bindir/psql" -X -h "\$dir" -U postgres -d intentd_test -qAt -v ON_ERROR_STOP=1 "\$@"
    ;;
  *)
    echo "pgctl: unknown command \$cmd" >&2
    exit 2
    ;;
esac
EOF
chmod 755 "$ctl"
if [ "$(id -u)" -eq 0 ]; then chmod 755 "$workdir"; fi  # postgres reaches the helper

cluster="$workdir/main"
cleanup() {
  "$ctl" stop "$cluster" >/dev/null 2>&1 || true
  rm -rf "$workdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$ctl" init "$cluster"
"$ctl" start "$cluster"
echo "with-postgres: PostgreSQL 15 on $cluster (Unix socket only)" >&2

export INTENTD_TEST_POSTGRES="postgresql:///intentd_test?host=$cluster"
export INTENTD_TEST_POSTGRES_CTL="$ctl"
status=0
"$@" || status=$?
exit "$status"
