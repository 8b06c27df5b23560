# Change 54b (docs/perf.md: "Review mends, and change 54b") in one device call, carry
# [".carry/c50d", ".carry/c55m", ".carry/c54b"]: three interleaved rounds of main (e55326d's
# code), the review mends alone and the mends with change 54b, then the GPU suite of both builds
# (~450 s at most).
#   c55m: the mends (main after them); c54b: main + change54b.patch (the look-ahead, not landed):
#   git apply docs/bench/pending-change54b/change54b.patch && ninja -C build-cuda ladder ladder_gpu_tests
#   scripts/pack_carry.sh build-cuda .carry/NAME ladder=ladder ladder_gpu_tests=gpu_tests
set -u
bash docs/bench/pending-change50/variants.sh c50d c55m c54b
SUITE_LIMIT=${SUITE_LIMIT:-170} bash docs/bench/pending-change45/suite.sh .carry/c54b c54b
SUITE_LIMIT=${SUITE_LIMIT:-170} bash docs/bench/pending-change45/suite.sh .carry/c55m c55m
