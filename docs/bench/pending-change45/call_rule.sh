# Change 45's rule (TcTiles::automatic: swizzled for batched launches of two or more sequences and
# direct launches from 65,536 rows) on the device: the GPU suite on the default (automatic), then
# the build forced padded (P, main's kernels everywhere) against its default (R), two rounds.
# Build packed with scripts/pack_carry.sh BUILD .carry/c45r ladder=ladder ladder_gpu_tests=gpu_tests.
# Carry [".carry/c45r"]; ~6 min. Results in $OUT/suite.txt and $OUT/rule.
set -u
bash docs/bench/pending-change45/suite.sh .carry/c45r c45r
printf '#!/bin/sh\nLADDER_GPU_TILES=padded exec /tmp/c45r/ladder "$@"\n' >/tmp/ladder_p && chmod +x /tmp/ladder_p
cp /tmp/c45r/ladder /tmp/ladder_r
mkdir -p $OUT/rule
OUT=$OUT/rule timeout 300 scripts/bench_variants.sh 2 /tmp/ladder_p /tmp/ladder_r -- \
  --depths 2048,65536,131072 --routes splitk/ring,vec/growing --batch 16 --step-depths 2048 \
  --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
echo "rule rc=$?" >>$OUT/suite.txt
