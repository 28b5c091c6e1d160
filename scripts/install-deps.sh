#!/usr/bin/env bash
# Installs everything intentd needs to build and test, from Debian 12 packages.
# Idempotent: packages already present are not fetched again. Runs as root
# (or through sudo when it is available).
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git ca-certificates
  librocksdb-dev libssl-dev libicu-dev nlohmann-json3-dev libboost1.81-dev
  libjemalloc-dev libsimdjson-dev libcurl4-openssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev libpq-dev libhiredis-dev
  python3 nodejs
  # clients/python: its offline install in a fresh venv (clients.python.install)
  python3-venv python3-pip-whl python3-setuptools-whl python3-wheel-whl python3-setuptools python3-wheel
  dpkg-dev file systemd groff-base shellcheck
  clang-format  # tests/source/format_test.sh: the tree as its .clang-format says
  man-db  # packaging tests: systemd-analyze verify runs man(1) on the units' Documentation=
  clang libclang-rt-14-dev  # scripts/fuzz.sh: clang 14, libFuzzer and the sanitizer runtimes
  libfuse3-dev fuse3  # tests/powerloss: the power-loss file system and fusermount3
)
# clients/node's install test runs npm. Debian's nodejs comes without it (the
# npm package); a NodeSource nodejs bundles it and conflicts with that package.
command -v npm >/dev/null 2>&1 || packages+=(npm)
# Extra packages a caller asks for (e.g. the test command adds PostgreSQL).
packages+=("$@")

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then as_root=(sudo); else
    echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1
  fi
fi
echo "install-deps: installing ${#missing[@]} packages with apt-get (a few minutes on a fresh machine): ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Packages wanted for a binary only (the test command's prometheus, for its
# promtool; redis-server, for bench/run.sh's private instances) bring a
# service that is enabled and started where systemd runs, and is not left so
# (in a chroot invoke-rc.d starts nothing).
for unit in prometheus redis-server; do
  if [[ " ${missing[*]} " == *" $unit "* ]] && [ -d /run/systemd/system ]; then
    "${as_root[@]}" systemctl disable --now "$unit.service" >/dev/null 2>&1 || true
    echo "install-deps: $unit.service disabled and stopped (only its binary is used)" >&2
  fi
done
