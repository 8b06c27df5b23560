# Change 54 (docs/perf.md: the look-ahead walk) in one device call, carry [".carry/c52m",
# ".carry/c54"]: three interleaved rounds against main, then the GPU suite of the change and the
# walk, fold and arrival tests under the four compute-sanitizer tools (~400 s at most).
#   git apply docs/bench/pending-change54/change54.patch && ninja -C build-cuda ladder ladder_gpu_tests
#   scripts/pack_carry.sh build-cuda .carry/c54 ladder=ladder ladder_gpu_tests=gpu_tests
#   .carry/c52m: main's ladder (e55326d's code: .carry/c50d/ladder.xz)
set -u
bash docs/bench/pending-change50/variants.sh c52m c54
SUITE_LIMIT=${SUITE_LIMIT:-240} bash docs/bench/pending-change45/suite.sh .carry/c54 c54
SAN_LIMIT=${SAN_LIMIT:-150} bash docs/bench/pending-change45/suite.sh .carry/c54 c54 \
  'GpuSlotWalk.FoldedGroupsGiveTheReducerBits:GpuSlotWalk.ReduceFormsGiveTheSameBits:GpuFused.ArrivalOrderNeverChangesBits'
