// The reducer shared by every route (G2/G3/G4): per head, merge the nwg workgroup partials
// [m, s, o[128]] in workgroup order with exp(m_i - M) corrections (softmax.hpp's rule), then
// divide once. It is ordered after its producer by stream order only.
#include "cuda/kernels.hpp"
#include "cuda/common.cuh"

namespace ladder::cuda_detail {
namespace {

// One warp per query head; lane l owns dims 4l..4l+3.
__device__ void reduce(const ReduceParams& p) {
  const int head = static_cast<int>(blockIdx.x);
  if (head >= p.shape.n_heads || p.nwg <= 0) return;
  const int lane = static_cast<int>(threadIdx.x);
  const int stride = partial_stride(kHeadDim);
  const float* base = p.partials + static_cast<std::int64_t>(head) * p.nwg * stride;
  // Lane w loads workgroup w's (m, s) and computes its factor, all lanes at once (nwg <= 32), so
  // the head costs one round trip to memory instead of nwg; the arithmetic below is the same
  // fmaf chain in workgroup order as the CPU twin's.
  static_assert(kMaxWorkgroups <= kWarpSize, "one lane per workgroup partial");
  const bool has = lane < p.nwg;
  const float my_m = has ? base[lane * stride] : neg_inf_f32();
  const float my_s = has ? base[lane * stride + 1] : 0.0f;
  float m_all = my_m;
  for (int off = kWarpSize / 2; off > 0; off /= 2) m_all = fmaxf(m_all, __shfl_xor_sync(kFullMask, m_all, off));
  const float my_c = rescale_factor(my_m, m_all);
  float s_all = 0.0f;
  float o_all[kDimsPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int c = lane * kDimsPerLane;
  // o starts 2 floats into a 130-float partial: 8-byte aligned only. Loads run kReduceBatch
  // workgroups ahead of the fmaf chain.
  constexpr int kReduceBatch = 8;
  for (int w0 = 0; w0 < p.nwg; w0 += kReduceBatch) {
    float2 lo[kReduceBatch], hi[kReduceBatch];
#pragma unroll
    for (int k = 0; k < kReduceBatch; ++k) {
      if (w0 + k < p.nwg) {
        const float* part = base + (w0 + k) * stride;
        lo[k] = *reinterpret_cast<const float2*>(part + 2 + c);
        hi[k] = *reinterpret_cast<const float2*>(part + 2 + c + 2);
      }
    }
#pragma unroll
    for (int k = 0; k < kReduceBatch; ++k) {
      const float cw = __shfl_sync(kFullMask, my_c, (w0 + k) % kWarpSize);
      const float sw = __shfl_sync(kFullMask, my_s, (w0 + k) % kWarpSize);
      if (w0 + k < p.nwg) {
        s_all = fmaf(sw, cw, s_all);
        o_all[0] = fmaf(lo[k].x, cw, o_all[0]);
        o_all[1] = fmaf(lo[k].y, cw, o_all[1]);
        o_all[2] = fmaf(hi[k].x, cw, o_all[2]);
        o_all[3] = fmaf(hi[k].y, cw, o_all[3]);
      }
    }
  }
  *reinterpret_cast<float4*>(p.out + head * kHeadDim + c) =
      make_float4(o_all[0] / s_all, o_all[1] / s_all, o_all[2] / s_all, o_all[3] / s_all);
}

__global__ void __launch_bounds__(kWarpSize) reduce_kernel(ReduceParams p) { reduce(p); }
__global__ void __launch_bounds__(kWarpSize) reduce_kernel_indirect(const ReduceParams* pp) {
  const ReduceParams p = *pp;
  reduce(p);
}

}  // namespace

cudaError_t launch_reduce(const ReduceParams& p, const ReduceParams* dp, cudaStream_t stream) {
  const unsigned heads = static_cast<unsigned>(p.shape.n_heads);
  if (dp == nullptr)
    reduce_kernel<<<heads, kWarpSize, 0, stream>>>(p);
  else
    reduce_kernel_indirect<<<heads, kWarpSize, 0, stream>>>(dp);
  return cudaGetLastError();
}

}  // namespace ladder::cuda_detail
