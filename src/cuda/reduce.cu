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
  float m_all = base[0];
  for (int w = 1; w < p.nwg; ++w) m_all = fmaxf(m_all, base[w * stride]);
  float s_all = 0.0f;
  float o_all[kDimsPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int c = lane * kDimsPerLane;
  for (int w = 0; w < p.nwg; ++w) {
    const float* part = base + w * stride;
    const float cw = rescale_factor(part[0], m_all);
    s_all = fmaf(part[1], cw, s_all);
    // o starts 2 floats into a 130-float partial: 8-byte aligned only.
    const float2 lo = *reinterpret_cast<const float2*>(part + 2 + c);
    const float2 hi = *reinterpret_cast<const float2*>(part + 2 + c + 2);
    o_all[0] = fmaf(lo.x, cw, o_all[0]);
    o_all[1] = fmaf(lo.y, cw, o_all[1]);
    o_all[2] = fmaf(hi.x, cw, o_all[2]);
    o_all[3] = fmaf(hi.y, cw, o_all[3]);
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
