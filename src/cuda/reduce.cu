// The reducer shared by every route (G2/G3/G4): per head, merge the nwg workgroup partials
// [m, s, o[128]] in workgroup order with exp(m_i - M) corrections (softmax.hpp's rule), then
// divide once; when the producer left the warp merge to it (parts > 1), each workgroup's warp
// partials are merged first, in warp order. It is ordered after its producer by stream order
// only.
#include "cuda/kernels.hpp"
#include "cuda/common.cuh"
#include "ladder/heuristics.hpp"

namespace ladder::cuda_detail {
namespace {

// One warp per query head; lane l owns dims 4l..4l+3.
//
// Lane w owns workgroup w's (m, s) — for parts > 1 it first merges that workgroup's warp
// partials in warp order (step 4: M = max m_g, c_g = rescale_factor(m_g, M), S = fmaf chain from
// 0), exactly as a producer that merges would have — so the head costs one round trip to memory
// for the statistics instead of nwg; the o chains below are the same fmaf chains in the same
// order as the CPU twin's (parts = 1) or the merging producer's (parts > 1).
__device__ void reduce(const ReduceParams& p) {
  const int head = static_cast<int>(blockIdx.x);
  if (head >= p.shape.n_heads || p.nwg <= 0) return;
  const int lane = static_cast<int>(threadIdx.x);
  const int stride = partial_stride(kHeadDim);
  const int parts = p.parts;
  const float* base = p.partials + static_cast<std::int64_t>(head) * p.nwg * parts * stride;
  static_assert(kMaxWorkgroups <= kWarpSize, "one lane per workgroup partial");
  const bool has = lane < p.nwg;
  const float* wg_base = base + static_cast<std::int64_t>(has ? lane : 0) * parts * stride;
  float part_m[kMaxWarpsPerWorkgroup] = {};
  float part_c[kMaxWarpsPerWorkgroup] = {};
  float my_m = neg_inf_f32();
  float my_s = 0.0f;
  if (has) {
    if (parts == 1) {
      my_m = wg_base[0];
      my_s = wg_base[1];
    } else {
#pragma unroll
      for (int g = 0; g < kMaxWarpsPerWorkgroup; ++g) part_m[g] = g < parts ? wg_base[g * stride] : neg_inf_f32();
      my_m = part_m[0];
      for (int g = 1; g < parts; ++g) my_m = fmaxf(my_m, part_m[g]);
#pragma unroll
      for (int g = 0; g < kMaxWarpsPerWorkgroup; ++g) {
        part_c[g] = g < parts ? rescale_factor(part_m[g], my_m) : 0.0f;
        if (g < parts) my_s = fmaf(wg_base[g * stride + 1], part_c[g], my_s);
      }
    }
  }
  float m_all = my_m;
  for (int off = kWarpSize / 2; off > 0; off /= 2) m_all = fmaxf(m_all, __shfl_xor_sync(kFullMask, m_all, off));
  const float my_c = rescale_factor(my_m, m_all);
  float s_all = 0.0f;
  float o_all[kDimsPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int c = lane * kDimsPerLane;
  // o starts 2 floats into a 130-float partial: 8-byte aligned only. Loads run kReduceBatch
  // partials ahead of the fmaf chains.
  constexpr int kReduceBatch = 8;
  if (parts == 1) {
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
  } else {
    // Two workgroups (2 x parts <= kReduceBatch partials) per batch of loads.
    constexpr int kWgPerBatch = kReduceBatch / kMaxWarpsPerWorkgroup;
    for (int w0 = 0; w0 < p.nwg; w0 += kWgPerBatch) {
      float2 lo[kWgPerBatch][kMaxWarpsPerWorkgroup], hi[kWgPerBatch][kMaxWarpsPerWorkgroup];
#pragma unroll
      for (int k = 0; k < kWgPerBatch; ++k)
#pragma unroll
        for (int g = 0; g < kMaxWarpsPerWorkgroup; ++g)
          if (w0 + k < p.nwg && g < parts) {
            const float* part = base + ((w0 + k) * parts + g) * stride;
            lo[k][g] = *reinterpret_cast<const float2*>(part + 2 + c);
            hi[k][g] = *reinterpret_cast<const float2*>(part + 2 + c + 2);
          }
#pragma unroll
      for (int k = 0; k < kWgPerBatch; ++k) {
        const int src = (w0 + k) % kWarpSize;
        const float cw = __shfl_sync(kFullMask, my_c, src);
        const float sw = __shfl_sync(kFullMask, my_s, src);
        float o_w[kDimsPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int g = 0; g < kMaxWarpsPerWorkgroup; ++g) {
          const float cg = __shfl_sync(kFullMask, part_c[g], src);
          if (w0 + k < p.nwg && g < parts) {
            o_w[0] = fmaf(lo[k][g].x, cg, o_w[0]);
            o_w[1] = fmaf(lo[k][g].y, cg, o_w[1]);
            o_w[2] = fmaf(hi[k][g].x, cg, o_w[2]);
            o_w[3] = fmaf(hi[k][g].y, cg, o_w[3]);
          }
        }
        if (w0 + k < p.nwg) {
          s_all = fmaf(sw, cw, s_all);
#pragma unroll
          for (int jj = 0; jj < kDimsPerLane; ++jj) o_all[jj] = fmaf(o_w[jj], cw, o_all[jj]);
        }
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
