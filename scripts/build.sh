#!/usr/bin/env bash
# Configures and builds intentd in build/ (or $BUILD_DIR). Extra arguments go
# to cmake's configure step; $TARGET builds one target only (e.g. intentd).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
cmake -S . -B "$build_dir" -G Ninja "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" ${TARGET:+--target "$TARGET"}
