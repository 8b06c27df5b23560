# Changes 50c and 50d (docs/perf.md: the direct reducer's group bounds 8/16/32; softmax_exp
# without early returns) in one device call, carry [".carry/c51", ".carry/c50b", ".carry/c50c",
# ".carry/c50d", ".carry/bench"], most needed first: three interleaved rounds of main (c51) and
# the three builds, then 50d's GPU suite, its fold, reduce-form and arrival tests under the four
# compute-sanitizer tools, and the bench with the peers on 50d's CLI (~500 s at most).
#   .carry/c50b: change50.patch as committed before 50c; .carry/c50c: + the group bounds;
#   .carry/c50d: + softmax_exp (scripts/pack_carry.sh build-cuda .carry/NAME ladder=ladder
#   ladder_gpu_tests=gpu_tests after each build); .carry/bench: LADDER_CLI=build-cuda/ladder
#   scripts/bench_device.sh prepare on 50d's build, then rm .carry/bench/bin/ladder.
set -u
bash docs/bench/pending-change50/variants.sh c51 c50b c50c c50d
SUITE_LIMIT=${SUITE_LIMIT:-240} bash docs/bench/pending-change45/suite.sh .carry/c50d c50d
SAN_LIMIT=${SAN_LIMIT:-150} bash docs/bench/pending-change45/suite.sh .carry/c50d c50d \
  'GpuSlotWalk.FoldedGroupsGiveTheReducerBits:GpuSlotWalk.ReduceFormsGiveTheSameBits:GpuFused.ArrivalOrderNeverChangesBits'
# The device returns 8 files at most: the bench's text tables and log only. The bench's CLI is
# 50d's (carried compressed in .carry/c50d: the working tree travels 64 MiB at most).
mkdir -p .carry/bench/bin && xz -dc .carry/c50d/ladder.xz >.carry/bench/bin/ladder && chmod +x .carry/bench/bin/ladder
OUT=$OUT/bench PEERS=${PEERS:-cudnn,flash} timeout ${BENCH_RUN_LIMIT:-170} scripts/bench_device.sh run >/dev/null 2>&1
echo "bench rc=$?" >>$OUT/suite.txt
rm -f $OUT/bench/*.json $OUT/bench/*.png
