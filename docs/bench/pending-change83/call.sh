#!/usr/bin/env bash
# Change 83 (TcWalk::claimed, docs/perf.md) on the GPU machine in one call, each step under its
# own timeout, everything under $OUT. Build here first, on main with the patch applied
# (`git apply docs/bench/pending-change83/change83.patch`; the diagnostic build from the same tree):
#   scripts/pack_carry.sh build-cuda .carry/c83 ladder=ladder ladder_gpu_tests=ladder_gpu_tests
#   scripts/pack_carry.sh build-diag .carry/c83diag ladder=ladder      (-DLADDER_DIAG_TIMELINE=ON)
# and carry [".carry/c83", ".carry/c83diag"]. Steps:
#   1. the new walk test on the reduced sweep (its bits first: a broken walk's timing means nothing)
#   2. three variants of one binary, LADDER_GPU_WALK=groups / slots / claimed, ROUNDS alternated
#      rounds of the batch-16 layer rows at BENCH_DEPTHS (scripts/bench_variants.sh)
#   3. the slot-walk, batch and fused tests, full sweep
#   4. the kernels' timeline of the claimed walk at 32,768 (the diagnostic build)
set -u
cd "$(dirname "$0")/../../.."
R=${OUT:?run through the device tool}
w=/tmp/c83
mkdir -p "$w/bin"
for f in .carry/c83/*.xz; do xz -dc "$f" >"$w/bin/$(basename "$f" .xz)"; done
chmod +x "$w/bin"/*
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$R/device.txt" 2>&1
LADDER_GPU_SWEEP=small timeout 60 "$w/bin/ladder_gpu_tests" \
  --gtest_filter='GpuSlotWalk.PerSlotAndClaimedWalksGiveTheSameBits:GpuSlotWalk.WalkResolvesFromTheEnvironment' \
  >"$R/test-small.txt" 2>&1
echo "test-small rc=$?" >>"$R/rc.txt"
for v in groups slots claimed; do
  printf '#!/bin/sh\nLADDER_GPU_WALK=%s exec %s "$@"\n' "$v" "$w/bin/ladder" >"$w/$v"
  chmod +x "$w/$v"
done
OUT=$R/ab timeout "${AB_LIMIT:-240}" scripts/bench_variants.sh "${ROUNDS:-2}" "$w/groups" "$w/slots" "$w/claimed" -- \
  --depths "${BENCH_DEPTHS:-8192,32768,131072}" --routes none --batch 16 --batch-max-depth 0 --step-depths none \
  --no-fallback-step --no-engine >"$R/ab.log" 2>&1
echo "ab rc=$?" >>"$R/rc.txt"
timeout "${TEST_LIMIT:-150}" "$w/bin/ladder_gpu_tests" --gtest_filter='GpuSlotWalk.*:GpuBatch*:GpuFused*' \
  >"$R/tests.txt" 2>&1
echo "tests rc=$?" >>"$R/rc.txt"
LADDER_GPU_WALK=claimed OUT=$R/tl timeout 90 scripts/timeline_device.sh .carry/c83diag/ladder.xz --depths 32768 \
  --routes none --batch 16 --batch-max-depth 0 --step-depths none --no-fallback-step --no-engine >/dev/null 2>&1
echo "timeline rc=$?" >>"$R/rc.txt"
