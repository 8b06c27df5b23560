set -u
mkdir -p /tmp/b; xz -dc .carry/c51/gpu_tests_b.xz >/tmp/b/ladder_gpu_tests; xz -dc .carry/c51/ladder_b.xz >/tmp/b/ladder; chmod +x /tmp/b/*
LADDER_BIN_DIR=/tmp/b LADDER_STEPS=tests,cli OUT=/tmp/run timeout 230 scripts/device_run.sh >/dev/null 2>&1
echo "suite rc=$?" >$OUT/suite.txt
{ cat /tmp/run/progress.txt; find /tmp/run -name 'gpu_tests*.log' | head -1 | xargs grep -E "PASSED|FAILED|tensor maps|fused and store-fused" | tail -12; } >>$OUT/suite.txt 2>&1
if grep -q "gpu_tests .*rc=0" /tmp/run/progress.txt; then
  mkdir -p $OUT/ab
  OUT=$OUT/ab timeout 280 scripts/bench_ab.sh .carry/c51/ladder_a.xz /tmp/b/ladder 3 --depths 2048,8192,32768,131072 --routes splitk/ring,vec/growing --batch 16 --step-depths 2048,32768 --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
  echo "ab rc=$?" >>$OUT/suite.txt
  LADDER_SAN_FILTER='GpuTensorMaps.*:GpuFullRing.TensorCoreEveryRouteSameBits:GpuFused.StoreFusedReducerWaitsForItsProducers' LADDER_BIN_DIR=/tmp/b LADDER_STEPS=san OUT=/tmp/san timeout 75 scripts/device_run.sh >/dev/null 2>&1
  echo "san rc=$?" >>$OUT/suite.txt; cat /tmp/san/progress.txt >>$OUT/suite.txt 2>&1
fi
cp /tmp/run/progress.txt $OUT/progress.txt 2>/dev/null
find /tmp/run -name 'gpu_tests*.log' | head -1 | xargs grep -B2 -A12 "FAILED\|Failure" | head -80 > $OUT/failures.txt 2>/dev/null
