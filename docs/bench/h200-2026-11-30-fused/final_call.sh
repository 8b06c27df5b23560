#!/usr/bin/env bash
# One device call: the GPU suite with LADDER_GPU_FUSED=1 (every default path fused; GpuFused.*
# compare fused with separate explicitly), ladder bench (default = separate kernels, then fused),
# ncu on the fused kernel, compute-sanitizer memcheck + racecheck on the fused kernel's tests (one
# process per test, reduced sweep).
set -uo pipefail
B=.carry/gpufused/bin
export PATH=$PATH:/usr/local/cuda/bin
T=$OUT/gpu_tests.log; X=$OUT/bench.txt; S=$OUT/san.log
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $T 2>&1
LADDER_GPU_FUSED=1 timeout 60 $B/ladder_gpu_tests --gtest_filter='-GpuPerf.*' >> $T 2>&1; echo "suite (LADDER_GPU_FUSED=1) rc=$?" | tee -a $T
grep -E '^\[  (PASSED|FAILED)|\[ (fused|producer)' $T
timeout 40 $B/ladder bench --device cuda --no-engine --step-depths 2048,131072 --no-fallback-step --output $OUT/bench.json > $X 2>/dev/null; echo "bench rc=$?"
LADDER_GPU_FUSED=1 timeout 40 $B/ladder bench --device cuda --no-engine --step-depths 2048,131072 --no-fallback-step --output $OUT/bench_fused.json >> $X 2>/dev/null; echo "bench fused rc=$?"
LADDER_GPU_FUSED=1 timeout 30 ncu --clock-control none -k regex:fused_tc --launch-skip 10 --launch-count 1 --section SpeedOfLight $B/ladder bench --device cuda --depths 2048 --routes splitk/ring --step-depths none --no-engine --reps 5 > /tmp/ncu.txt 2>&1; echo "== ncu fused 2048" >> $X; grep -E "Duration|SM Active|Elapsed Cyc" /tmp/ncu.txt >> $X
san() { LADDER_GPU_SWEEP=small timeout 75 compute-sanitizer --error-exitcode 1 --print-limit 20 --tool $1 $B/ladder_gpu_tests --gtest_filter=$2 > /tmp/san_$1_$2.log 2>&1; echo "== $1 $2 rc=$?" > /tmp/san_$1_$2.rc; }
export -f san; export B
for t in GpuFused.OneKernelEqualsSeparateKernelsBitForBit GpuFused.ArrivalOrderNeverChangesBits GpuFused.ArrivalCountersResetThemselves; do for tool in memcheck racecheck; do echo "$tool $t"; done; done | xargs -P 6 -L 1 bash -c 'san "$0" "$1"'
for f in /tmp/san_*.rc; do cat $f; l=${f%.rc}.log; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $l | tail -1; grep -E '^\[  (PASSED|FAILED)' $l; done > $S
for f in /tmp/san_*.log; do echo "===== $f"; cat $f; done >> $S
head -24 $S
grep -E "^layer   (splitk|vec)|^step|ncu|Duration|SM Active" $X
