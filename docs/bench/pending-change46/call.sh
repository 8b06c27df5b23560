# Change 46 (docs/perf.md), device call 1: the GPU suite of change 46's build (change46.patch on
# f73df92, packed with scripts/pack_carry.sh BUILD .carry/c46 ladder=ladder ladder_gpu_tests=gpu_tests),
# then the four sanitizers on the tests that cover the warp-split fold and its two-round merge
# (every route, the walk, the one-kernel form's arrival order), padded and, by the environment,
# swizzled. Carry [".carry/c46"]; ~6 min. Results in $OUT/suite.txt.
set -u
mkdir -p /tmp/c46
xz -dc .carry/c46/ladder.xz >/tmp/c46/ladder
xz -dc .carry/c46/gpu_tests.xz >/tmp/c46/ladder_gpu_tests
chmod +x /tmp/c46/*
LADDER_BIN_DIR=/tmp/c46 LADDER_STEPS=tests OUT=/tmp/run46 timeout 240 scripts/device_run.sh >/dev/null 2>&1
echo "suite rc=$?" >>$OUT/suite.txt
{ cat /tmp/run46/progress.txt; find /tmp/run46 -name 'gpu_tests*.log' | head -1 | xargs grep -E "PASSED|FAILED|max rel" | tail -14; } >>$OUT/suite.txt 2>&1
filter='GpuFullRing.TensorCoreEveryRouteSameBits:GpuSlotWalk.SwizzledTilesGiveThePaddedBits:GpuFused.ArrivalOrderNeverChangesBits:GpuFused.StoreFusedReducerWaitsForItsProducers'
LADDER_SAN_FILTER=$filter LADDER_BIN_DIR=/tmp/c46 LADDER_STEPS=san OUT=/tmp/san46 timeout 150 scripts/device_run.sh >/dev/null 2>&1
echo "san rc=$?" >>$OUT/suite.txt
cat /tmp/san46/progress.txt >>$OUT/suite.txt 2>&1
LADDER_GPU_TILES=swizzled LADDER_SAN_FILTER='GpuFullRing.TensorCoreEveryRouteSameBits:GpuSlotWalk.SlotsPerCtaNeverChangeBits' \
  LADDER_BIN_DIR=/tmp/c46 LADDER_STEPS=san OUT=/tmp/san46s timeout 120 scripts/device_run.sh >/dev/null 2>&1
echo "san swizzled rc=$?" >>$OUT/suite.txt
cat /tmp/san46s/progress.txt >>$OUT/suite.txt 2>&1
