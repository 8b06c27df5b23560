#!/usr/bin/env bash
# Build the `ladder` CLI and run `ladder demo` (arguments are passed through, e.g. --tokens 16).
# Installs missing build dependencies with apt-get. Environment: LADDER_BUILD_DIR (default
# build/), LADDER_CUDA (AUTO, ON or OFF; default AUTO: the CUDA device is built when nvcc exists).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=deps.sh
source "$root/scripts/deps.sh"
ladder_ensure_deps

build=${LADDER_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLADDER_CUDA="${LADDER_CUDA:-AUTO}" >/dev/null
cmake --build "$build" --target ladder_cli -j "$(ladder_jobs)"
exec "$build/ladder" demo "$@"
