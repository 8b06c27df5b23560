# Change 45's rule (TcTiles::automatic: swizzled for batched launches of two or more sequences and
# direct launches from 65,536 rows) on the device: the GPU suite on the default (automatic), then
# the build forced padded (P, main's kernels everywhere) against its default (R), two rounds.
# Build packed with scripts/pack_carry.sh BUILD .carry/c45r ladder=ladder ladder_gpu_tests=gpu_tests.
# Carry [".carry/c45r"]; ~6 min. Results in $OUT/suite.txt and $OUT/rule.
set -u
mkdir -p /tmp/c45r
xz -dc .carry/c45r/ladder.xz >/tmp/c45r/ladder
xz -dc .carry/c45r/gpu_tests.xz >/tmp/c45r/ladder_gpu_tests
chmod +x /tmp/c45r/*
LADDER_BIN_DIR=/tmp/c45r LADDER_STEPS=tests OUT=/tmp/run45r timeout 240 scripts/device_run.sh >/dev/null 2>&1
echo "suite rc=$?" >>$OUT/suite.txt
{ cat /tmp/run45r/progress.txt; find /tmp/run45r -name 'gpu_tests*.log' | head -1 | xargs grep -E "PASSED|FAILED" | tail -6; } >>$OUT/suite.txt 2>&1
printf '#!/bin/sh\nLADDER_GPU_TILES=padded exec /tmp/c45r/ladder "$@"\n' >/tmp/ladder_p && chmod +x /tmp/ladder_p
cp /tmp/c45r/ladder /tmp/ladder_r
mkdir -p $OUT/rule
OUT=$OUT/rule timeout 300 scripts/bench_variants.sh 2 /tmp/ladder_p /tmp/ladder_r -- \
  --depths 2048,65536,131072 --routes splitk/ring,vec/growing --batch 16 --step-depths 2048 \
  --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
echo "rule rc=$?" >>$OUT/suite.txt
