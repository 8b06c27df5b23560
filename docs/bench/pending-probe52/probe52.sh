# Probe 52 (docs/perf.md): every batched reducer behind PDL (kBatchedReducerPdlUpToBatch = 64,
# probe52.patch on main), timing only, three interleaved rounds against main: carry
# [".carry/c52m", ".carry/p52"].
#   .carry/c52m: main's build-cuda/ladder (e55326d's: .carry/c50d/ladder.xz)
#   .carry/p52:  git apply docs/bench/pending-probe52/probe52.patch; ninja -C build-cuda ladder;
#                scripts/pack_carry.sh build-cuda .carry/p52 ladder=ladder
set -u
bash docs/bench/pending-change50/variants.sh c52m p52
