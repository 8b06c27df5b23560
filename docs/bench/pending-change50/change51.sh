# Change 51 (docs/perf.md: the fold's factors once per slot) in one device call, carry
# [".carry/main", ".carry/c51", ".carry/c5051"], most needed first: three interleaved rounds of
# main, 51 and change 50 with 51 (batch-16 layers at 2,048 / 8,192 / 32,768, the batch-1
# splitk/ring layer), then 51's GPU suite and its fold test under the four sanitizers (~330 s).
#   scripts/pack_carry.sh build-cuda .carry/c51 ladder=ladder ladder_gpu_tests=gpu_tests   (main + 51)
#   change50.patch + 51 built as ladder only: .carry/c5051
set -u
bash docs/bench/pending-change50/variants.sh main c51 c5051
SUITE_LIMIT=${SUITE_LIMIT:-240} bash docs/bench/pending-change45/suite.sh .carry/c51 c51
SAN_LIMIT=${SAN_LIMIT:-150} bash docs/bench/pending-change45/suite.sh .carry/c51 c51 \
  'GpuSlotWalk.FoldedWorkgroupsGiveTheReducerBits'
