#!/usr/bin/env bash
# ThreadSanitizer run of the CPU suites (issue 12: the pool's concurrency contract): builds the
# library, CLI and CPU tests with -fsanitize=thread into <build>-tsan (CUDA off: device code is
# not host code TSan can see) and runs every CPU test under it; any data race fails the run.
# Called by scripts/test.sh. Measured on 2 cores shared with other builds (load average ~9):
# the cold build took 6 min 10 s and the 86 tests 3 min 47 s of wall time but only 76 s of CPU
# time; on idle cores it is shorter (not measured there).
# Environment: LADDER_BUILD_DIR (default build/; this script uses <it>-tsan).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=deps.sh
source "$root/scripts/deps.sh"
ladder_ensure_deps
jobs=$(ladder_jobs)
build=${LADDER_BUILD_DIR:-$root/build}-tsan

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLADDER_CUDA=OFF \
  -DLADDER_SANITIZE=thread >/dev/null
cmake --build "$build" -j "$jobs"
# halt_on_error: the first race fails the test that found it (and so the run).
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir "$build" --output-on-failure -j "$jobs" -L cpu
