# Change 49e in one device call (a machine start saved where starts are scarce), carry
# [".carry/c49e"]: the GPU suite of 49e's build, main against 49e under the narrow depth list
# (three interleaved rounds) and the wide one (two: its device code is 49d's, measured there in
# three), then the fresh-process test and a walk test under the sanitizers with what time is left
# (~440 s in all at most, so that it fits what a session has left after failed machine starts).
#   bash docs/bench/pending-change49/once49e.sh
set -u
carry=.carry/c49e
SUITE_LIMIT=200 bash docs/bench/pending-change45/suite.sh "$carry" c49e
STEPS=bench CARRY=$carry VARIANTS="main 49e" NAME=e-narrow DEPTHS=8192,32768 BENCH_LIMIT=60 \
  bash docs/bench/pending-change49/call.sh
STEPS=bench CARRY=$carry VARIANTS="main 49e" NAME=e-wide DEPTHS=2048,8192,32768,131072 ROUNDS=2 BENCH_LIMIT=120 \
  bash docs/bench/pending-change49/call.sh
SAN_LIMIT=60 bash docs/bench/pending-change45/suite.sh "$carry" c49e \
  'GpuSlotWalk.FirstBatchedLaunchWalksInAFreshProcess:GpuSlotWalk.FoldedWorkgroupsGiveTheReducerBits'
