#!/usr/bin/env bash
# The run command: installs what is needed, builds, and runs the agent in the
# foreground for development: socket and embedded store in ./.dev, a dev HMAC
# secret generated once in ./.dev/hmac-key (mode 0600), built-in action types.
# Ctrl-C stops it. Extra arguments go to `intentd serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "dev: [1/3] checking the Debian packages (scripts/install-deps.sh)" >&2
bash scripts/install-deps.sh
# The compiler's progress shows as ninja's [done/total] lines: a first build
# compiles ~100 files, several minutes on 2 cores (ccache makes later ones quick).
echo "dev: [2/3] building intentd in ${BUILD_DIR:-build}/ (cmake + ninja)" >&2
TARGET=intentd bash scripts/build.sh >&2
bin=${BUILD_DIR:-build}/agent/intentd
echo "dev: [3/3] starting the agent" >&2
mkdir -p .dev
chmod 700 .dev
if [ ! -s .dev/hmac-key ]; then
  (umask 077 && "$bin" keygen > .dev/hmac-key.tmp && mv .dev/hmac-key.tmp .dev/hmac-key)
  echo "dev: generated a development HMAC secret in .dev/hmac-key" >&2
fi
sock=$PWD/.dev/intentd.sock
cat >&2 <<MSG
dev: starting the agent on $sock (store in .dev/data). Try, from another terminal:
  export INTENTD_SOCKET=$sock
  $bin begin --tenant acme --ref FAT-2026-000123 --action pix.cobranca \\
    --payload '{"cliente_id":"c-42","valor":"180.00","chave_pix_destino":"111.444.777-35"}'
  $bin complete --tenant acme --key <key from above> --token 1 --response '{"provider_id":"ch_1"}'
  $bin begin --tenant acme --ref FAT-2026-000123 --action pix.cobranca   # replay: not charged again
MSG
exec "$bin" serve --socket "$sock" --data-dir .dev/data --hmac-key-file .dev/hmac-key \
  --config "${INTENTD_CONFIG:-packaging/config/intentd.json}" "$@"
