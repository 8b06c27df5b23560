set -u
mkdir -p /tmp/b1; for n in ladder gpu_tests; do xz -dc .carry/c44/$n.xz >/tmp/b1/$n; done; mv /tmp/b1/gpu_tests /tmp/b1/ladder_gpu_tests; chmod +x /tmp/b1/*
LADDER_SAN_FILTER='Cases/GpuDeviceIo.DeviceMemoryGivesTheHostMemoryBits/default_store_fused*:Cases/GpuBatchInvariance.TargetBitsDoNotDependOnTheBatch/default_store_fused*' LADDER_BIN_DIR=/tmp/b1 LADDER_STEPS=tests,san,cli OUT=/tmp/run1 timeout 300 scripts/device_run.sh >/dev/null 2>&1
{ cat /tmp/run1/progress.txt; grep -E "PASSED|FAILED|SKIPPED" /tmp/run1/gpu_tests.log | tail -8; } >$OUT/suite.txt
mkdir -p /tmp/v6; cp /tmp/b1/ladder /tmp/v6/pdl_on
printf '#!/bin/sh\nLADDER_GPU_PDL=0 exec /tmp/v6/pdl_on "$@"\n' >/tmp/v6/pdl_off
chmod +x /tmp/v6/*
mkdir -p $OUT/call6
OUT=$OUT/call6 timeout 200 scripts/bench_variants.sh 4 /tmp/v6/pdl_off /tmp/v6/pdl_on -- --depths none --step-depths 2048,32768 --engine-max-depth 32768 --no-fallback-step >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/suite.txt
scripts/bench_variants.sh --summary $OUT/call6/variants.txt > $OUT/call6/summary.txt 2>&1
