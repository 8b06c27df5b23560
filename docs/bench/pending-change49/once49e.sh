# Change 49e in one device call (a machine start saved where starts are scarce), carry
# [".carry/c49e"]: the GPU suite of 49e's build, main against 49e under the narrow depth list
# (three interleaved rounds), the fresh-process test and a walk test under the sanitizers, then
# the wide list (two rounds: its device code is 49d's, measured there in three); most needed
# first, so that a call cut short by the budget still answers them (~440 s in all at most).
#   bash docs/bench/pending-change49/once49e.sh
set -u
carry=.carry/c49e
SUITE_LIMIT=200 bash docs/bench/pending-change45/suite.sh "$carry" c49e
STEPS=bench CARRY=$carry VARIANTS="main 49e" NAME=e-narrow DEPTHS=8192,32768 BENCH_LIMIT=60 \
  bash docs/bench/pending-change49/call.sh
SAN_LIMIT=60 bash docs/bench/pending-change45/suite.sh "$carry" c49e \
  'GpuSlotWalk.FirstBatchedLaunchWalksInAFreshProcess:GpuSlotWalk.FoldedWorkgroupsGiveTheReducerBits'
STEPS=bench CARRY=$carry VARIANTS="main 49e" NAME=e-wide DEPTHS=2048,8192,32768,131072 ROUNDS=2 BENCH_LIMIT=120 \
  bash docs/bench/pending-change49/call.sh
