set -u
mkdir -p /tmp/b /tmp/p
xz -dc .carry/c36/ladder_b.xz >/tmp/b/ladder; xz -dc .carry/c36/gpu_tests_b.xz >/tmp/b/ladder_gpu_tests; xz -dc .carry/c37/ladder_p.xz >/tmp/p/probe_none
chmod +x /tmp/b/* /tmp/p/*; cp /tmp/b/ladder /tmp/p/main
for m in empty stats loads skip; do printf '#!/bin/sh\nLADDER_PROBE_REDUCER=%s exec /tmp/p/probe_none "$@"\n' $m >/tmp/p/$m; done
for m in 1 grid; do printf '#!/bin/sh\nLADDER_GPU_FUSED=%s exec /tmp/b/ladder "$@"\n' $m >/tmp/p/fused_$m; done
chmod +x /tmp/p/*
OUT=$OUT/v scripts/bench_variants.sh 2 /tmp/p/main /tmp/p/probe_none /tmp/p/empty /tmp/p/stats /tmp/p/loads /tmp/p/skip /tmp/p/fused_1 /tmp/p/fused_grid -- --depths 2048,8192,32768 --routes splitk/ring,vec/growing --step-depths 2048 --batch 1 --no-engine --no-fallback-step 2>&1 | tail -3
LADDER_BIN_DIR=/tmp/b LADDER_STEPS=tests,cli OUT=$OUT/run timeout 200 scripts/device_run.sh >/dev/null 2>&1; cat $OUT/run/progress.txt
