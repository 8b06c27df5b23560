set -u
mkdir -p /tmp/v6; xz -dc .carry/c43/ladder.xz >/tmp/v6/pdl_on
printf '#!/bin/sh\nLADDER_GPU_PDL=0 exec /tmp/v6/pdl_on "$@"\n' >/tmp/v6/pdl_off
chmod +x /tmp/v6/*
OUT=$OUT timeout 150 scripts/bench_variants.sh 4 /tmp/v6/pdl_off /tmp/v6/pdl_on -- --depths none --step-depths 2048,32768 --engine-max-depth 32768 --no-fallback-step >/dev/null 2>&1
scripts/bench_variants.sh --summary $OUT/variants.txt
