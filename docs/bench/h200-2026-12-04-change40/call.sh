set -u
mkdir -p /tmp/b3; xz -dc .carry/c46/gpu_tests_B.xz >/tmp/b3/ladder_gpu_tests; xz -dc .carry/c46/ladder_B.xz >/tmp/b3/ladder; xz -dc .carry/c46/gpu_tests_mutant.xz >/tmp/gpu_tests_mutant; chmod +x /tmp/b3/* /tmp/gpu_tests_mutant
timeout 120 /tmp/gpu_tests_mutant --gtest_filter='GpuFused.BatchOneEngineReducerWaitsForItsProducers' >$OUT/mutant.txt 2>&1; echo "mutant rc=$?" >>$OUT/mutant.txt
LADDER_SAN_FILTER='GpuSlotWalk.ReduceFormsGiveTheSameBits:Cases/GpuBatchInvariance.TargetBitsDoNotDependOnTheBatch/default_store_fused' LADDER_BIN_DIR=/tmp/b3 LADDER_STEPS=tests,san,cli OUT=/tmp/run3 timeout 300 scripts/device_run.sh >/dev/null 2>&1
{ cat /tmp/run3/progress.txt; find /tmp/run3 -name 'gpu_tests*.log' | head -1 | xargs grep -E "PASSED|FAILED|BatchOneEngine" | tail -6; } >$OUT/suite.txt 2>&1
mkdir -p $OUT/ab
OUT=$OUT/ab timeout 260 scripts/bench_ab.sh .carry/c45/ladder_A.xz /tmp/b3/ladder 3 --depths 2048,32768 --routes splitk/ring --batch 16 --step-depths 2048,32768 --batch-max-depth 0 --no-fallback-step --engine-max-depth 32768 >/dev/null 2>&1
echo "ab rc=$?" >>$OUT/suite.txt
