set -u
mkdir -p /tmp/b5; xz -dc .carry/c48/gpu_tests.xz >/tmp/b5/ladder_gpu_tests; chmod +x /tmp/b5/*
timeout 100 /tmp/b5/ladder_gpu_tests --gtest_filter='GpuBatch*:Cases/GpuBatchInvariance*:Cases/GpuDeviceIo*:GpuFused.BatchOneEngine*:GpuFused.StoreFused*' >/tmp/gpu_subset.txt 2>&1; echo "gpu subset rc=$?" >$OUT/gpu_subset.txt
grep -E "^\[  (PASSED|FAILED)|^\[       OK|FAILED  \]" /tmp/gpu_subset.txt | tail -40 >>$OUT/gpu_subset.txt
mkdir -p $OUT/cpu
LADDER_AB_DEVICE=cpu OUT=$OUT/cpu timeout 190 scripts/bench_ab.sh .carry/cpu/A.xz .carry/cpu/B.xz 4 --threads 16 --depths 8192,32768,131072 --step-depths 8192,32768 --routes vec/growing,splitk/ring >/dev/null 2>&1
echo "cpu ab rc=$?" >>$OUT/gpu_subset.txt
printf '#!/bin/sh\nLADDER_CPU_PREFETCH=l1 exec /tmp/B "$@"\n' >/tmp/B_l1; chmod +x /tmp/B_l1
mkdir -p $OUT/cpu_l1
LADDER_AB_DEVICE=cpu OUT=$OUT/cpu_l1 timeout 60 scripts/bench_ab.sh /tmp/B /tmp/B_l1 2 --threads 16 --depths 8192,32768 --step-depths 8192 --routes vec/growing,splitk/ring >/dev/null 2>&1
echo "cpu l1 rc=$?" >>$OUT/gpu_subset.txt
