#!/usr/bin/env bash
# The GPU bench and the peer comparison, end to end, in two halves:
#
#   scripts/bench_device.sh prepare   # here (a machine with nvcc, fmt, CLI11, nlohmann-json):
#                                     # builds the CUDA CLI (static libstdc++) into build-bench-cuda
#                                     # and assembles .carry/ (the CLI, plus fmt and nlohmann-json
#                                     # headers with their CMake configs for the Python build)
#   scripts/bench_device.sh run       # on the GPU machine, with .carry carried: `ladder bench`
#                                     # (B1), the Python module built with pip and its pytest suite
#                                     # (GPU tests included), then bench/peers.py (B2); results
#                                     # under $OUT (bench.json/txt, peers.json/txt/png, logs)
#
# The GPU machine has nvcc, CMake, Python 3.12 with torch, nanobind, scikit-build-core and
# matplotlib, but not fmt, CLI11 or nlohmann-json, and no network: hence the carried folder.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CARRY=$ROOT/.carry
mode=${1:-}

prepare() {
  cmake -S . -B build-bench-cuda -G Ninja -DLADDER_CUDA=ON -DLADDER_BUILD_TESTS=OFF >/dev/null
  cmake --build build-bench-cuda --target ladder_cli
  rm -rf "$CARRY"
  mkdir -p "$CARRY/bin" "$CARRY/prefix/include" "$CARRY/prefix/lib/x86_64-linux-gnu/cmake" \
           "$CARRY/prefix/share/cmake"
  cp build-bench-cuda/ladder "$CARRY/bin/ladder"
  strip "$CARRY/bin/ladder"
  cp -r /usr/include/fmt /usr/include/nlohmann "$CARRY/prefix/include/"
  cp -r /usr/lib/x86_64-linux-gnu/cmake/fmt "$CARRY/prefix/lib/x86_64-linux-gnu/cmake/"
  # fmt's imported targets check that the shared library exists, even for header-only use.
  cp -P /usr/lib/x86_64-linux-gnu/libfmt.so* "$CARRY/prefix/lib/x86_64-linux-gnu/"
  cp -r /usr/share/cmake/nlohmann_json "$CARRY/prefix/share/cmake/"
  du -sh "$CARRY"
}

run() {
  : "${OUT:=$ROOT/bench-out}"
  mkdir -p "$OUT"
  export PYTHONUNBUFFERED=1
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt" || true

  # The Python module compiles while the GPU bench runs: the compile needs only CPUs, and the
  # bench's numbers come from CUDA events (only the engine rows read the host clock).
  (python3 -m pip install -q --no-build-isolation --no-deps ./python \
      -Ccmake.define.CMAKE_PREFIX_PATH="$CARRY/prefix" -Cbuild-dir=/tmp/ladder-py-build \
      >"$OUT/pybuild.log" 2>&1 && echo ok >"$OUT/pybuild.ok") &
  build_pid=$!

  "$CARRY/bin/ladder" bench --device cuda --output "$OUT/bench.json" 2>"$OUT/bench.progress" | tee "$OUT/bench.txt"

  wait "$build_pid" || true
  if [[ -f $OUT/pybuild.ok ]]; then
    python3 -m pytest -q python/tests 2>&1 | tail -15 | tee "$OUT/pytest.txt" || true
  else
    echo "Python module build failed; see pybuild.log" | tee "$OUT/pytest.txt"
    tail -30 "$OUT/pybuild.log"
  fi
  python3 bench/peers.py --ladder-json "$OUT/bench.json" --out "$OUT" 2>"$OUT/peers.progress" \
    | tee "$OUT/peers.txt" || { echo "peers.py failed"; tail -20 "$OUT/peers.progress"; }
}

case "$mode" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: scripts/bench_device.sh prepare|run" >&2; exit 2 ;;
esac
