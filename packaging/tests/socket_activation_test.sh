#!/usr/bin/env bash
# The socket-activation path of the packaged binary, as intentd.socket and
# intentd.service run it: the listening socket comes from
# systemd-socket-activate (LISTEN_FDS), the secret from $CREDENTIALS_DIRECTORY
# (LoadCredential=), and READY=1 / WATCHDOG=1 / STOPPING=1 must arrive on the
# NOTIFY_SOCKET datagram socket this test listens on.
source "$(dirname "$0")/lib.sh"
unpack_deb
HERE=$(cd "$(dirname "$0")" && pwd)
command -v systemd-socket-activate >/dev/null || fail "systemd-socket-activate is missing (package systemd)"

SOCK=$SCRATCH/activated.sock
NOTIFY=$SCRATCH/notify.sock
EVENTS=$SCRATCH/notify.log
CREDS=$SCRATCH/credentials
mkdir -m 0700 "$CREDS"
make_key_file "$CREDS/hmac-key"
chmod 0400 "$CREDS/hmac-key"  # as systemd hands credentials over
: >"$EVENTS"

"$PYTHON3" "$HERE/notify_listener.py" "$NOTIFY" "$EVENTS" 60 &
LISTENER_PID=$!
CLEANUP_HOOKS+=("kill $LISTENER_PID 2>/dev/null")
wait_for "the NOTIFY_SOCKET listener to bind" 10 test -S "$NOTIFY"

say "systemd-socket-activate -l <sock> -E NOTIFY_SOCKET=<dgram> -E CREDENTIALS_DIRECTORY=<dir> -E WATCHDOG_USEC=400000 intentd serve --data-dir <tmp>"
# No --socket and no --hmac-key-file: both must come from the environment, as
# under systemd (ExecStart=/usr/bin/intentd serve --data-dir /var/lib/intentd).
systemd-socket-activate -l "$SOCK" \
  -E NOTIFY_SOCKET="$NOTIFY" -E CREDENTIALS_DIRECTORY="$CREDS" -E WATCHDOG_USEC=400000 \
  "$BIN" serve --data-dir "$SCRATCH/data" --config "$ROOT/etc/intentd/intentd.json" \
  2>"$SCRATCH/serve.log" &
AGENT_PID=$!
CLEANUP_HOOKS+=("kill -KILL $AGENT_PID 2>/dev/null; echo '--- agent log:' >&2; cat '$SCRATCH/serve.log' >&2; echo '--- notifications:' >&2; cat '$EVENTS' >&2")
wait_for "systemd-socket-activate to listen" 10 test -S "$SOCK"
inode=$(stat -c %i "$SOCK")

# systemd-socket-activate starts the program on the first connection; ping
# waits in the backlog until the agent takes over the listening socket.
check "intentd ping over the activated socket exits 0" "$BIN" ping --socket "$SOCK"
wait_for "READY=1 on NOTIFY_SOCKET" 10 grep -q 'READY=1' "$EVENTS"
check "READY=1 arrived on NOTIFY_SOCKET" grep -q 'READY=1' "$EVENTS"
check "the agent served the socket it was given (same inode, not re-created)" \
  test "$(stat -c %i "$SOCK")" = "$inode"
check "it did not fall back to the default socket path" \
  bash -c '! grep -q "/run/intentd/intentd.sock" "$1"' _ "$SCRATCH/serve.log"
check "it read the secret from \$CREDENTIALS_DIRECTORY/hmac-key" grep -qi "credential\|CREDENTIALS_DIRECTORY" "$SCRATCH/serve.log"

resp=$("$PYTHON3" "$HERE/client.py" "$SOCK" \
  '{"op":"begin","tenant_id":"acme","intent_ref":"A-1","action_type":"email.cobranca","payload":{"cliente_id":"C1","template":" Lembrete "}}') \
  || fail "protocol client over the activated socket"
check "a begin over the activated socket decides execute" grep -q '"decision":"execute"' <<<"$resp"

wait_for "WATCHDOG=1 (WATCHDOG_USEC=400000)" 10 grep -q 'WATCHDOG=1' "$EVENTS"
check "WATCHDOG=1 pings arrive" grep -q 'WATCHDOG=1' "$EVENTS"

kill -TERM "$AGENT_PID"
rc=0
wait "$AGENT_PID" || rc=$?
check "SIGTERM: exit 0 (got $rc)" test "$rc" -eq 0
check "STOPPING=1 arrived before the exit" grep -q 'STOPPING=1' "$EVENTS"
say "notifications received: $(sort "$EVENTS" | uniq -c | awk '{ printf "%s x%s; ", $2, $1 }')"
CLEANUP_HOOKS=("kill $LISTENER_PID 2>/dev/null")

done_ok
