# Change 54c (docs/perf.md: "Change 54c: the look-ahead walk with q ahead of the second slot's
# copies, and a walk that does not divide") timed in one device call, carry [".carry/c55m",
# ".carry/c54c", ".carry/c54n"]: three interleaved rounds of main (c55m: the mends), c54c and
# c54n (c54c with tc_look_ahead answering false: its prologue split and walk cursor alone).
#   git apply docs/bench/pending-change54c/change54c.patch && ninja -C build-cuda ladder ladder_gpu_tests
#   scripts/pack_carry.sh build-cuda .carry/c54c ladder=ladder ladder_gpu_tests=gpu_tests
set -u
bash docs/bench/pending-change50/variants.sh c55m c54c c54n
