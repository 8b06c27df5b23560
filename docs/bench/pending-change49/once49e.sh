# Change 49e in one device call (a machine start saved where starts are scarce), carry
# [".carry/c49e"]: the GPU suite of 49e's build, main against 49e under the narrow and the wide
# depth list (three interleaved rounds each), then the walk tests and the fresh-process test under
# the four sanitizers with what time is left (~590 s in all at most).
#   bash docs/bench/pending-change49/once49e.sh
set -u
carry=.carry/c49e
SUITE_LIMIT=215 bash docs/bench/pending-change45/suite.sh "$carry" c49e
STEPS=bench CARRY=$carry VARIANTS="main 49e" NAME=e-narrow DEPTHS=8192,32768 BENCH_LIMIT=60 \
  bash docs/bench/pending-change49/call.sh
STEPS=bench CARRY=$carry VARIANTS="main 49e" NAME=e-wide DEPTHS=2048,8192,32768,131072 BENCH_LIMIT=210 \
  bash docs/bench/pending-change49/call.sh
SAN_LIMIT=95 bash docs/bench/pending-change45/suite.sh "$carry" c49e \
  'GpuSlotWalk.FirstBatchedLaunchWalksInAFreshProcess:GpuSlotWalk.FoldedWorkgroupsGiveTheReducerBits:GpuSlotWalk.ReduceFormsGiveTheSameBits'
