#!/usr/bin/env bash
# Changes 83 and 84 (TcWalk::claimed and claimed_tail, docs/perf.md) on the GPU machine in one
# call, each step under its own timeout, everything under $OUT. Build here first, on main with
# docs/bench/pending-change84/change84.patch applied (it holds change 83 too), and the diagnostic
# build (-DLADDER_DIAG_TIMELINE=ON) from the same tree:
#   scripts/pack_carry.sh build-cuda .carry/c84 ladder=ladder ladder_gpu_tests=ladder_gpu_tests
#   scripts/pack_carry.sh build-diag .carry/c84diag ladder=ladder
# and carry [".carry/c84", ".carry/c84diag"]. Steps:
#   1. the walk tests on the reduced sweep (their bits first: a broken walk's timing means nothing)
#   2. VARIANTS of one binary (LADDER_GPU_WALK=groups / slots / claimed / tail), ROUNDS alternated
#      rounds of the batch-16 layer rows at BENCH_DEPTHS (scripts/bench_variants.sh)
#   3. the kernels' timeline of TIMELINE_WALK (default tail) at 32,768 (the diagnostic build)
#   4. the slot-walk, batch and fused tests, full sweep (last: the longest, cut by TEST_LIMIT)
set -u
cd "$(dirname "$0")/../../.."
R=${OUT:?run through the device tool}
w=/tmp/c84
mkdir -p "$w/bin"
for f in .carry/c84/*.xz; do xz -dc "$f" >"$w/bin/$(basename "$f" .xz)"; done
chmod +x "$w/bin"/*
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$R/device.txt" 2>&1
LADDER_GPU_SWEEP=small timeout 90 "$w/bin/ladder_gpu_tests" \
  --gtest_filter='GpuSlotWalk.PerSlotAndClaimedWalksGiveTheSameBits:GpuSlotWalk.WalkResolvesFromTheEnvironment:GpuSlotWalk.ClaimedTailItemsCoverEverySlotOnce' \
  >"$R/test-small.txt" 2>&1
echo "test-small rc=$?" >>"$R/rc.txt"
variants=()
for v in ${VARIANTS:-groups slots claimed tail}; do
  printf '#!/bin/sh\nLADDER_GPU_WALK=%s exec %s "$@"\n' "$v" "$w/bin/ladder" >"$w/$v"
  chmod +x "$w/$v"
  variants+=("$w/$v")
done
OUT=$R/ab timeout "${AB_LIMIT:-300}" scripts/bench_variants.sh "${ROUNDS:-2}" "${variants[@]}" -- \
  --depths "${BENCH_DEPTHS:-8192,32768,131072}" --routes splitk/ring,vec/growing --batch 16 --batch-max-depth 0 --step-depths none \
  --no-fallback-step --no-engine >"$R/ab.log" 2>&1
echo "ab rc=$?" >>"$R/rc.txt"
LADDER_GPU_WALK=${TIMELINE_WALK:-tail} OUT=$R/tl timeout 90 scripts/timeline_device.sh .carry/c84diag/ladder.xz \
  --depths 32768 --routes splitk/ring --batch 16 --batch-max-depth 0 --step-depths none --no-fallback-step --no-engine \
  >/dev/null 2>&1
echo "timeline rc=$?" >>"$R/rc.txt"
timeout "${TEST_LIMIT:-150}" "$w/bin/ladder_gpu_tests" --gtest_filter='GpuSlotWalk.*:GpuBatch*:GpuFused*' \
  >"$R/tests.txt" 2>&1
echo "tests rc=$?" >>"$R/rc.txt"
