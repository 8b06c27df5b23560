set -u
mkdir -p /tmp/b5; for n in ladder gpu_tests; do xz -dc .carry/c42/$n.xz >/tmp/b5/$n; done; mv /tmp/b5/gpu_tests /tmp/b5/ladder_gpu_tests; chmod +x /tmp/b5/*
LADDER_SAN_FILTER='Cases/GpuDeviceIo.DeviceMemoryGivesTheHostMemoryBits/default_store_fused:GpuSlotWalk.ReduceFormsGiveTheSameBits' LADDER_BIN_DIR=/tmp/b5 LADDER_STEPS=tests,san,cli OUT=/tmp/run5 timeout 250 scripts/device_run.sh >/dev/null 2>&1
{ cat /tmp/run5/progress.txt; grep -E "PASSED|FAILED|SKIPPED" /tmp/run5/gpu_tests.log | tail -8; } >$OUT/suite.txt
LADDER_BENCH_ARGS="--batch 1,16 --batch-max-depth 0 --no-fallback-step" OUT=$OUT timeout 320 scripts/bench_device.sh run >/dev/null 2>&1
echo "bench rc=$?" >>$OUT/suite.txt
