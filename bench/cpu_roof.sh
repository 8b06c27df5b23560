#!/usr/bin/env bash
# The CPU roofline run of issue 11 (docs/perf.md), A/B and thread sweep in one go, in halves so
# the run can happen on a machine with no network:
#
#   bash bench/cpu_roof.sh prepare      # here: builds the CLI (build/, static libstdc++) and
#                                       # copies it, this script, cpu_threads_table.py and the
#                                       # peers' scripts into $LADDER_CPU_CARRY (default
#                                       # .carry/cpuroof). A "before" CLI built from another commit
#                                       # goes there by hand as ladder-before; cpu_ggml_fa from
#                                       # `bench/cpu_peers.sh prepare`.
#   bash bench/cpu_roof.sh run [DIR]    # anywhere, DIR = that folder: for each CLI in DIR
#                                       # (ladder, then every ladder-* there, e.g. ladder-before), `ladder bench
#                                       # --device cpu` on vec/growing and splitk/ring at DEPTHS
#                                       # for every thread count of THREAD_LIST (default
#                                       # "1 2 4 8 N", N = hardware threads), the 52-layer step at
#                                       # STEP_DEPTHS on N threads; then cpu_threads_table.py folds
#                                       # every run into threads.txt/json; all of it tarred into
#                                       # $OUT/cpu-roof.tar.gz (a device returns few files).
#   bash bench/cpu_roof.sh peers [DIR]  # cpu_peers.py at N threads (PyTorch SDPA, llama.cpp FA)
#                                       # into $OUT, tarred into $OUT/cpu-peers.tar.gz.
#
# BENCH_EXTRA: more `ladder bench` arguments for the N-thread runs (e.g. "--batch 1,4,16");
# THREAD_LIST="" runs N threads only (no 1-thread run either).
# DEADLINE_S (default 600): seconds the whole `run` may take; each bench gets what is left less
# a margin for the table and the tar, in the order N threads (both CLIs), 1 thread, then the rest.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mode=${1:-}

prepare() {
  local root carry
  root=$(cd "$here/.." && pwd)
  carry=${LADDER_CPU_CARRY:-$root/.carry/cpuroof}
  mkdir -p "$carry"
  cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLADDER_CUDA=OFF >/dev/null
  cmake --build "$root/build" -j 2 --target ladder_cli
  cp "$root/build/ladder" "$carry/ladder"
  strip "$carry/ladder"
  cp "$here/cpu_roof.sh" "$here/cpu_threads_table.py" "$here/cpu_peers.sh" "$here/cpu_peers.py" "$carry/"
  du -sh "$carry"
}

run() {
  local dir=${1:-$here}
  : "${OUT:=$PWD/cpu-roof-out}"
  local work=$OUT/cpu-roof
  mkdir -p "$work"
  local log=$work/log.txt n depths steps reps start deadline margin=25
  n=$(nproc)
  depths=${DEPTHS:-2048,8192,32768,131072}
  steps=${STEP_DEPTHS:-8192,32768}
  reps=${REPS:-10}
  start=$(date +%s)
  deadline=$((start + ${DEADLINE_S:-600}))
  { lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Core|MHz|L1d|L2|L3' || true; date -u; } >"$log" 2>&1
  local labels=(ladder) f
  for f in "$dir"/ladder-*; do [ -x "$f" ] && labels+=("$(basename "$f")"); done
  local order=("$n")
  [ -n "${THREAD_LIST-x}" ] && order+=(1)
  for t in ${THREAD_LIST-1 2 4 8 $n}; do
    [ "$t" -le "$n" ] && [ "$t" -ne "$n" ] && [ "$t" -ne 1 ] && order+=("$t")
  done
  for t in "${order[@]}"; do
    for label in "${labels[@]}"; do
      local left=$((deadline - margin - $(date +%s)))
      if [ "$left" -le 5 ]; then echo "== skipped $label at $t threads: out of time" >>"$log"; continue; fi
      local extra=(--step-depths none)
      # shellcheck disable=SC2206
      [ "$t" -eq "$n" ] && extra=(--step-depths "$steps" --no-fallback-step ${BENCH_EXTRA:-})
      echo "== $label bench --threads $t (limit ${left}s) $(date -u +%T)" >>"$log"
      timeout "$left" "$dir/$label" bench --device cpu --threads "$t" --reps "$reps" --depths "$depths" \
        --routes vec/growing,splitk/ring "${extra[@]}" --output "$work/bench-$label-t$t.json" \
        >"$work/bench-$label-t$t.txt" 2>>"$log" || echo "== $label at $t threads: exit $?" >>"$log"
    done
  done
  python3 "$dir/cpu_threads_table.py" "$work" >/dev/null 2>>"$log" || echo "== table failed" >>"$log"
  date -u >>"$log"
  tar -czf "$OUT/cpu-roof.tar.gz" -C "$OUT" cpu-roof
  cp "$work/threads.txt" "$OUT/threads.txt" 2>/dev/null || true
}

peers() {
  local dir=${1:-$here}
  : "${OUT:=$PWD/cpu-roof-out}"
  local work=$OUT/cpu-peers n
  mkdir -p "$work"
  n=$(nproc)
  { lscpu | grep -E 'Model name|^CPU\(s\)' || true; date -u; } >"$work/log.txt" 2>&1
  python3 "$dir/cpu_peers.py" --threads "$n" --depths "${DEPTHS:-2048,8192,32768,131072}" --reps "${REPS:-10}" \
    --ggml-driver "$dir/cpu_ggml_fa" --out "$work" >>"$work/log.txt" 2>&1 || echo "== peers: exit $?" >>"$work/log.txt"
  date -u >>"$work/log.txt"
  tar -czf "$OUT/cpu-peers.tar.gz" -C "$OUT" cpu-peers
}

case "$mode" in
  prepare) prepare ;;
  run) run "${2:-}" ;;
  peers) peers "${2:-}" ;;
  *) echo "usage: $0 prepare | run [DIR] | peers [DIR]" >&2; exit 2 ;;
esac
