# Changes 45 and 46, optional fourth call (after call_bench.sh): ncu on the first batched producer
# launch of a layer over 16 sequences at 32,768 tokens (scripts/ncu_producer.sh with
# LADDER_NCU_BATCH=16), for change 45's build padded (P, main's kernels) and swizzled (S) and
# change 46's padded (W): speed of light, DRAM throughput, warp stall reasons, so that what
# batch 16 waits on is read, not inferred. Carry [".carry/c45", ".carry/c46"]; ~4 min.
set -u
bash docs/bench/pending-change45/unpack.sh
mkdir -p /tmp/c46 && xz -dc .carry/c46/ladder.xz >/tmp/c46/ladder && chmod +x /tmp/c46/ladder
for v in p:/tmp/c45/ladder:padded s:/tmp/c45/ladder:swizzled w:/tmp/c46/ladder:padded; do
  IFS=: read -r name bin tiles <<<"$v"
  LADDER_GPU_TILES=$tiles LADDER_BIN=$bin LADDER_NCU_BATCH=16 OUT=$OUT/ncu_$name timeout 80 \
    scripts/ncu_producer.sh 32768 splitk/ring >/dev/null 2>&1
  echo "ncu $name rc=$?" >>$OUT/suite.txt
done
