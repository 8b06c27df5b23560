# Change 46 (docs/perf.md), device call 1: the GPU suite of change 46's build (change46.patch on
# f73df92, packed with scripts/pack_carry.sh BUILD .carry/c46 ladder=ladder ladder_gpu_tests=gpu_tests),
# then the four sanitizers on the tests that cover the warp-split fold and its two-round merge
# (every route, the walk, the one-kernel form's arrival order), padded and, by the environment,
# swizzled. Carry [".carry/c46"]; ~6 min. Results in $OUT/suite.txt.
set -u
s=docs/bench/pending-change45/suite.sh
bash $s .carry/c46 c46
bash $s .carry/c46 c46 \
  'GpuFullRing.TensorCoreEveryRouteSameBits:GpuSlotWalk.SwizzledTilesGiveThePaddedBits:GpuFused.ArrivalOrderNeverChangesBits:GpuFused.StoreFusedReducerWaitsForItsProducers'
LADDER_GPU_TILES=swizzled bash $s .carry/c46 c46 'GpuFullRing.TensorCoreEveryRouteSameBits:GpuSlotWalk.SlotsPerCtaNeverChangeBits'
