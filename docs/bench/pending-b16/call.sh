# One device call for issue 8's batch-16 gap: ladder (this tree's CLI, swizzled rule) against
# cuDNN SDPA in one call (scripts/bench_device.sh run; flex left out), then ncu on the first
# batched producer launch of a layer over 16 sequences at 32,768 for change 45's build padded (p)
# and swizzled (s) and change 46's warp-split fold (w), concatenated into $OUT/ncu.txt (the device
# returns at most eight files), and ncu on the batched reducer that follows the swizzled producer.
# Then the copy probe (bench/gpu_stream_probe.cu) at batch 16's bytes: 32 KV heads (16 sequences x 2)
# at 8,192 and 32,768 tokens, $OUT/probe.txt: what each copy mechanism streams at that volume.
# Carry [".carry/bench", ".carry/c45", ".carry/c46", ".carry/probe"]: .carry/bench from
# LADDER_CLI=build-cuda/ladder scripts/bench_device.sh prepare, c45/c46 packed as
# docs/bench/pending-change45/call.sh says, .carry/probe holding build-cuda's ladder_stream_probe.
set -u
OUT=$OUT/peers PEERS=cudnn,flash bash scripts/bench_device.sh run >/dev/null 2>&1
echo "bench+peers rc=$?" >$OUT/suite.txt
bash docs/bench/pending-change46/call_ncu.sh
for d in p s w; do
  for f in $OUT/ncu_$d/*.txt; do echo "=== $d: $f"; cat "$f"; done
done >$OUT/ncu.txt 2>&1
rm -rf $OUT/ncu_p $OUT/ncu_s $OUT/ncu_w
# The batched reducer behind it (caches as the producer left them): how long it reads partials.
LADDER_BIN=/tmp/c45/ladder LADDER_GPU_TILES=swizzled LADDER_NCU_BATCH=16 LADDER_NCU_KERNEL=reduce_kernel \
  LADDER_NCU_CACHE=none OUT=/tmp/ncu_r timeout 80 scripts/ncu_producer.sh 32768 splitk/ring >/dev/null 2>&1
cat /tmp/ncu_r/*.txt >>$OUT/ncu.txt 2>&1
for t in 32768 8192; do timeout 100 .carry/probe/ladder_stream_probe $t 32 10; done >$OUT/probe.txt 2>&1
