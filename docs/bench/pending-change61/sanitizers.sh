# Change 61's fused form and change 54d's walk under the four compute-sanitizer tools (the
# reduced sweeps), carry [".carry/c61"]; results appended to $OUT/suite.txt.
set -u
SAN_LIMIT=${SAN_LIMIT:-280} bash docs/bench/pending-change45/suite.sh .carry/c61 c61 \
  'GpuSlotWalk.FusedFormGivesTheTwoKernelBitsAtEveryWalkAndArrivalOrder:GpuFused.ArrivalOrderNeverChangesBits:GpuFused.ArrivalCountersResetThemselves:GpuSlotWalk.FoldedGroupsGiveTheReducerBits'
