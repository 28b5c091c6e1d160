#!/usr/bin/env bash
# The test command: installs what is needed, builds, and passes every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)"
