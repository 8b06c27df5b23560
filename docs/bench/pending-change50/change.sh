# Change 50 (docs/perf.md: the tensor-core path folds runs of 4 warp slots) in one device call,
# carry [".carry/main", ".carry/c50"], most needed first: three interleaved rounds of main against
# the change (batch-16 layers at 2,048 / 8,192 / 32,768, the batch-1 splitk/ring layer), the
# change's GPU suite, then the fold tests under the four compute-sanitizer tools (~480 s at most).
#   scripts/pack_carry.sh build-cuda .carry/c50 ladder=ladder ladder_gpu_tests=gpu_tests
#   bash docs/bench/pending-change50/change.sh          # through the device tool
set -u
bash docs/bench/pending-change50/variants.sh main c50
SUITE_LIMIT=${SUITE_LIMIT:-240} bash docs/bench/pending-change45/suite.sh .carry/c50 c50
SAN_LIMIT=${SAN_LIMIT:-180} bash docs/bench/pending-change45/suite.sh .carry/c50 c50 \
  'GpuSlotWalk.FoldedGroupsGiveTheReducerBits:GpuSlotWalk.ReduceFormsGiveTheSameBits:GpuFused.ArrivalOrderNeverChangesBits'
