# Changes 50 + 51 + 50b (docs/perf.md: fold groups of 4 warp slots, the direct reducer bounded by
# its groups) in one device call, carry [".carry/main", ".carry/c50b"], most needed first: three
# interleaved rounds against main (batch-16 layers at 2,048 / 8,192 / 32,768, the batch-1
# splitk/ring layer), then the GPU suite and the fold and arrival tests under the four
# compute-sanitizer tools (~480 s at most).
#   git apply docs/bench/pending-change50/change50.patch
#   ninja -C build-cuda ladder ladder_gpu_tests
#   scripts/pack_carry.sh build-cuda .carry/c50b ladder=ladder ladder_gpu_tests=gpu_tests
#   git checkout include src tests docs/gpu.md      (main's carry: .carry/main from main's build)
set -u
bash docs/bench/pending-change50/variants.sh main c50b
SUITE_LIMIT=${SUITE_LIMIT:-240} bash docs/bench/pending-change45/suite.sh .carry/c50b c50b
SAN_LIMIT=${SAN_LIMIT:-180} bash docs/bench/pending-change45/suite.sh .carry/c50b c50b \
  'GpuSlotWalk.FoldedGroupsGiveTheReducerBits:GpuSlotWalk.ReduceFormsGiveTheSameBits:GpuFused.ArrivalOrderNeverChangesBits'
