set -u
mkdir -p /tmp/b /tmp/v
xz -dc .carry/c38/gpu_tests_4.xz >/tmp/b/ladder_gpu_tests; xz -dc .carry/c38/ladder_4.xz >/tmp/b/ladder
for n in 1 2 4; do xz -dc .carry/c38/ladder_$n.xz >/tmp/v/ctas_$n; done
chmod +x /tmp/b/* /tmp/v/*
OUT=$OUT/v scripts/bench_variants.sh 3 /tmp/v/ctas_1 /tmp/v/ctas_2 /tmp/v/ctas_4 -- --depths 2048,8192,32768,131072 --routes splitk/ring,vec/growing --step-depths 2048 --batch 1 --no-engine --no-fallback-step 2>&1 | tail -3
LADDER_SAN_FILTER='GpuSlotWalk.ReduceFormsGiveTheSameBits:GpuRoutes.ExactDagEveryRouteMatchesCpuTwinAndReference:GpuFused.StoreFusedReducerWaitsForItsProducers:GpuSlotWalk.GridFormGivesTheTwoKernelBitsAtEveryWalk' LADDER_BIN_DIR=/tmp/b LADDER_STEPS=tests,san,cli OUT=$OUT/run timeout 330 scripts/device_run.sh >/dev/null 2>&1; cat $OUT/run/progress.txt; grep -E "PASSED|FAILED" $OUT/run/gpu_tests.log | tail -3
