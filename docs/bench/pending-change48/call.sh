# Change 48b (docs/perf.md, change 48's outcome): the L2 evict-first hint on the batched
# (walking) producer's KV copies only, the direct and one-kernel launches main's code. Built from
# change48b.patch into .carry/c48b (ladder.xz, gpu_tests.xz; scripts/pack_carry.sh); main's CLI
# beside it as .carry/c48b/ladder_main.xz. One call: the GPU suite, the four sanitizers on the
# walk and batch-invariance tests, then main against 48b, three rounds: batch-1 layers (the same
# kernels: ratio 1.00 expected), batch 16 and the engine's token. Carry [".carry/c48b"]; ~9 min,
# more than one call holds on an H100 (the suite alone ~4 min there): STEPS=suite then
# STEPS=variants split it into two calls.
set -u
steps=${STEPS:-suite variants}
mkdir -p /tmp/c48b
if [[ $steps == *suite* ]]; then
bash docs/bench/pending-change45/suite.sh .carry/c48b c48b
bash docs/bench/pending-change45/suite.sh .carry/c48b c48b 'GpuSlotWalk.SlotsPerCtaNeverChangeBits:Cases/GpuBatchInvariance.*'
fi
[[ $steps == *variants* ]] || exit 0
xz -dc .carry/c48b/ladder_main.xz >/tmp/ladder_main && chmod +x /tmp/ladder_main
xz -dc .carry/c48b/ladder.xz >/tmp/ladder_48b && chmod +x /tmp/ladder_48b
mkdir -p $OUT/variants
OUT=$OUT/variants timeout 300 scripts/bench_variants.sh 3 /tmp/ladder_main /tmp/ladder_48b -- \
  --depths 2048,8192,32768,131072 --routes splitk/ring --batch 16 --step-depths 2048 \
  --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/suite.txt
