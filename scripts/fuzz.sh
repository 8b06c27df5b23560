#!/usr/bin/env bash
# Builds the libFuzzer target with clang (address + undefined sanitizers on the whole library)
# and runs it for a bounded time. Usage: scripts/fuzz.sh [seconds]   (default 60)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build="$root/build-fuzz"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DLADDER_CUDA=OFF -DLADDER_BUILD_TESTS=OFF \
  -DLADDER_FUZZ=ON -DLADDER_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" fuzz_ladder >/dev/null
corpus="$build/corpus"
mkdir -p "$corpus"
echo "fuzz_ladder: running for ${seconds}s"
"$build/fuzz_ladder" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 "$corpus" 2>&1 | tail -n 12
