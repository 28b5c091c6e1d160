#!/bin/sh
# ctest's clients.agent_tools: installs the locked dependencies (npm ci, from
# package-lock.json), then runs every test of the package against the agent
# named by INTENTD_BINARY. Exits 77, ctest's SKIP_RETURN_CODE, only when npm
# is absent; a failing npm ci (no registry, a lockfile out of date) fails.
set -eu
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null 2>&1; then
  echo "clients.agent_tools: skipped: npm is not installed (Node.js 20 with npm runs these tests)" >&2
  exit 77
fi
npm ci --prefer-offline --no-audit --no-fund --loglevel=error
exec node --test test/*.test.js
