# Change 43, variant D (docs/perf.md): bulk copies in the direct launch only for windows of
# 65,536 rows or more. One call: D's GPU suite, then A (main), B (change 43) and D interleaved,
# three rounds. Carry [".carry/c43"] with ladder_a/b/d.xz and gpu_tests_d.xz built as call.sh says
# (D = change43.patch plus that threshold in launch_producer_tc).
set -u
mkdir -p /tmp/d; xz -dc .carry/c43/gpu_tests_d.xz >/tmp/d/ladder_gpu_tests; xz -dc .carry/c43/ladder_d.xz >/tmp/d/ladder
chmod +x /tmp/d/*
LADDER_BIN_DIR=/tmp/d LADDER_STEPS=tests OUT=/tmp/run_d timeout 200 scripts/device_run.sh >/dev/null 2>&1
echo "suite d rc=$?" >>$OUT/suite.txt
{ cat /tmp/run_d/progress.txt; find /tmp/run_d -name 'gpu_tests*.log' | head -1 | xargs grep -E "PASSED|FAILED" | tail -8; } >>$OUT/suite.txt 2>&1
for v in a b d; do xz -dc .carry/c43/ladder_$v.xz >/tmp/ladder_$v; chmod +x /tmp/ladder_$v; done
mkdir -p $OUT/variants
OUT=$OUT/variants timeout 240 scripts/bench_variants.sh 3 /tmp/ladder_a /tmp/ladder_b /tmp/ladder_d -- --depths 2048,8192,32768,131072 --routes splitk/ring,vec/growing --batch 16 --step-depths 2048,32768 --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/suite.txt
