# Change 61c (docs/perf.md: the one-kernel form's batched merge by a thread-block cluster),
# carry [".carry/c54d", ".carry/c61c"]: three interleaved rounds of change 54d (store-fused
# default) against c61c under LADDER_GPU_FUSED=1, then c61c's fused tests, then the fused-form
# walk test under the four sanitizers.
set -u
mkdir -p $OUT/variants
xz -dc .carry/c54d/ladder.xz >/tmp/ladder_c54d && chmod +x /tmp/ladder_c54d
xz -dc .carry/c61c/ladder.xz >/tmp/bin_c61c && chmod +x /tmp/bin_c61c
printf '#!/bin/sh\nLADDER_GPU_FUSED=1 exec /tmp/bin_c61c "$@"\n' >/tmp/ladder_c61cf && chmod +x /tmp/ladder_c61cf
OUT=$OUT/variants timeout "${BENCH_LIMIT:-200}" scripts/bench_variants.sh "${ROUNDS:-3}" /tmp/ladder_c54d /tmp/ladder_c61cf -- \
  --depths 2048,8192,32768 --routes splitk/ring --batch 16 --batch-max-depth 0 --step-depths none \
  --no-fallback-step >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/variants/rc.txt
mkdir -p /tmp/c61c && xz -dc .carry/c61c/gpu_tests.xz >/tmp/c61c/ladder_gpu_tests && chmod +x /tmp/c61c/ladder_gpu_tests
xz -dc .carry/c61c/ladder.xz >/tmp/c61c/ladder && chmod +x /tmp/c61c/ladder
timeout 120 /tmp/c61c/ladder_gpu_tests --gtest_filter='GpuSlotWalk.FusedForm*:GpuFused.*:*default_fused*' >$OUT/c61c-fused-tests.txt 2>&1
echo "c61c fused tests rc=$?" >>$OUT/suite.txt
grep -E "OK \]|FAILED|PASSED|Failure" $OUT/c61c-fused-tests.txt | head -40 >>$OUT/suite.txt
SAN_LIMIT=${SAN_LIMIT:-200} bash docs/bench/pending-change45/suite.sh .carry/c61c c61c \
  'GpuSlotWalk.FusedFormGivesTheTwoKernelBitsAtEveryWalkAndArrivalOrder'
