#!/usr/bin/env bash
# The GPU bench and the peer comparison, end to end, in two halves:
#
#   scripts/bench_device.sh prepare   # here (a machine with nvcc, fmt, CLI11, nlohmann-json):
#                                     # builds the CUDA CLI (static libstdc++) into build-bench-cuda
#                                     # and assembles .carry/bench/ (the CLI, plus fmt and nlohmann-json
#                                     # headers with their CMake configs for the Python build)
#   scripts/bench_device.sh run       # on the GPU machine, with .carry/bench carried: `ladder bench`
#                                     # (B1), the Python module built with pip and its pytest suite
#                                     # (GPU tests included), then bench/peers.py (B2); results
#                                     # under $OUT (bench.json/txt, peers.json/txt/png, log.txt)
#
# Through the device tool: run `scripts/bench_device.sh run` with carry [".carry/bench"]; it
# took about 75 s on an H200 with ladder's batch-1 rows only (bench ~20 s, peers ~45 s, the
# module build overlapped), 119 s on an H100 with the batch-16 rows added and PEERS=cudnn,flash.
#
# The GPU machine has nvcc, CMake, Python 3.12 with torch, nanobind, scikit-build-core and
# matplotlib, but not fmt, CLI11 or nlohmann-json, and no network: hence the carried folder.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# Our own corner of the carried folder: other device scripts keep their builds in .carry too.
CARRY=$ROOT/.carry/bench
mode=${1:-}

prepare() {
  # LADDER_CLI=PATH takes a CUDA CLI already built from this tree (a build-cuda/ladder) instead.
  local cli=${LADDER_CLI:-build-bench-cuda/ladder}
  if [[ -z ${LADDER_CLI:-} ]]; then
    cmake -S . -B build-bench-cuda -G Ninja -DLADDER_CUDA=ON -DLADDER_BUILD_TESTS=OFF >/dev/null
    cmake --build build-bench-cuda --target ladder_cli
  fi
  rm -rf "$CARRY"
  mkdir -p "$CARRY/bin" "$CARRY/prefix/include" "$CARRY/prefix/lib/x86_64-linux-gnu/cmake" \
           "$CARRY/prefix/share/cmake"
  cp "$cli" "$CARRY/bin/ladder"
  strip "$CARRY/bin/ladder"
  cp -r /usr/include/fmt /usr/include/nlohmann "$CARRY/prefix/include/"
  cp -r /usr/lib/x86_64-linux-gnu/cmake/fmt "$CARRY/prefix/lib/x86_64-linux-gnu/cmake/"
  # fmt's imported targets check that the shared library exists, even for header-only use.
  cp -P /usr/lib/x86_64-linux-gnu/libfmt.so* "$CARRY/prefix/lib/x86_64-linux-gnu/"
  cp -r /usr/share/cmake/nlohmann_json "$CARRY/prefix/share/cmake/"
  du -sh "$CARRY"
}

run() {
  # $OUT receives six files (the device returns at most eight): bench.json, bench.txt,
  # peers.json, peers.txt, peers.png and log.txt (GPU facts, progress, build, pytest, checks).
  : "${OUT:=$ROOT/bench-out}"
  mkdir -p "$OUT"
  local log=$OUT/log.txt scratch=/tmp/ladder-bench
  mkdir -p "$scratch"
  export PYTHONUNBUFFERED=1
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$log" 2>&1 || true

  # The Python module compiles while the GPU bench and the peers run: the compile needs only
  # CPUs, and those numbers come from CUDA events (only the engine rows read the host clock).
  local nvcc
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  (python3 -m pip install -q --no-build-isolation --no-deps ./python \
      -Ccmake.define.CMAKE_PREFIX_PATH="$CARRY/prefix" -Ccmake.define.CMAKE_CUDA_COMPILER="$nvcc" \
      -Cbuild-dir="$scratch/py-build" >"$scratch/pybuild.log" 2>&1 && touch "$scratch/pybuild.ok") &
  local build_pid=$!
  local t0=$SECONDS

  # PEERS: which peers bench/peers.py runs (its --peers; e.g. cudnn,flash to leave out flex).
  # LADDER_BENCH_ARGS: the `ladder bench` flags, replacing the default below (e.g. --batch 1,4,16
  # --step-depths 2048,8192; set it empty for the bench's own defaults). Unset, the peers' own shapes: bench/peers.py always times batch 1 and 16 at every depth, so
  # ladder's batch-16 layer rows come beside them (--batch-max-depth 0: no batched step rows).
  # Without them the table of 2026-12-06 (H200) had cuDNN's batch 16 and not ladder's.
  local bench_args=${LADDER_BENCH_ARGS-"--batch 1,16 --batch-max-depth 0"}
  # shellcheck disable=SC2086
  timeout "${BENCH_TIMEOUT:-240}" "$CARRY/bin/ladder" bench --device cuda $bench_args --output "$OUT/bench.json" 2>"$scratch/bench.progress" \
    | tee "$OUT/bench.txt" || echo "ladder bench failed (exit $?)"
  { echo "== ladder bench progress ($((SECONDS - t0)) s)"; cat "$scratch/bench.progress"; } >>"$log"
  t0=$SECONDS
  timeout "${PEERS_TIMEOUT:-200}" python3 bench/peers.py --ladder-json "$OUT/bench.json" --out "$OUT" \
    --flex-budget "${FLEX_BUDGET:-60}" ${PEERS:+--peers "$PEERS"} 2>"$scratch/peers.progress" \
    | tee "$OUT/peers.txt" || echo "peers.py failed"
  { echo "== peers progress ($((SECONDS - t0)) s)"; cat "$scratch/peers.progress"; } >>"$log"
  tail -5 "$scratch/peers.progress"

  wait "$build_pid" || true
  { echo "== Python module build"; tail -40 "$scratch/pybuild.log"; } >>"$log"
  if [[ -f $scratch/pybuild.ok ]]; then
    python3 -m pytest -q -rs python/tests >"$scratch/pytest.txt" 2>&1 || true
    grep -v "leaked" "$scratch/pytest.txt" | tail -25 | tee -a "$log"
    python3 bench/peers.py --ladder-check-only --out "$scratch" 2>&1 | tail -8 | tee -a "$log" || true
  else
    echo "Python module build failed" | tee -a "$log"
    tail -30 "$scratch/pybuild.log"
  fi
}

case "$mode" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: scripts/bench_device.sh prepare|run" >&2; exit 2 ;;
esac
