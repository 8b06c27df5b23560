set -u
ls /tmp/v >/dev/null 2>&1 || { echo "no /tmp/v: fresh machine"; mkdir -p /tmp/v; C=.carry/c41; for n in a b c d; do xz -dc $C/ladder_$n.xz >/tmp/v/$n; done
printf '#!/bin/sh\nLADDER_GPU_FUSED=grid exec /tmp/v/b "$@"\n' >/tmp/v/b_grid
printf '#!/bin/sh\nLADDER_GPU_PDL=1 exec /tmp/v/d "$@"\n' >/tmp/v/e_pdl; chmod +x /tmp/v/*; }
OUT=$OUT/v2 timeout 400 scripts/bench_variants.sh 3 /tmp/v/b /tmp/v/c /tmp/v/d /tmp/v/e_pdl -- --depths 2048,8192,32768,131072 --routes splitk/ring --step-depths 2048 --batch 1,16 --batch-max-depth 2048 --no-engine --no-fallback-step >/dev/null 2>&1
echo "v2 done $(date -u +%H:%M:%SZ)" >>$OUT/progress.txt
OUT=$OUT/v1 timeout 150 scripts/bench_variants.sh 6 /tmp/v/a /tmp/v/b -- --depths 2048,8192,32768,131072 --routes splitk/ring,vec/growing --step-depths 2048 --no-engine --no-fallback-step >/dev/null 2>&1
echo "v1 done $(date -u +%H:%M:%SZ)" >>$OUT/progress.txt
