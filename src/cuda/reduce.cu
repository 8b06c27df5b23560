// The reducer shared by every route (G2/G3/G4): per head, merge the nwg workgroup partials
// [m, s, o[128]] in workgroup order with exp(m_i - M) corrections (softmax.hpp's rule), then
// divide once; when the producer left the warp merge to it (parts > 1), each workgroup's warp
// partials are merged first, in warp order. It is ordered after its producer by stream order
// only (launched with PDL behind a store-fused producer it measured no faster: docs/perf.md,
// change 10).
#include "cuda/kernels.hpp"
#include "cuda/common.cuh"
#include "ladder/heuristics.hpp"

namespace ladder::cuda_detail {
namespace {

// One CTA per query head, kReduceWarps warps: thread d owns output dim d (warp r: dims
// 32r..32r+31). Every o load is a coalesced 128-byte row segment, and every load of the kernel
// (statistics and o, up to kMaxWorkgroups x kMaxWarpsPerWorkgroup each) is issued before any
// value is used: one L2 round trip. Batches of 8 workgroups, each waiting for its loads, cost
// ~4 round trips at nsg 4 (docs/perf.md, change 11).
inline constexpr int kReduceWarps = kHeadDim / kWarpSize;
inline constexpr int kReduceThreads = kReduceWarps * kWarpSize;

// In each warp, lane w owns workgroup w's statistics (m, s) and, for parts > 1, first merges
// that workgroup's warp partials in warp order (step 4: M = max m_g, c_g = rescale_factor(m_g,
// M), S = fmaf chain from 0) exactly as a producer that merges would have; the o chains below
// are the same fmaf chains in the same order as the CPU twin's (parts = 1) or the merging
// producer's (parts > 1), dim by dim, so which thread holds a dim never changes a bit.
__device__ void reduce(const ReduceParams& p) {
  // Every earlier kernel of the stream has completed (this launch has no PDL attribute): a next
  // layer's producer launched with PDL may start its plane prefetch now.
  pdl_allow_dependents();
  const int head = static_cast<int>(blockIdx.x);
  if (head >= p.shape.n_heads || p.nwg <= 0) return;
  const int d = static_cast<int>(threadIdx.x);
  const int lane = d % kWarpSize;
  const int stride = partial_stride(kHeadDim);
  const int parts = p.parts;
  const int nwg = p.nwg;
  const float* base = p.partials + static_cast<std::int64_t>(head) * nwg * parts * stride;
  static_assert(kMaxWorkgroups <= kWarpSize, "one lane per workgroup partial");

  // Loads. Lane w: workgroup w's (m, s) per part; thread d: dim d of every partial.
  const bool has = lane < nwg;
  const float* wg_base = base + static_cast<std::int64_t>(has ? lane : 0) * parts * stride;
  float part_m[kMaxWarpsPerWorkgroup], part_s[kMaxWarpsPerWorkgroup];
#pragma unroll
  for (int g = 0; g < kMaxWarpsPerWorkgroup; ++g) {
    const bool live = has && g < parts;
    part_m[g] = live ? wg_base[g * stride] : neg_inf_f32();
    part_s[g] = live ? wg_base[g * stride + 1] : 0.0f;
  }
  float v[kMaxWorkgroups][kMaxWarpsPerWorkgroup];
#pragma unroll
  for (int w = 0; w < kMaxWorkgroups; ++w)
#pragma unroll
    for (int g = 0; g < kMaxWarpsPerWorkgroup; ++g)
      v[w][g] = (w < nwg && g < parts) ? base[(w * parts + g) * stride + 2 + d] : 0.0f;

  // Step 4 per workgroup (lane w), then the workgroups' maximum.
  float part_c[kMaxWarpsPerWorkgroup] = {};
  float my_m = neg_inf_f32();
  float my_s = 0.0f;
  if (has) {
    if (parts == 1) {
      my_m = part_m[0];
      my_s = part_s[0];
    } else {
      my_m = part_m[0];
      for (int g = 1; g < parts; ++g) my_m = score_max(my_m, part_m[g]);
#pragma unroll
      for (int g = 0; g < kMaxWarpsPerWorkgroup; ++g) {
        part_c[g] = g < parts ? rescale_factor(part_m[g], my_m) : 0.0f;
        if (g < parts) my_s = fmaf(part_s[g], part_c[g], my_s);
      }
    }
  }
  float m_all = my_m;
  for (int off = kWarpSize / 2; off > 0; off /= 2) m_all = score_max(m_all, __shfl_xor_sync(kFullMask, m_all, off));
  const float my_c = rescale_factor(my_m, m_all);

  // Step 5: the workgroups in order, one fmaf chain for s and one per dim for o.
  float s_all = 0.0f;
  float o_all = 0.0f;
#pragma unroll
  for (int w = 0; w < kMaxWorkgroups; ++w) {
    const float cw = __shfl_sync(kFullMask, my_c, w);
    const float sw = __shfl_sync(kFullMask, my_s, w);
    float o_w = v[w][0];
    if (parts > 1) {
      o_w = 0.0f;
#pragma unroll
      for (int g = 0; g < kMaxWarpsPerWorkgroup; ++g) {
        const float cg = __shfl_sync(kFullMask, part_c[g], w);
        if (g < parts) o_w = fmaf(v[w][g], cg, o_w);
      }
    }
    if (w < nwg) {
      s_all = fmaf(sw, cw, s_all);
      o_all = fmaf(o_w, cw, o_all);
    }
  }
  p.out[head * kHeadDim + d] = o_all / s_all;
}

__global__ void __launch_bounds__(kReduceThreads) reduce_kernel(ReduceParams p) { reduce(p); }
__global__ void __launch_bounds__(kReduceThreads) reduce_kernel_indirect(const ReduceParams* pp, std::size_t stride) {
  const ReduceParams p = batch_entry(pp, stride);
  if (p.nwg <= 0) return;  // an entry without a reduce (a fused route, an empty batch slot)
  reduce(p);
}

}  // namespace

cudaError_t launch_reduce(const ReduceParams& p, const ReduceParams* dp, cudaStream_t stream, BatchSpan batch) {
  const unsigned heads = static_cast<unsigned>(p.shape.n_heads);
  if (dp == nullptr)
    reduce_kernel<<<heads, kReduceThreads, 0, stream>>>(p);
  else
    reduce_kernel_indirect<<<dim3(heads, 1, static_cast<unsigned>(batch.count)), kReduceThreads, 0, stream>>>(
        dp, batch.stride);
  return cudaGetLastError();
}

}  // namespace ladder::cuda_detail
