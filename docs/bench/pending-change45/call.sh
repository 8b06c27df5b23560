# Change 45 (docs/perf.md), device call 1 of 2: the GPU suite of the change's build (its new tests
# GpuRoutes*.SwizzledTilesGiveThePaddedBits and GpuSlotWalk.SwizzledTilesGiveThePaddedBits
# among them), then the four sanitizers on the swizzled tests and, with LADDER_GPU_TILES=swizzled,
# on the pipeline tests that D's run covered. Build: a CUDA build of main at the change, packed
# with scripts/pack_carry.sh BUILD .carry/c45 ladder=ladder ladder_gpu_tests=gpu_tests.
# Carry [".carry/c45"]; ~5 min. Results in $OUT/suite.txt.
set -u
bash docs/bench/pending-change45/unpack.sh
LADDER_BIN_DIR=/tmp/c45 LADDER_STEPS=tests OUT=/tmp/run45 timeout 240 scripts/device_run.sh >/dev/null 2>&1
echo "suite rc=$?" >>$OUT/suite.txt
{ cat /tmp/run45/progress.txt; find /tmp/run45 -name 'gpu_tests*.log' | head -1 | xargs grep -E "PASSED|FAILED|Swizzled" | tail -12; } >>$OUT/suite.txt 2>&1
LADDER_SAN_FILTER='GpuRoutes.SwizzledTilesGiveThePaddedBits:GpuSlotWalk.SwizzledTilesGiveThePaddedBits' \
  LADDER_BIN_DIR=/tmp/c45 LADDER_STEPS=san OUT=/tmp/san45 timeout 150 scripts/device_run.sh >/dev/null 2>&1
echo "san swizzled tests rc=$?" >>$OUT/suite.txt
cat /tmp/san45/progress.txt >>$OUT/suite.txt 2>&1
LADDER_GPU_TILES=swizzled LADDER_SAN_FILTER='GpuFullRing.TensorCoreEveryRouteSameBits:GpuFused.StoreFusedReducerWaitsForItsProducers:GpuSlotWalk.SlotsPerCtaNeverChangeBits' \
  LADDER_BIN_DIR=/tmp/c45 LADDER_STEPS=san OUT=/tmp/san45e timeout 150 scripts/device_run.sh >/dev/null 2>&1
echo "san pipeline tests, swizzled by the environment rc=$?" >>$OUT/suite.txt
cat /tmp/san45e/progress.txt >>$OUT/suite.txt 2>&1
