# Change 45 (docs/perf.md), device call 1 of 2: the GPU suite of the change's build (its new tests
# GpuRoutes*.SwizzledTilesGiveThePaddedBits and GpuSlotWalk.SwizzledTilesGiveThePaddedBits
# among them), then the four sanitizers on the swizzled tests and, with LADDER_GPU_TILES=swizzled,
# on the pipeline tests that D's run covered. Build: a CUDA build of main at the change, packed
# with scripts/pack_carry.sh BUILD .carry/c45 ladder=ladder ladder_gpu_tests=gpu_tests.
# Carry [".carry/c45"]; ~5 min. Results in $OUT/suite.txt.
set -u
s=docs/bench/pending-change45/suite.sh
bash $s .carry/c45 c45
bash $s .carry/c45 c45 'GpuRoutes.SwizzledTilesGiveThePaddedBits:GpuSlotWalk.SwizzledTilesGiveThePaddedBits'
LADDER_GPU_TILES=swizzled bash $s .carry/c45 c45 \
  'GpuFullRing.TensorCoreEveryRouteSameBits:GpuFused.StoreFusedReducerWaitsForItsProducers:GpuSlotWalk.SlotsPerCtaNeverChangeBits'
