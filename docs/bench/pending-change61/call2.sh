# Change 61's second call (docs/perf.md), carry [".carry/c54d", ".carry/c61", ".carry/c61b",
# ".carry/c61z"]: three interleaved rounds of change 54d (the store-fused default) against the
# one-kernel form (LADDER_GPU_FUSED=1) staged by the CTA's own cp.async (c61), by one bulk copy
# (c61b) and with no merge at all (c61z: the arrival only, timing only); then c61b's fused tests;
# then change 54d's walk, fold, reduce-form and arrival tests under the four sanitizers.
set -u
mkdir -p $OUT/variants
bins=()
xz -dc .carry/c54d/ladder.xz >/tmp/ladder_c54d && chmod +x /tmp/ladder_c54d && bins+=(/tmp/ladder_c54d)
for v in c61 c61b c61z; do
  xz -dc .carry/$v/ladder.xz >/tmp/bin_$v && chmod +x /tmp/bin_$v
  printf '#!/bin/sh\nLADDER_GPU_FUSED=1 exec /tmp/bin_%s "$@"\n' $v >/tmp/ladder_${v}f
  chmod +x /tmp/ladder_${v}f && bins+=(/tmp/ladder_${v}f)
done
OUT=$OUT/variants timeout "${BENCH_LIMIT:-240}" scripts/bench_variants.sh "${ROUNDS:-3}" "${bins[@]}" -- \
  --depths 2048,8192,32768 --routes splitk/ring --batch 16 --batch-max-depth 0 --step-depths none \
  --no-fallback-step >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/variants/rc.txt
mkdir -p /tmp/c61b && xz -dc .carry/c61b/gpu_tests.xz >/tmp/c61b/gpu_tests && chmod +x /tmp/c61b/gpu_tests
timeout 120 /tmp/c61b/gpu_tests --gtest_filter='GpuSlotWalk.FusedForm*:GpuFused.*' >$OUT/c61b-fused-tests.txt 2>&1
echo "c61b fused tests rc=$?" >>$OUT/suite.txt
grep -E "OK|FAILED|PASSED" $OUT/c61b-fused-tests.txt >>$OUT/suite.txt
SAN_LIMIT=${SAN_LIMIT:-200} bash docs/bench/pending-change45/suite.sh .carry/c54d c54d \
  'GpuSlotWalk.FoldedGroupsGiveTheReducerBits:GpuSlotWalk.ReduceFormsGiveTheSameBits:GpuFused.ArrivalOrderNeverChangesBits'
