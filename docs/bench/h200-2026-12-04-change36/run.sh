set -u
mkdir -p /tmp/b /tmp/v
xz -dc .carry/c39/gpu_tests_36.xz >/tmp/b/ladder_gpu_tests; xz -dc .carry/c39/ladder_36.xz >/tmp/b/ladder
xz -dc .carry/c36/ladder_b.xz >/tmp/v/A_main; cp /tmp/b/ladder /tmp/v/B_change36
chmod +x /tmp/b/* /tmp/v/*
OUT=$OUT/v scripts/bench_variants.sh 3 /tmp/v/A_main /tmp/v/B_change36 -- --depths 2048,8192,32768,131072 --routes splitk/ring,vec/growing --step-depths 2048 --batch 16 --batch-max-depth 0 --no-engine --no-fallback-step 2>&1 | tail -3
LADDER_SAN_FILTER='GpuSlotWalk.ReduceFormsGiveTheSameBits:GpuRoutes.TensorCoreEveryRouteWithinReferenceAndRepeatable:GpuFused.OneKernelEqualsSeparateKernelsBitForBit:GpuSlotWalk.GridFormGivesTheTwoKernelBitsAtEveryWalk' LADDER_BIN_DIR=/tmp/b LADDER_STEPS=tests,san,cli OUT=$OUT/run timeout 330 scripts/device_run.sh >/dev/null 2>&1; cat $OUT/run/progress.txt; grep -E "PASSED|FAILED" $OUT/run/gpu_tests.log | tail -5
