// G3 pad and G5 staging: one row copy (RowCopyParams). Rows are copied bit-exactly (any KV dtype) (staging and
// padding never round) and the rows past `count` are zero-filled, so the vec producer reads a
// padded tail or a staged window exactly as it reads an unwrapped plane (P2).
#include "cuda/common.cuh"
#include "cuda/kernels.hpp"

namespace ladder::cuda_detail {
namespace {

// One thread per (destination row, KV head, 4-dim chunk).
inline constexpr int kCopyThreads = 256;
// Grid cap: a 2048-row window of 2 KV heads is 131072 4-dim chunks; 512 blocks of 256 threads
// cover it in one pass and larger windows in a few grid-stride passes.
inline constexpr int kCopyMaxBlocks = 512;

__device__ void copy_rows(const RowCopyParams& p) {
  const int chunks_per_row = p.n_kv_heads * kWarpSize;
  const std::int64_t items = static_cast<std::int64_t>(p.rows) * chunks_per_row;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < items;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int r = static_cast<int>(i / chunks_per_row);
    const int kvh = static_cast<int>(i % chunks_per_row) / kWarpSize;
    const int d = static_cast<int>(i % kWarpSize) * kDimsPerLane;
    const std::int64_t dst = p.dst_strides.offset(r, kvh) + d;
    if (r < p.count) {
      const std::int64_t src = p.src.strides.offset(p.src.row(p.first + r), kvh) + d;
      copy4(p.dst_k + dst, p.src.k + src);
      copy4(p.dst_v + dst, p.src.v + src);
    } else {
      store_zero4(p.dst_k + dst);
      store_zero4(p.dst_v + dst);
    }
  }
}

__global__ void __launch_bounds__(kCopyThreads) copy_rows_kernel(RowCopyParams p) { copy_rows(p); }
// Indirect form: a token without a copy (rows == 0: no ragged tail) exits at once.
__global__ void __launch_bounds__(kCopyThreads) copy_rows_kernel_indirect(const RowCopyParams* pp, std::size_t stride) {
  const RowCopyParams p = batch_entry(pp, stride);
  copy_rows(p);
}

unsigned copy_blocks(int rows, int n_kv_heads) {
  const std::int64_t items = static_cast<std::int64_t>(rows) * n_kv_heads * kWarpSize;
  const std::int64_t want = (items + kCopyThreads - 1) / kCopyThreads;
  return static_cast<unsigned>(want < kCopyMaxBlocks ? (want > 0 ? want : 1) : kCopyMaxBlocks);
}

}  // namespace

cudaError_t launch_copy_rows(const RowCopyParams& p, const RowCopyParams* dp, int max_rows, cudaStream_t stream,
                             BatchSpan batch) {
  if (dp == nullptr) {
    if (p.rows <= 0) return cudaSuccess;
    copy_rows_kernel<<<copy_blocks(p.rows, p.n_kv_heads), kCopyThreads, 0, stream>>>(p);
  } else {
    const dim3 grid(copy_blocks(max_rows, p.n_kv_heads), 1, static_cast<unsigned>(batch.count));
    copy_rows_kernel_indirect<<<grid, kCopyThreads, 0, stream>>>(dp, batch.stride);
  }
  return cudaGetLastError();
}

}  // namespace ladder::cuda_detail
