#!/usr/bin/env bash
# Stages 1 and 2 of docs/bench/pending-wgmma/design.md on the GPU machine, in one device call:
# `ladder_wgmma_probe bits` (the bit probe: mma.sync against wgmma, f16 and bf16), then `time`
# (TIME_KERNELS, default all: ws, wg, wgp, wgs2-4 at shapes a, b, c beside the read ceiling, f16;
# shape BF16_SHAPE, default a, again in bf16), then, where ncu exists, ncu on one launch of each
# kernel in NCU_KERNELS (default wgp) at each shape of NCU_SHAPES (default "a b"). Everything goes
# into ONE archive, $OUT/wgmma.tgz (the device tool brings back at most 8 files), with a short
# summary.txt beside it.
#
#   [SKIP_BITS=1] [TIME_KERNELS=wg,wgs3,read] [NCU_KERNELS="wg wgs3"] [NCU_SHAPES="b c"] \
#     [SAN_TOOLS="memcheck racecheck synccheck"] [SAN_KERNELS=ws,wg,wgk] [SAN_SHAPE=b] \
#     docs/bench/pending-wgmma/probe.sh [DIR=.carry/wgmma]
#
# SAN_TOOLS: after the timing, each named compute-sanitizer tool over one unchecked-for-time run
# (`time --reps 1`, the bit checks on) of SAN_KERNELS at SAN_SHAPE, SAN_LIMIT s each (default 120); a tool's
# errors make the status 6.
#
# DIR holds ladder_wgmma_probe.xz (or ladder_wgmma_probe), built on the build machine:
#   ninja -C build-wg ladder_wgmma_probe
#   mkdir -p .carry/wgmma && xz -9 -T2 -c build-wg/ladder_wgmma_probe > .carry/wgmma/ladder_wgmma_probe.xz
# Every step runs under `timeout`; the whole stays under ~120 s (bits ~15 s, time ~20 s, each ncu
# at most 22 s). Exit status: the worst of bits (4: a way broken) and time (5: a kernel's check
# failed).
set -uo pipefail
cd "$(dirname "$0")/../../.."
DIR=${1:-.carry/wgmma}
NCU_KERNELS=${NCU_KERNELS:-wgp}
NCU_SHAPES=${NCU_SHAPES:-a b}
TIME_KERNELS=${TIME_KERNELS:-all}
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
[ -z "${SKIP_BITS:-}" ] && step bits 60 bits
step time 90 time --kernel "$TIME_KERNELS"
step "time_bf16_${BF16_SHAPE:-a}" 30 time --shape "${BF16_SHAPE:-a}" --dtype bf16 --kernel "$TIME_KERNELS"

cuda_tool() {  # cuda_tool NAME: its path on PATH or in /usr/local/cuda/bin, else nothing
  command -v "$1" || { [ -x "/usr/local/cuda/bin/$1" ] && echo "/usr/local/cuda/bin/$1"; } || true
}
SAN=$(cuda_tool compute-sanitizer)
for tool in ${SAN_TOOLS:-}; do
  if [ -z "$SAN" ]; then echo "san $tool: compute-sanitizer not found" >>"$res/summary.txt"; break; fi
  t0=$SECONDS
  timeout "${SAN_LIMIT:-120}" "$SAN" --tool "$tool" --error-exitcode 6 --print-limit 20 \
    "$BIN" time --shape "${SAN_SHAPE:-b}" --kernel "${SAN_KERNELS:-ws,wg,wgk}" --reps 1 >"$res/san_$tool.txt" 2>&1
  rc=$?
  echo "san $tool (${SAN_KERNELS:-ws,wg,wgk} at ${SAN_SHAPE:-b}): rc=$rc ($((SECONDS - t0)) s)" >>"$res/summary.txt"
  [ "$rc" -gt "$status" ] && status=$rc
done

NCU=$(cuda_tool ncu)
if [ -n "$NCU" ]; then
  # The timed launch after the warm-up one (--launch-skip 1), caches flushed (ncu's default). The
  # sections design.md asks for: duration, DRAM bytes and throughput, eligible warps and issue
  # rate, stall reasons, occupancy and launch resources, instruction counts. (The tensor pipe's
  # f16 -> f32 operations were counted for wg on 2026-12-07; wgp issues the same 32 wgmma a tile.)
  # wg and wgs2-4 are one template (wgs_kernel<dtype, RingLayout<warpgroups, stages, CTAs an SM>>):
  # matched by their layout in the mangled name; wgk is wg's layout with the split release
  # (StageRelease 1), so its name is matched by that (a first run asked for `wgk_kernel`, which
  # does not exist: 2026-12-07 night, no wgk profile came back).
  ncu_regex() {
    case $1 in
      wg) echo 'wgs_kernel.*RingLayoutILi1ELi3ELi2EEELNS_12StageReleaseE0' ;;
      wgk) echo 'wgs_kernel.*StageReleaseE1' ;;
      wgs2) echo 'wgs_kernel.*RingLayoutILi2E' ;;
      wgs3) echo 'wgs_kernel.*RingLayoutILi3E' ;;
      wgs4) echo 'wgs_kernel.*RingLayoutILi4E' ;;
      *) echo "${1}_kernel" ;;
    esac
  }
  for k in $NCU_KERNELS; do
    for s in $NCU_SHAPES; do
      t0=$SECONDS
      timeout 30 "$NCU" --kernel-name-base mangled -k "regex:$(ncu_regex "$k")" --launch-skip 1 --launch-count 1 \
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
cat "$res/summary.txt" "$res"/bits.txt "$res"/time*.txt 2>/dev/null
exit "$status"
