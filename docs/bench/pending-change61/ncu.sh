# Change 61's merge under ncu (docs/perf.md), carry [".carry/c61li"] (c61b built with -lineinfo:
# cmake -DCMAKE_CUDA_FLAGS=-lineinfo, sources at this tree's paths). The one-kernel form
# (LADDER_GPU_FUSED=1): its batched kernel at batch 16 and its direct kernel at batch 1, 2,048
# tokens, the third launch of each (steady counters), caches as the previous kernel left them.
set -u
mkdir -p /tmp/c61li && xz -dc .carry/c61li/ladder.xz >/tmp/c61li/ladder && chmod +x /tmp/c61li/ladder
export LADDER_GPU_FUSED=1 LADDER_BIN=/tmp/c61li/ladder LADDER_NCU_SOURCE=1 LADDER_NCU_CACHE=none LADDER_NCU_SKIP=2
LADDER_NCU_BATCH=16 LADDER_NCU_KERNEL='fused_tc_kernel_indirect' timeout 240 scripts/ncu_producer.sh 2048 splitk/ring
LADDER_NCU_KERNEL='fused_tc_kernel<' timeout 200 scripts/ncu_producer.sh 2048 splitk/ring
