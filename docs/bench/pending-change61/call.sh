# Changes 54d and 61 (docs/perf.md) in one device call, carry [".carry/c55m", ".carry/c54d",
# ".carry/c61"]: three interleaved rounds of main (c55m), change 54d (c54d) and change 61's
# one-kernel form (c61 under LADDER_GPU_FUSED=1; c61's default form is c54d's code), then the GPU
# suite of c61 (~200 s). The sanitizers ran in the next calls (call2.sh: change 54d; call3.sh: 61c).
#   git apply docs/bench/pending-change54d/change54d.patch   (change 61 is built on it)
#   scripts/pack_carry.sh build-cuda .carry/c61 ladder=ladder ladder_gpu_tests=gpu_tests
set -u
mkdir -p $OUT/variants
xz -dc .carry/c61/ladder.xz >/tmp/ladder_c61 && chmod +x /tmp/ladder_c61
printf '#!/bin/sh\nLADDER_GPU_FUSED=1 exec /tmp/ladder_c61 "$@"\n' >/tmp/ladder_c61f
chmod +x /tmp/ladder_c61f
bins=()
for v in c55m c54d; do
  xz -dc .carry/$v/ladder.xz >/tmp/ladder_$v && chmod +x /tmp/ladder_$v && bins+=(/tmp/ladder_$v)
done
OUT=$OUT/variants timeout "${BENCH_LIMIT:-240}" scripts/bench_variants.sh "${ROUNDS:-3}" "${bins[@]}" /tmp/ladder_c61f -- \
  --depths 2048,8192,32768 --routes splitk/ring --batch 16 --batch-max-depth 0 --step-depths none \
  --no-fallback-step >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/variants/rc.txt
SUITE_LIMIT=${SUITE_LIMIT:-240} bash docs/bench/pending-change45/suite.sh .carry/c61 c61
