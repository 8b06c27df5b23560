# The GPU suite of one build of change 54c and its walk, fold, reduce-form and arrival tests under
# the four compute-sanitizer tools (~320 s at most), carry [".carry/NAME"]:
#   bash docs/bench/pending-change54c/suite.sh c54c
set -u
name=${1:?build name under .carry}
SUITE_LIMIT=${SUITE_LIMIT:-170} bash docs/bench/pending-change45/suite.sh .carry/$name $name
SAN_LIMIT=${SAN_LIMIT:-170} bash docs/bench/pending-change45/suite.sh .carry/$name $name \
  'GpuSlotWalk.FoldedGroupsGiveTheReducerBits:GpuSlotWalk.ReduceFormsGiveTheSameBits:GpuFused.ArrivalOrderNeverChangesBits'
