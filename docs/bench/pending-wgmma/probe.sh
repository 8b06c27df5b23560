#!/usr/bin/env bash
# Stages 1 and 2 of docs/bench/pending-wgmma/design.md on the GPU machine, in one device call:
# `ladder_wgmma_probe bits` (the bit probe: mma.sync against wgmma, f16 and bf16), then `time` (ws,
# wg and wgp, the software-pipelined wg, at shapes a, b, c beside the read ceiling, f16; shape a
# again in bf16), then, where ncu exists, ncu on one launch of each kernel in NCU_KERNELS (default
# wgp; ws and wg were profiled on 2026-12-07) at shapes a and b. Everything goes into ONE archive,
# $OUT/wgmma.tgz (the device tool brings back at most 8 files), with a short summary.txt beside it.
#
#   docs/bench/pending-wgmma/probe.sh [DIR=.carry/wgmma]
#
# DIR holds ladder_wgmma_probe.xz (or ladder_wgmma_probe), built on the build machine:
#   ninja -C build-wg ladder_wgmma_probe
#   mkdir -p .carry/wgmma && xz -9 -T2 -c build-wg/ladder_wgmma_probe > .carry/wgmma/ladder_wgmma_probe.xz
# Every step runs under `timeout`; the whole stays under ~120 s (bits ~15 s, time ~20 s, each ncu
# at most 22 s). Exit status: the worst of bits (4: a way broken) and time (5: wg's or wgp's check
# failed).
set -uo pipefail
cd "$(dirname "$0")/../../.."
DIR=${1:-.carry/wgmma}
NCU_KERNELS=${NCU_KERNELS:-wgp}
: "${OUT:=$PWD/wgmma-out}"
mkdir -p "$OUT"
work=$(mktemp -d /tmp/wgmma.XXXXXX)
res=$work/wgmma
mkdir -p "$res"
BIN=$work/ladder_wgmma_probe
if [ -f "$DIR/ladder_wgmma_probe.xz" ]; then
  xz -dc "$DIR/ladder_wgmma_probe.xz" >"$BIN"
elif [ -f "$DIR/ladder_wgmma_probe" ]; then
  cp "$DIR/ladder_wgmma_probe" "$BIN"
else
  echo "no ladder_wgmma_probe(.xz) in $DIR" | tee "$OUT/summary.txt"
  exit 2
fi
chmod +x "$BIN"

status=0
step() {  # step NAME SECONDS ARGS...: the probe's output in $res/NAME.txt, its exit code last
  local name=$1 secs=$2
  shift 2
  local t0=$SECONDS
  timeout "$secs" "$BIN" "$@" >"$res/$name.txt" 2>&1
  local rc=$?
  echo "rc=$rc seconds=$((SECONDS - t0))" >>"$res/$name.txt"
  echo "$name: rc=$rc ($((SECONDS - t0)) s)" >>"$res/summary.txt"
  [ "$rc" -gt "$status" ] && status=$rc
  return 0
}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv 2>&1
} >"$res/device.txt"
step bits 60 bits
step time 60 time
step time_bf16_a 20 time --shape a --dtype bf16

NCU=$(command -v ncu || true)
[ -z "$NCU" ] && [ -x /usr/local/cuda/bin/ncu ] && NCU=/usr/local/cuda/bin/ncu
if [ -n "$NCU" ]; then
  # The timed launch after the warm-up one (--launch-skip 1), caches flushed (ncu's default). The
  # sections design.md asks for: duration, DRAM bytes and throughput, eligible warps and issue
  # rate, stall reasons, occupancy and launch resources, instruction counts. (The tensor pipe's
  # f16 -> f32 operations were counted for wg on 2026-12-07; wgp issues the same 32 wgmma a tile.)
  for k in $NCU_KERNELS; do
    for s in a b; do
      t0=$SECONDS
      timeout 22 "$NCU" -k "regex:${k}_kernel" --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats \
        --section WarpStateStats --section Occupancy --section LaunchStats --section InstructionStats \
        --metrics dram__bytes_read.sum,smsp__inst_executed.sum,gpu__time_duration.sum \
        "$BIN" time --shape "$s" --kernel "$k" --reps 1 --no-check >"$res/ncu_${k}_${s}.txt" 2>&1
      echo "ncu ${k} ${s}: rc=$? ($((SECONDS - t0)) s)" >>"$res/summary.txt"
    done
  done
else
  echo "ncu: not found" >>"$res/summary.txt"
fi
echo "status=$status" >>"$res/summary.txt"
cp "$res/summary.txt" "$OUT/summary.txt"
tar -C "$work" -czf "$OUT/wgmma.tgz" wgmma
cat "$res/summary.txt" "$res/bits.txt" "$res/time.txt" "$res/time_bf16_a.txt"
exit "$status"
