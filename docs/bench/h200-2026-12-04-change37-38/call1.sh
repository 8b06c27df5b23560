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
# 1. The test must fail on kernels that read their entry before the wait.
timeout 120 /tmp/nw/ladder_gpu_tests --gtest_filter='Cases/GpuDeviceIo.*' >$OUT/nowait.log 2>&1; echo "nowait rc=$?" >>$OUT/progress.txt
grep -E "^\[  (FAILED|  OK|PASSED) |FAILED  \]" $OUT/nowait.log | head -20 >>$OUT/progress.txt
# 2. The suite on D, sanitizers on the new tests.
LADDER_SAN_FILTER='Cases/GpuDeviceIo.DeviceMemoryGivesTheHostMemoryBits/default_store_fused:Cases/GpuDeviceIo.DeviceMemoryGivesTheHostMemoryBits/default_grid_pdl:Cases/GpuBatchInvariance.TargetBitsDoNotDependOnTheBatch/default_fused_pdl:GpuSlotWalk.GridFormGivesTheTwoKernelBitsAtEveryWalk' LADDER_BIN_DIR=/tmp/b LADDER_STEPS=tests,san,cli OUT=$OUT/run timeout 330 scripts/device_run.sh >/dev/null 2>&1
cat $OUT/run/progress.txt >>$OUT/progress.txt; grep -E "PASSED|FAILED" $OUT/run/gpu_tests.log | tail -8 >>$OUT/progress.txt
