set -u
mkdir -p /tmp/b2; xz -dc .carry/c51/gpu_tests_b.xz >/tmp/b2/ladder_gpu_tests; xz -dc .carry/c51/ladder_b.xz >/tmp/b2/ladder; chmod +x /tmp/b2/*
LADDER_SAN_FILTER='GpuSlotWalk.SlotsPerCtaNeverChangeBits:GpuSlotWalk.SlotsPerCtaNeverChangeBitsWithoutVec:GpuSlotWalk.GridFormGivesTheTwoKernelBitsAtEveryWalk:GpuFused.OneKernelEqualsSeparateKernelsBitForBit' LADDER_BIN_DIR=/tmp/b2 LADDER_STEPS=tests,san,cli OUT=/tmp/run2 timeout 260 scripts/device_run.sh >/dev/null 2>&1
echo "suite rc=$?" >$OUT/suite.txt
{ cat /tmp/run2/progress.txt; find /tmp/run2 -name 'gpu_tests*.log' | head -1 | xargs grep -E "PASSED|FAILED" | tail -6; } >>$OUT/suite.txt 2>&1
if grep -q "gpu_tests .*rc=0" /tmp/run2/progress.txt; then
  mkdir -p $OUT/ab
  OUT=$OUT/ab timeout 250 scripts/bench_ab.sh .carry/c49/ladder.xz /tmp/b2/ladder 3 --depths 2048,8192,32768,131072 --routes splitk/ring --batch 16 --step-depths 2048 --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
  echo "ab rc=$?" >>$OUT/suite.txt
fi
