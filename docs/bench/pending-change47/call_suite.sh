# Change 47 (docs/perf.md), device call 1 of 2: its build's GPU suite, then the four sanitizers
# on the new walk test's reduced sweep and, with the stream forced across slots, on the two
# walk tests (each launch's walk given, 2, 3 or 7 slots: all cross). Carry [".carry/c47", ".carry/v2", ".carry/p49"]; ~5 min. $OUT/suite.txt.
set -u
bash docs/bench/pending-change47/unpack.sh
bash docs/bench/pending-change45/suite.sh .carry/c47 c47
bash docs/bench/pending-change45/suite.sh .carry/c47 c47 'GpuSlotWalk.StreamAcrossSlotsGivesTheSameBits'
LADDER_GPU_STREAM=walk bash docs/bench/pending-change45/suite.sh .carry/c47 c47 \
  'GpuSlotWalk.SlotsPerCtaNeverChangeBits:GpuSlotWalk.SlotsPerCtaNeverChangeBitsWithoutVec'
