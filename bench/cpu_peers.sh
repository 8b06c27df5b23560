#!/usr/bin/env bash
# The CPU bench and its peers (issue 11), in two halves so the run can happen on a machine with
# no network:
#
#   bash bench/cpu_peers.sh prepare   # here: builds the CLI (build/, static libstdc++), fetches the
#                                     # llama-cpp-python source package from PyPI (pip download),
#                                     # builds its ggml folder CPU-only (AVX2/FMA/F16C, ~60 s on 2
#                                     # cores) and links bench/cpu_ggml_fa.cpp against it; assembles
#                                     # $LADDER_CPU_CARRY (default .carry/cpu-peers): ladder,
#                                     # cpu_ggml_fa, this script and cpu_peers.py
#   bash bench/cpu_peers.sh run [DIR] # anywhere with DIR = that folder: `ladder bench --device cpu`
#                                     # at 1, 2, 4, 8 and N threads (N = all hardware threads; the
#                                     # full route set and the 52-layer step at N), the exact producer
#                                     # at N for comparison, then cpu_peers.py (PyTorch SDPA when torch
#                                     # imports, llama.cpp) at N; results under $OUT (default
#                                     # cpu-peers-out/): bench-T.json/txt, cpu_peers.json/txt, log.txt
#
# None of llama.cpp's code is in this repository: prepare fetches it (LLAMA_CPP_PYTHON_VERSION,
# default 0.3.16) and builds it under $LADDER_CPU_PEERS_WORK (default build-cpu-peers/).
# Environment for run: THREAD_LIST (default "1 2 4 8 N"), DEPTHS, REPS.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mode=${1:-}

prepare() {
  local root work carry ver src
  root=$(cd "$here/.." && pwd)
  work=${LADDER_CPU_PEERS_WORK:-$root/build-cpu-peers}
  carry=${LADDER_CPU_CARRY:-$root/.carry/cpu-peers}
  ver=${LLAMA_CPP_PYTHON_VERSION:-0.3.16}
  mkdir -p "$work" "$carry"
  cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLADDER_CUDA=OFF >/dev/null
  cmake --build "$root/build" -j 2 --target ladder_cli
  if [ ! -f "$work/llama_cpp_python-$ver.tar.gz" ]; then
    python3 -m pip download --no-deps --no-binary llama-cpp-python "llama-cpp-python==$ver" -d "$work"
  fi
  src=$work/llama_cpp_python-$ver
  [ -d "$src" ] || tar -xzf "$work/llama_cpp_python-$ver.tar.gz" -C "$work"
  # The package leaves out ggml's pkg-config template, which ggml's CMakeLists configures
  # unconditionally; an empty one is enough for a static build that installs nothing.
  [ -f "$src/vendor/llama.cpp/ggml/ggml.pc.in" ] || : >"$src/vendor/llama.cpp/ggml/ggml.pc.in"
  cmake -S "$src/vendor/llama.cpp/ggml" -B "$work/ggml-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
    -DGGML_OPENMP=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build "$work/ggml-build" -j 2 --target ggml ggml-cpu ggml-base
  local libs
  libs=$(find "$work/ggml-build" -name 'libggml*.a' | sort -r | tr '\n' ' ')
  # shellcheck disable=SC2086
  g++ -O2 -std=c++17 -mavx2 -mfma -mf16c "$here/cpu_ggml_fa.cpp" -I"$src/vendor/llama.cpp/ggml/include" \
    -Wl,--start-group $libs -Wl,--end-group -lpthread -static-libstdc++ -static-libgcc -o "$carry/cpu_ggml_fa"
  cp "$root/build/ladder" "$carry/ladder"
  strip "$carry/ladder" "$carry/cpu_ggml_fa"
  cp "$here/cpu_peers.sh" "$here/cpu_peers.py" "$carry/"
  du -sh "$carry"
}

run() {
  local dir=${1:-$here}
  : "${OUT:=$PWD/cpu-peers-out}"
  mkdir -p "$OUT"
  local log=$OUT/log.txt n depths reps
  n=$(nproc)
  depths=${DEPTHS:-2048,8192,32768,131072}
  reps=${REPS:-10}
  { lscpu | grep -E 'Model name|^CPU\(s\)|Thread|MHz|L2|L3' || true; date -u; } >"$log" 2>&1
  local list=${THREAD_LIST:-"1 2 4 8 $n"}
  for t in $list; do
    [ "$t" -le "$n" ] || continue
    local extra=(--depths 2048,8192,32768 --routes vec/growing,splitk/ring --step-depths none)
    if [ "$t" -eq "$n" ]; then extra=(--depths "$depths" --step-depths 2048,32768 --no-fallback-step); fi
    echo "== ladder bench --threads $t" >>"$log"
    "$dir/ladder" bench --device cpu --threads "$t" --reps "$reps" "${extra[@]}" --output "$OUT/bench-$t.json" \
      >"$OUT/bench-$t.txt" 2>>"$log"
  done
  echo "== ladder bench --threads $n --cpu-producer exact" >>"$log"
  "$dir/ladder" bench --device cpu --threads "$n" --reps "$reps" --cpu-producer exact --depths 2048,8192,32768 \
    --routes vec/growing,splitk/ring --step-depths none --output "$OUT/bench-$n-exact.json" \
    >"$OUT/bench-$n-exact.txt" 2>>"$log"
  echo "== peers" >>"$log"
  python3 "$dir/cpu_peers.py" --threads "$n" --depths "$depths" --reps "$reps" --ggml-driver "$dir/cpu_ggml_fa" \
    --ladder-json "$OUT/bench-$n.json" --out "$OUT" >>"$log" 2>&1
}

case "$mode" in
  prepare) prepare ;;
  run) run "${2:-}" ;;
  *) echo "usage: $0 prepare | run [DIR]" >&2; exit 2 ;;
esac
