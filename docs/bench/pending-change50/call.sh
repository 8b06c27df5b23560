# Probe 50 (docs/perf.md, "a plan for its partials"): what batch-16 layers would save if a
# walking CTA wrote one partial per group of 4 workgroups. Timing only, wrong values: each
# group's first workgroup writes its partial (compacted), the others write nothing, the reducer
# reads nwg / 4 workgroups per head (probe50.patch). Against main, three interleaved rounds:
# batch-16 layers at 2,048 / 8,192 / 32,768 and the batch-1 layer (splitk/ring) for reference.
# Carry [".carry/main", ".carry/p50"]; ~3 min on an H100. Results in $OUT/variants.
#
# Building the carries from a checkout of main (the CUDA build takes ~5 min on 2 cores each):
#   cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DLADDER_CUDA=ON
#   ninja -C build-cuda ladder ladder_gpu_tests
#   scripts/pack_carry.sh build-cuda .carry/main ladder=ladder ladder_gpu_tests=gpu_tests
#   git apply docs/bench/pending-change50/probe50.patch && ninja -C build-cuda ladder
#   scripts/pack_carry.sh build-cuda .carry/p50 ladder=ladder && git checkout include src
#   bash docs/bench/pending-change50/call.sh          # through the device tool
set -u
bash docs/bench/pending-change50/variants.sh main p50
