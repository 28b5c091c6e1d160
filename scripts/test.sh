#!/usr/bin/env bash
# The test command: installs what is needed, builds, and passes every test:
# unit, integration, torture, hostile clients, packaging, clients and the demo
# (ctest), next to a private PostgreSQL 15 on a Unix socket for the
# PostgreSQL backend's tests (scripts/with-postgres.sh).
# INTENTD_FULL=1 also runs the sanitizer suites (scripts/sanitize.sh) and the
# fuzz targets (scripts/fuzz.sh) first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ "${INTENTD_FULL:-0}" = 1 ]; then
  bash scripts/sanitize.sh
  FUZZ_SECONDS=${FUZZ_SECONDS:-20} bash scripts/fuzz.sh
fi
bash scripts/build.sh
cd build
bash ../scripts/with-postgres.sh ctest --output-on-failure -j"$(nproc)"
