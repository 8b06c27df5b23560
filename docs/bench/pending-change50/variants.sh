# Change 50's two layouts against main, timing only, three interleaved rounds, carry
# [".carry/main", ".carry/c50", ".carry/c50i"]: c50 = fold groups of consecutive slots (whole
# workgroups), c50i = interleaved groups (slots j, j + groups, ...; a folding CTA's concurrent
# reads stay next to its neighbours'), both with the reducer's early exit past the last group.
# Batch-16 layers at 2,048 / 8,192 / 32,768 and the batch-1 splitk/ring layer. ~1 min on an H100.
set -u
mkdir -p $OUT/variants
for v in main c50 c50i; do xz -dc .carry/$v/ladder.xz >/tmp/ladder_$v && chmod +x /tmp/ladder_$v; done
OUT=$OUT/variants timeout "${BENCH_LIMIT:-200}" scripts/bench_variants.sh "${ROUNDS:-3}" \
  /tmp/ladder_main /tmp/ladder_c50 /tmp/ladder_c50i -- --depths 2048,8192,32768 --routes splitk/ring \
  --batch 16 --batch-max-depth 0 --step-depths none --no-fallback-step >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/variants/rc.txt
