# Changes 47 and 48 (docs/perf.md), device call 2 of 2: change 47's build with the per-slot
# stream (slot: main's kernels) and across slots (walk), and change 48's CLI (l2: main + the L2
# evict-first hint on every KV copy) and the partial-traffic probe (p49: each workgroup's slots
# write one partial, the reducer reads nwg per head instead of nwg x nsg; wrong values: what the
# partials' traffic costs, at most), ROUNDS rounds (default 3) interleaved: batch-16 layers (the
# walking launches), batch-1 layers on ROUTES (default splitk/ring,vec/growing; direct launches)
# and the 52-layer step at 2,048, within BENCH_LIMIT seconds (default 560).
# Carry [".carry/c47", ".carry/v2", ".carry/p49"]; ~7 min. Results in $OUT/variants.
set -u
bash docs/bench/pending-change47/unpack.sh
mkdir -p $OUT/variants
OUT=$OUT/variants timeout "${BENCH_LIMIT:-560}" scripts/bench_variants.sh "${ROUNDS:-3}" \
  /tmp/ladder_slot /tmp/ladder_walk /tmp/ladder_l2 /tmp/ladder_p49 -- \
  --depths 2048,8192,32768,131072 --routes "${ROUTES:-splitk/ring,vec/growing}" --batch 16 --step-depths 2048 \
  --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/suite.txt
