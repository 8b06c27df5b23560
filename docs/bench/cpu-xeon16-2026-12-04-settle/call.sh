set -u
mkdir -p $OUT/cpu
LADDER_AB_DEVICE=cpu OUT=$OUT/cpu timeout 340 scripts/bench_ab.sh .carry/cpu/A.xz .carry/cpu/B2.xz 8 --threads 16 --reps 30 --depths 8192,32768 --step-depths 8192,32768 --routes vec/growing,splitk/ring --no-fallback-step >/dev/null 2>&1
echo "cpu ab rc=$?" >$OUT/rc.txt
[ -s $OUT/cpu/ab_summary.txt ] || scripts/bench_ab.sh --summary $OUT/cpu/ab.txt >$OUT/cpu/ab_summary.txt 2>&1
lscpu | grep -E "Model name|^CPU\(s\)" >>$OUT/rc.txt
mkdir -p /tmp/b; xz -dc .carry/c49/ladder.xz >/tmp/b/ladder; xz -dc .carry/c49/gpu_tests.xz >/tmp/b/ladder_gpu_tests; chmod +x /tmp/b/*
LADDER_SAN_FILTER='GpuFused.BatchOneEngine*:GpuFused.StoreFused*:Cases/GpuBatchInvariance.TargetBitsDoNotDependOnTheBatch/default_store_fused' LADDER_BIN_DIR=/tmp/b LADDER_STEPS=tests,san,cli OUT=/tmp/run timeout 230 scripts/device_run.sh >/dev/null 2>&1
echo "suite rc=$?" >>$OUT/rc.txt
cp /tmp/run/progress.txt $OUT/suite_progress.txt
f=$(find /tmp/run -name 'gpu_tests*.log' | head -1); grep -E "^\[  PASSED|^\[  FAILED|FAILED  \]|tests ran" $f | tail -8 >$OUT/suite.txt 2>&1
