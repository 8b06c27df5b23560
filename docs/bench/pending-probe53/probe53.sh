# Probe 53 (docs/perf.md): main's build under its two one-launch forms, timing only — the
# default (store-fused producer + reducer) against LADDER_GPU_FUSED=grid and =1 (fused), three
# interleaved rounds of the batch-1 splitk/ring layer and the batch-16 layers at 2,048 / 8,192 /
# 32,768; carry [".carry/c52m"] (main's ladder, e55326d's code).
set -u
mkdir -p $OUT/variants
xz -dc .carry/c52m/ladder.xz >/tmp/ladder_main && chmod +x /tmp/ladder_main
printf '#!/bin/sh\nLADDER_GPU_FUSED=grid exec /tmp/ladder_main "$@"\n' >/tmp/ladder_grid
printf '#!/bin/sh\nLADDER_GPU_FUSED=1 exec /tmp/ladder_main "$@"\n' >/tmp/ladder_fused
chmod +x /tmp/ladder_grid /tmp/ladder_fused
OUT=$OUT/variants timeout "${BENCH_LIMIT:-250}" scripts/bench_variants.sh "${ROUNDS:-3}" /tmp/ladder_main \
  /tmp/ladder_grid /tmp/ladder_fused -- --depths 2048,8192,32768 --routes splitk/ring --batch 16 \
  --batch-max-depth 0 --step-depths none --no-fallback-step >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/variants/rc.txt
