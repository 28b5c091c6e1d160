#!/usr/bin/env bash
# Runs the packaged binary from the unpacked .deb: `serve` on a temporary
# socket and data dir with a key file and the packaged config, a `begin` over
# the socket (protocol client, then the CLI), and a clean SIGTERM stop.
source "$(dirname "$0")/lib.sh"
unpack_deb
HERE=$(cd "$(dirname "$0")" && pwd)

SOCK=$SCRATCH/intentd.sock
DATA=$SCRATCH/data
KEY=$SCRATCH/hmac-key
CONFIG=$ROOT/etc/intentd/intentd.json
make_key_file "$KEY"
check "intentd keygen prints 64 lowercase hex characters" grep -qxE '[0-9a-f]{64}' "$KEY"

# The agent refuses a key file that group or others may read.
chmod 0640 "$KEY"
if "$BIN" serve --socket "$SOCK" --data-dir "$DATA" --hmac-key-file "$KEY" --config "$CONFIG" \
     >"$SCRATCH/refused.log" 2>&1; then
  fail "serve started with a group-readable key file"
fi
check "serve refuses a group-readable key file, saying why" grep -qi "key" "$SCRATCH/refused.log"
chmod 0600 "$KEY"

say "starting: intentd serve --socket <tmp> --data-dir <tmp> --hmac-key-file <tmp> --config <packaged>"
"$BIN" serve --socket "$SOCK" --data-dir "$DATA" --hmac-key-file "$KEY" --config "$CONFIG" \
  2>"$SCRATCH/serve.log" &
SERVE_PID=$!
CLEANUP_HOOKS+=("kill -KILL $SERVE_PID 2>/dev/null; cat '$SCRATCH/serve.log' >&2")
wait_for "intentd ping --socket <tmp> to answer" 30 "$BIN" ping --socket "$SOCK"
check "the agent accepted the packaged config (and answers ping)" "$BIN" ping --socket "$SOCK"
check "the log lines carry journald priority prefixes" grep -qE '^<[0-7]>' "$SCRATCH/serve.log"

payload='{"cliente_id":"01J9ZQ3K8V7M2N4P6R8T0W2Y4A","valor":"180.00","chave_pix_destino":"529.982.247-25"}'
req='{"id":1,"op":"begin","tenant_id":"acme","intent_ref":"FAT-2026-000123","action_type":"pix.cobranca","payload":'$payload'}'
resp=$("$PYTHON3" "$HERE/client.py" "$SOCK" "$req") || fail "the protocol client could not talk to the agent"
say "begin -> $resp"
field() { "$PYTHON3" -c 'import json,sys; v=json.loads(sys.argv[1]); print(json.dumps(v.get(sys.argv[2])) if not isinstance(v.get(sys.argv[2]), str) else v[sys.argv[2]])' "$1" "$2"; }
check "begin answered ok with id 1" test "$(field "$resp" ok)/$(field "$resp" id)" = "true/1"
check "the first begin decides execute" test "$(field "$resp" decision)" = execute
key=$(field "$resp" key)
check "the key is 64 hex characters" grep -qxE '[0-9a-f]{64}' <<<"$key"
check "lease_token 1 is granted" test "$(field "$resp" lease_token)" = 1

cli=$("$BIN" begin --socket "$SOCK" --json --tenant acme --ref FAT-2026-000123 --action pix.cobranca \
        --payload "$payload") || fail "intentd begin --json exited with $?"
say "intentd begin --json -> $cli"
check "a second begin (CLI) decides in_flight" test "$(field "$cli" decision)" = in_flight
check "with the same key" test "$(field "$cli" key)" = "$key"
check "intentd complete --json exits 0" \
  "$BIN" complete --socket "$SOCK" --json --tenant acme --key "$key" --token 1 --response '{"psp":"ok"}'
cli=$("$BIN" begin --socket "$SOCK" --json --tenant acme --ref FAT-2026-000123 --action pix.cobranca) || true
check "after complete, begin replays" test "$(field "$cli" decision)" = replay

say "stopping with SIGTERM"
kill -TERM "$SERVE_PID"
start=$SECONDS
rc=0
wait "$SERVE_PID" || rc=$?
CLEANUP_HOOKS=()
check "serve exits 0 on SIGTERM (got $rc)" test "$rc" -eq 0
check "within 5 s ($((SECONDS - start)) s)" test $((SECONDS - start)) -le 5

say "restarting on the same data dir"
"$BIN" serve --socket "$SOCK" --data-dir "$DATA" --hmac-key-file "$KEY" --config "$CONFIG" \
  2>"$SCRATCH/serve2.log" &
SERVE_PID=$!
CLEANUP_HOOKS+=("kill -KILL $SERVE_PID 2>/dev/null; cat '$SCRATCH/serve2.log' >&2")
wait_for "the restarted agent to answer" 30 "$BIN" ping --socket "$SOCK"
cli=$("$BIN" begin --socket "$SOCK" --json --tenant acme --ref FAT-2026-000123 --action pix.cobranca) || true
check "the completed action survived the restart (replay)" test "$(field "$cli" decision)" = replay
kill -TERM "$SERVE_PID"
wait "$SERVE_PID" || true
CLEANUP_HOOKS=()

done_ok
