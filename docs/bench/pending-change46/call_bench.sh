# Changes 45 and 46 (docs/perf.md) in one device call: main (.carry/c43/ladder_a.xz, 61b771d's GPU
# code), change 45's build with padded tiles (P: main's kernels) and swizzled (S), change 46's
# build padded (W) and swizzled (WS); three rounds, interleaved: single layers at batch 1 (direct
# launches), batch 4 and batch 16 (the engine's batched launches), the two steps and the engine's
# batch-1 token. Run after both suites (pending-change45/call.sh, call.sh here) have passed.
# Carry [".carry/c45", ".carry/c46", ".carry/c43"] (or drop c43 and A); ~8 min.
set -u
bash docs/bench/pending-change45/unpack.sh
mkdir -p /tmp/c46
xz -dc .carry/c46/ladder.xz >/tmp/c46/ladder && chmod +x /tmp/c46/ladder
for v in w:padded ws:swizzled; do
  printf '#!/bin/sh\nLADDER_GPU_TILES=%s exec /tmp/c46/ladder "$@"\n' "${v#*:}" >/tmp/ladder_${v%%:*}
  chmod +x /tmp/ladder_${v%%:*}
done
variants="/tmp/ladder_p /tmp/ladder_s /tmp/ladder_w /tmp/ladder_ws"
if [[ -f .carry/c43/ladder_a.xz ]]; then
  xz -dc .carry/c43/ladder_a.xz >/tmp/ladder_a && chmod +x /tmp/ladder_a
  variants="/tmp/ladder_a $variants"
fi
mkdir -p $OUT/variants
OUT=$OUT/variants timeout 570 scripts/bench_variants.sh 3 $variants -- \
  --depths 2048,8192,32768,131072 --routes splitk/ring,vec/growing --batch 4,16 --step-depths 2048,32768 \
  --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/suite.txt
