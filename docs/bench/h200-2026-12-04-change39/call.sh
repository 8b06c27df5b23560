set -u
mkdir -p /tmp/b2; xz -dc .carry/c45/gpu_tests_B.xz >/tmp/b2/ladder_gpu_tests; xz -dc .carry/c45/ladder_B_unstripped.xz >/tmp/b2/ladder; chmod +x /tmp/b2/*
LADDER_SAN_FILTER='GpuSlotWalk.WorkgroupsPerCtaNeverChangeBits:GpuFullRing.TensorCoreEveryRouteSameBits:Cases/GpuBatchInvariance.TargetBitsDoNotDependOnTheBatch/default_store_fused' LADDER_BIN_DIR=/tmp/b2 LADDER_STEPS=tests,san,cli OUT=/tmp/run2 timeout 280 scripts/device_run.sh >/dev/null 2>&1
{ cat /tmp/run2/progress.txt; find /tmp/run2 -name 'gpu_tests*.log' | head -1 | xargs grep -E "PASSED|FAILED" | tail -4; } >$OUT/suite.txt 2>&1
mkdir -p $OUT/ab
OUT=$OUT/ab timeout 290 scripts/bench_ab.sh .carry/c45/ladder_A.xz /tmp/b2/ladder 3 --depths 2048,8192,32768,131072 --routes splitk/ring,vec/growing --batch 16 --step-depths 2048,32768 --batch-max-depth 0 --no-fallback-step --engine-max-depth 32768 >/dev/null 2>&1
echo "ab rc=$?" >>$OUT/suite.txt
