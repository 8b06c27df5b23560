// G3 vec producer + pad. vec reads one contiguous physical span (row t holds token t; R1 keeps
// it fail-closed: a partially wrapped ring never gets here) in 32-row blocks; tokens from
// tail_first on come from the 32-row pad block, so a ragged head-major tail is read from
// scratch, never past the plane. Both stride layouts are the same code: PlaneStrides says
// whether a row is one head (head-major) or a full token (token-major).
#include "cuda/kernels.hpp"
#include "cuda/producer.cuh"
#include "cuda/producer_tc.cuh"

namespace ladder::cuda_detail {
namespace {

// A token's location: row * 2 + source, source 0 = the span, 1 = the pad block.
struct VecRows {
  static constexpr bool kFusedStore = false;
  static constexpr int kFromTail = 1;
  __device__ static int locate(const ProducerParams& p, int t) {
    return t < p.tail_first ? p.rows.row(t) * 2 : (t - p.tail_first) * 2 + kFromTail;
  }
  __device__ static const std::uint16_t* at(const RowSource& span, const RowSource& tail, bool plane_k, int loc,
                                            int kvh, int d0) {
    const RowSource& src = (loc & kFromTail) ? tail : span;
    return (plane_k ? src.k : src.v) + src.strides.offset(loc >> 1, kvh) + d0;
  }
  __device__ static RawRow load_k_raw(const ProducerParams& p, int loc, int kvh, int d0) {
    return load_raw4(at(p.rows, p.tail, true, loc, kvh, d0));
  }
  __device__ static RawRow load_v_raw(const ProducerParams& p, int loc, int kvh, int d0) {
    return load_raw4(at(p.rows, p.tail, false, loc, kvh, d0));
  }
  __device__ static Float4 widen_k(const ProducerParams&, RawRow raw, int, int, int) { return widen_half4(raw); }
  __device__ static Float4 widen_v(const ProducerParams&, RawRow raw, int, int, int) { return widen_half4(raw); }
  __device__ static const std::uint16_t* k_row(const ProducerParams& p, int loc, int kvh) {
    return at(p.rows, p.tail, true, loc, kvh, 0);
  }
  __device__ static const std::uint16_t* v_row(const ProducerParams& p, int loc, int kvh) {
    return at(p.rows, p.tail, false, loc, kvh, 0);
  }
};

// One thread per (row of the 32-row block, KV head, 4-dim chunk).
inline constexpr int kPadThreads = 256;

__device__ void pad(const PadParams& p) {
  const int chunks_per_row = p.n_kv_heads * kWarpSize;
  const int items = kBlockTokens * chunks_per_row;
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < items;
       i += static_cast<int>(gridDim.x * blockDim.x)) {
    const int r = i / chunks_per_row;
    const int kvh = (i % chunks_per_row) / kWarpSize;
    const int d = (i % kWarpSize) * kDimsPerLane;
    const std::int64_t dst = p.dst_strides.offset(r, kvh) + d;
    if (r < p.tail_count) {
      const std::int64_t src = p.src.strides.offset(p.src.row(p.tail_first + r), kvh) + d;
      copy_half4(p.dst_k + dst, p.src.k + src);
      copy_half4(p.dst_v + dst, p.src.v + src);
    } else {
      store_zero4(p.dst_k + dst);
      store_zero4(p.dst_v + dst);
    }
  }
}

__global__ void __launch_bounds__(kPadThreads) pad_kernel(PadParams p) { pad(p); }
__global__ void __launch_bounds__(kPadThreads) pad_kernel_indirect(const PadParams* pp) {
  const PadParams p = *pp;
  if (p.tail_count > 0) pad(p);
}

}  // namespace

cudaError_t launch_vec(const ProducerParams& p, const ProducerParams* dp, const ProducerChoice& c,
                       cudaStream_t stream) {
  if (c.tensor_core) return launch_producer_tc<VecRows>(p, dp, p.shape, stream);
  return launch_producer<VecRows>(p, dp, p.shape, c.heads_per_warp, stream);
}

cudaError_t launch_pad(const PadParams& p, const PadParams* dp, cudaStream_t stream) {
  const int items = kBlockTokens * p.n_kv_heads * kWarpSize;
  const unsigned blocks = static_cast<unsigned>((items + kPadThreads - 1) / kPadThreads);
  if (dp == nullptr) {
    if (p.tail_count <= 0) return cudaSuccess;
    pad_kernel<<<blocks, kPadThreads, 0, stream>>>(p);
  } else {
    pad_kernel_indirect<<<blocks, kPadThreads, 0, stream>>>(dp);
  }
  return cudaGetLastError();
}

}  // namespace ladder::cuda_detail
