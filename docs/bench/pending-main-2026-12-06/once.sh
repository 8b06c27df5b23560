# Main (the 49e build plus the producer's opt-in of each kernel once) in one device call, carry
# [".carry/main", ".carry/bench"], most needed first: the GPU suite, the ladder-vs-cuDNN table
# (scripts/bench_device.sh run: ladder bench, the Python module's suite, bench/peers.py), then
# the walk tests under the four compute-sanitizer tools (~520 s in all at most).
#   scripts/pack_carry.sh build-cuda .carry/main ladder=ladder ladder_gpu_tests=gpu_tests
#   LADDER_CLI=build-cuda/ladder scripts/bench_device.sh prepare
#   bash docs/bench/pending-main-2026-12-06/once.sh
set -u
SUITE_LIMIT=180 bash docs/bench/pending-change45/suite.sh .carry/main main
timeout 200 scripts/bench_device.sh run >/dev/null 2>&1
echo "bench rc=$?" >>$OUT/suite.txt
SAN_LIMIT=${SAN_LIMIT:-200} bash docs/bench/pending-change45/suite.sh .carry/main main \
  'GpuSlotWalk.FirstBatchedLaunchWalksInAFreshProcess:GpuSlotWalk.FoldedWorkgroupsGiveTheReducerBits:GpuSlotWalk.ReduceFormsGiveTheSameBits:GpuSlotWalk.SlotsPerCtaNeverChangeBits'
