# The producer's opt-in asked in one place (tc_producer_opted_in / tc_grid_opted_in, the review
# item of stop 44), carry [".carry/c51"]: the GPU suite, then the walk tests whose first query
# reads the opted-in occupancy under the four compute-sanitizer tools.
#   scripts/pack_carry.sh build-cuda .carry/c51 ladder=ladder ladder_gpu_tests=gpu_tests
set -u
SUITE_LIMIT=${SUITE_LIMIT:-240} bash docs/bench/pending-change45/suite.sh .carry/c51 c51
SAN_LIMIT=${SAN_LIMIT:-150} bash docs/bench/pending-change45/suite.sh .carry/c51 c51 \
  'GpuSlotWalk.ReduceFormsGiveTheSameBits:GpuSlotWalk.FoldedWorkgroupsGiveTheReducerBits'
