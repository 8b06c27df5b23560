# Landed in 525185e (docs/perf.md, "Change 54d on the device"); kept as the record of the call.
# Change 54d (docs/perf.md: "Change 54d: the walking kernels' second prologue stage after q's
# loads, and a walk that does not divide") in one device call, carry [".carry/c55m", ".carry/c54d"]:
# three interleaved rounds against main (c55m: the mends), then the GPU suite of c54d (~200 s).
#   git apply docs/bench/pending-change54d/change54d.patch && ninja -C build-cuda ladder ladder_gpu_tests
#   scripts/pack_carry.sh build-cuda .carry/c54d ladder=ladder ladder_gpu_tests=gpu_tests
# Still to run before it lands: the walk, fold, reduce-form and arrival tests under the four
# sanitizers, `bash docs/bench/pending-change54c/suite.sh c54d` (its second half).
set -u
bash docs/bench/pending-change50/variants.sh c55m c54d
SUITE_LIMIT=${SUITE_LIMIT:-150} bash docs/bench/pending-change45/suite.sh .carry/c54d c54d
