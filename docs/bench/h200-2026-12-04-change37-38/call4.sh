set -u
mkdir -p /tmp/b4 /tmp/v4
C=.carry/c41
xz -dc $C/gpu_tests_f.xz >/tmp/b4/ladder_gpu_tests; xz -dc $C/ladder_f_late.xz >/tmp/b4/ladder
xz -dc $C/ladder_d.xz >/tmp/v4/d; cp /tmp/b4/ladder /tmp/v4/f_late; xz -dc $C/ladder_f_first.xz >/tmp/v4/f_first
printf '#!/bin/sh\nLADDER_GPU_PDL=1 exec /tmp/v4/d "$@"\n' >/tmp/v4/e_pdl
chmod +x /tmp/b4/* /tmp/v4/*
LADDER_SAN_FILTER='Cases/GpuDeviceIo.DeviceMemoryGivesTheHostMemoryBits/default_store_fused:Cases/GpuDeviceIo.DeviceMemoryGivesTheHostMemoryBits/default_grid:GpuDeviceIoCheck.*' LADDER_BIN_DIR=/tmp/b4 LADDER_STEPS=tests,san,cli OUT=$OUT/run timeout 260 scripts/device_run.sh >/dev/null 2>&1
cat $OUT/run/progress.txt >>$OUT/progress.txt; grep -E "PASSED|FAILED" $OUT/run/gpu_tests.log | tail -8 >>$OUT/progress.txt
OUT=$OUT/v4 timeout 320 scripts/bench_variants.sh 3 /tmp/v4/d /tmp/v4/e_pdl /tmp/v4/f_late /tmp/v4/f_first -- --depths 2048,8192,32768,131072 --routes splitk/ring --step-depths 2048 --batch 16 --batch-max-depth 2048 --engine-max-depth 2048 --no-fallback-step >/dev/null 2>&1
echo "v4 done $(date -u +%H:%M:%SZ)" >>$OUT/progress.txt
