# The device call that measures changes 43 and 43b (docs/perf.md): build here first, from a clean
# main, three trees (A = main, B = main + change43.patch, C = main + change43b.patch), e.g.
#   git worktree add /tmp/wt-b HEAD && (cd /tmp/wt-b && git apply docs/bench/pending-change43/change43.patch)
#   cmake -S /tmp/wt-b -B /tmp/wt-b/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLADDER_CUDA=ON
#   scripts/pack_carry.sh /tmp/wt-b/build .carry/c43 ladder=ladder_b ladder_gpu_tests=gpu_tests_b
# (likewise ladder_a from main, ladder_c and gpu_tests_c from C), then run it twice (one call is
# at most 600 s) with carry [".carry/c43", "docs/bench/pending-change43/call.sh"]:
#   bash docs/bench/pending-change43/call.sh suites   (~6 min: both GPU suites, sanitizers on C)
#   bash docs/bench/pending-change43/call.sh bench    (~6 min: A, B, C interleaved, three rounds)
#   bash docs/bench/pending-change43/call.sh ncu      (~3 min: ncu on the direct producer at
#                                                      32,768 for A and B, issue 9's figures)
set -u
phase=${1:?suites, bench or ncu}
if [[ $phase == ncu ]]; then
  for v in a b; do
    xz -dc .carry/c43/ladder_$v.xz >/tmp/ladder_$v; chmod +x /tmp/ladder_$v
    LADDER_BIN=/tmp/ladder_$v OUT=$OUT/ncu_$v timeout 250 scripts/ncu_producer.sh 32768 splitk/ring >/dev/null 2>&1
    echo "ncu $v rc=$?" >>$OUT/suite.txt
  done
  exit 0
fi
if [[ $phase == suites ]]; then
for v in b c; do
  mkdir -p /tmp/$v; xz -dc .carry/c43/gpu_tests_$v.xz >/tmp/$v/ladder_gpu_tests; xz -dc .carry/c43/ladder_$v.xz >/tmp/$v/ladder
  chmod +x /tmp/$v/*
  LADDER_BIN_DIR=/tmp/$v LADDER_STEPS=tests OUT=/tmp/run_$v timeout 200 scripts/device_run.sh >/dev/null 2>&1
  echo "suite $v rc=$?" >>$OUT/suite.txt
  { cat /tmp/run_$v/progress.txt; find /tmp/run_$v -name 'gpu_tests*.log' | head -1 | xargs grep -E "PASSED|FAILED" | tail -8; } >>$OUT/suite.txt 2>&1
done
LADDER_SAN_FILTER='GpuTensorMaps.*:GpuFullRing.TensorCoreEveryRouteSameBits:GpuFused.StoreFusedReducerWaitsForItsProducers:GpuBatch.*' LADDER_BIN_DIR=/tmp/c LADDER_STEPS=san OUT=/tmp/san timeout 100 scripts/device_run.sh >/dev/null 2>&1
echo "san c rc=$?" >>$OUT/suite.txt; cat /tmp/san/progress.txt >>$OUT/suite.txt 2>&1
exit 0
fi
for v in a b c; do xz -dc .carry/c43/ladder_$v.xz >/tmp/ladder_$v; chmod +x /tmp/ladder_$v; done
mkdir -p $OUT/variants
OUT=$OUT/variants timeout 560 scripts/bench_variants.sh 3 /tmp/ladder_a /tmp/ladder_b /tmp/ladder_c -- --depths 2048,8192,32768,131072 --routes splitk/ring,vec/growing --batch 16 --step-depths 2048,32768 --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/suite.txt
