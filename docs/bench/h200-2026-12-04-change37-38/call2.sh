set -u
mkdir -p /tmp/b /tmp/v /tmp/nw
C=.carry/c41
xz -dc $C/gpu_tests_d.xz >/tmp/b/ladder_gpu_tests; xz -dc $C/ladder_d.xz >/tmp/b/ladder
xz -dc $C/gpu_tests_nowait.xz >/tmp/nw/ladder_gpu_tests
for n in a b c; do xz -dc $C/ladder_$n.xz >/tmp/v/$n; done
cp /tmp/b/ladder /tmp/v/d
printf '#!/bin/sh\nLADDER_GPU_FUSED=grid exec /tmp/v/b "$@"\n' >/tmp/v/b_grid
printf '#!/bin/sh\nLADDER_GPU_PDL=1 exec /tmp/v/d "$@"\n' >/tmp/v/e_pdl
chmod +x /tmp/b/* /tmp/v/* /tmp/nw/*
# 3. Batch-1 rows: A, B, B with the grid form.
OUT=$OUT/v1 timeout 250 scripts/bench_variants.sh 3 /tmp/v/a /tmp/v/b /tmp/v/b_grid -- --depths 2048,8192,32768,131072 --routes splitk/ring,vec/growing --step-depths 2048 --no-engine --no-fallback-step >/dev/null 2>&1
echo "v1 done $(date -u +%H:%M:%SZ)" >>$OUT/progress.txt
# 4. Engine rows: B, C, D, D with PDL in the engine's graphs.
OUT=$OUT/v2 timeout 330 scripts/bench_variants.sh 3 /tmp/v/b /tmp/v/c /tmp/v/d /tmp/v/e_pdl -- --depths 2048,8192,32768,131072 --routes none --step-depths 2048 --batch 1,16 --batch-max-depth 2048 --no-engine --no-fallback-step >/dev/null 2>&1
echo "v2 done $(date -u +%H:%M:%SZ)" >>$OUT/progress.txt
