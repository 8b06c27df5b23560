# Change 45 (docs/perf.md), device call 2 of 2: main (.carry/c43/ladder_a.xz, 61b771d's GPU code),
# the change's build with padded tiles (P: main's kernels) and with swizzled tiles (S), three
# rounds interleaved: single layers at batch 1 (direct launches), batch 4 and batch 16 (the
# engine's batched launches), the two steps and the engine's batch-1 token. Carry [".carry/c45",
# ".carry/c43"]; ~6 min. Results in $OUT/variants.
set -u
bash docs/bench/pending-change45/unpack.sh
xz -dc .carry/c43/ladder_a.xz >/tmp/ladder_a && chmod +x /tmp/ladder_a
mkdir -p $OUT/variants
OUT=$OUT/variants timeout 560 scripts/bench_variants.sh 3 /tmp/ladder_a /tmp/ladder_p /tmp/ladder_s -- \
  --depths 2048,8192,32768,131072 --routes splitk/ring,vec/growing --batch 4,16 --step-depths 2048,32768 \
  --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/suite.txt
