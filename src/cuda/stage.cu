// G5 staging: the visible rows of a (wrapped) token-major ring copied bit-exactly into absolute
// order — staged row t holds logical token logical_start + t, rows [visible, padded_rows) are
// zero — so the vec producer reads the same reduction lanes it reads on an unwrapped plane (P2).
#include "cuda/kernels.hpp"
#include "cuda/common.cuh"

namespace ladder::cuda_detail {
namespace {

inline constexpr int kStageThreads = 256;
// Grid cap: a 2048-row window of 2 KV heads is 131072 4-dim chunks; 512 blocks of 256 threads
// cover it in one pass and larger windows in a few grid-stride passes.
inline constexpr int kStageMaxBlocks = 512;

__device__ void stage(const StageParams& p) {
  const int chunks_per_row = p.n_kv_heads * kWarpSize;
  const std::int64_t items = static_cast<std::int64_t>(p.padded_rows) * chunks_per_row;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < items;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int t = static_cast<int>(i / chunks_per_row);
    const int kvh = static_cast<int>(i % chunks_per_row) / kWarpSize;
    const int d = static_cast<int>(i % kWarpSize) * kDimsPerLane;
    const std::int64_t dst = p.dst_strides.offset(t, kvh) + d;
    if (t < p.visible) {
      const std::int64_t src = p.src.strides.offset(p.src.row(t), kvh) + d;
      copy_half4(p.dst_k + dst, p.src.k + src);
      copy_half4(p.dst_v + dst, p.src.v + src);
    } else {
      store_zero4(p.dst_k + dst);
      store_zero4(p.dst_v + dst);
    }
  }
}

__global__ void __launch_bounds__(kStageThreads) stage_kernel(StageParams p) { stage(p); }
__global__ void __launch_bounds__(kStageThreads) stage_kernel_indirect(const StageParams* pp) {
  const StageParams p = *pp;
  stage(p);
}

unsigned stage_blocks(int rows, int n_kv_heads) {
  const std::int64_t items = static_cast<std::int64_t>(rows) * n_kv_heads * kWarpSize;
  const std::int64_t want = (items + kStageThreads - 1) / kStageThreads;
  return static_cast<unsigned>(want < kStageMaxBlocks ? (want > 0 ? want : 1) : kStageMaxBlocks);
}

}  // namespace

cudaError_t launch_stage(const StageParams& p, const StageParams* dp, int max_padded_rows, cudaStream_t stream) {
  if (dp == nullptr) {
    if (p.padded_rows <= 0) return cudaSuccess;
    stage_kernel<<<stage_blocks(p.padded_rows, p.n_kv_heads), kStageThreads, 0, stream>>>(p);
  } else {
    stage_kernel_indirect<<<stage_blocks(max_padded_rows, p.n_kv_heads), kStageThreads, 0, stream>>>(dp);
  }
  return cudaGetLastError();
}

}  // namespace ladder::cuda_detail
