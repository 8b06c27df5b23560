// THE PRODUCER DAG (kernel_params.hpp) as one device template, shared by the three producer
// families (splitk.cu, vec.cu, interleaved.cu). A family only says where the t-th visible token
// lives (its `Family` policy); the arithmetic below is the same for all, so their bits can only
// differ where the policy reads different bytes.
//
// Grid: x = (KV head, chunk of G sibling query heads), y = workgroup (pinned_schedule's nwg);
// block = nsg warps. Every warp computes the DAG of G sibling heads at once: the K/V rows of
// their shared KV head are read once for all G of them (G is a schedule choice, up to 16; the
// default is in dispatch.cpp with its measurement). Each head's arithmetic is exactly the DAG's:
//  * lane l holds q/o dims 4l..4l+3 of every one of the G heads;
//  * the 5-step butterfly of step 2 is done as a reduce-scatter: at offset `off` a lane keeps
//    half of its heads and adds the partner's value for them. The value it forms for head h,
//    acc[l] + acc[l ^ off], is the butterfly's value at that lane (IEEE addition commutes), so
//    after log2(G) halving steps and 5 - log2(G) full steps every lane holds its head's score
//    with exactly the butterfly's bits, for G/5 of the shuffles;
//  * the scores of a 32-token block go through shared memory, one softmax lane per head does
//    the block max, fold and the sequential s sum, and all lanes accumulate o in token order.
#pragma once

#include "cuda/common.cuh"
#include "ladder/schedule.hpp"
#include "ladder/softmax.hpp"

namespace ladder::cuda_detail {

// Largest number of sibling heads one warp carries: 16 x (4 q + 4 o) registers per lane.
inline constexpr int kMaxHeadsPerWarp = 16;
inline constexpr int kProducerMaxThreads = kMaxWarpsPerWorkgroup * kWarpSize;

template <int G>
struct Log2Heads {
  static_assert(G == 1 || G == 2 || G == 4 || G == 8 || G == 16, "G must be a power of two <= 16");
  static constexpr int value = G == 1 ? 0 : G == 2 ? 1 : G == 4 ? 2 : G == 8 ? 3 : 4;
};

template <class Family, int G>
__device__ __forceinline__ void produce(const ProducerParams& p) {
  constexpr int kLog2G = Log2Heads<G>::value;
  constexpr int kLog2Warp = 5;  // log2(kWarpSize): the butterfly's 5 steps
  constexpr int kLanesPerHead = kWarpSize / G;
  // Per warp: the block's scores, then (in place) its weights, token-major [t][head].
  __shared__ float sh_w[kMaxWarpsPerWorkgroup][kBlockTokens * G];
  __shared__ float sh_corr[kMaxWarpsPerWorkgroup][G];
  __shared__ float sh_max[kMaxWarpsPerWorkgroup][G];
  // Per warp end state for the workgroup merge (step 4).
  __shared__ float sh_m[kMaxWarpsPerWorkgroup][G];
  __shared__ float sh_s[kMaxWarpsPerWorkgroup][G];
  __shared__ __align__(16) float sh_o[kMaxWarpsPerWorkgroup][G][kHeadDim];

  const Schedule sched = p.sched;
  const int wg = static_cast<int>(blockIdx.y);
  // Worst-case grids (graph replay) carry more workgroups than this token needs.
  if (wg >= sched.nwg) return;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int hpk = p.shape.heads_per_kv();
  const int chunks = hpk / G;
  const int kvh = static_cast<int>(blockIdx.x) / chunks;
  const int chunk = static_cast<int>(blockIdx.x) % chunks;
  const int head0 = kvh * hpk + chunk * G;
  const int d0 = lane * kDimsPerLane;

  if constexpr (Family::kCurrentRow == CurrentRow::split) {
    // One warp per KV head also stores the current token's row into the plane. Nobody
    // reads that row from the plane in this launch: every workgroup takes it from cur_k/cur_v.
    if (chunk == 0 && wg == 0 && warp == 0) store_current_row<Family::kDtype>(p, kvh, lane);
  }

  if (warp < sched.nsg) {
    float q[G][kDimsPerLane];
    float o[G][kDimsPerLane];
#pragma unroll
    for (int h = 0; h < G; ++h) {
      const Float4 qh = in_range4<Family::kDtype>(load_float4(p.q + (head0 + h) * kHeadDim + d0));
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) {
        q[h][i] = qh.x[i];
        o[h][i] = 0.0f;
      }
    }
    SoftmaxStats st;  // lanes 0..G-1: the running (m, s) of head head0 + lane
    const int my_head = lane >> (kLog2Warp - kLog2G);
    const bool score_writer = (lane & (kLanesPerHead - 1)) == 0;
    float* w = sh_w[warp];
    const float scale = p.shape.scale;

    for (int b = sched.first_block(wg, warp); b < sched.blocks; b += sched.block_stride()) {
      const int first = b * kBlockTokens;
      const int count = min(kBlockTokens, p.visible - first);
      // Lane t locates token t of the block once; tokens past the block end repeat its last
      // token so every load stays inside the rows the block owns (their scores are unused).
      const int my_loc = Family::locate(p, first + min(lane, count - 1));

      // All 32 K rows of the block are loaded before any is used (one round trip to memory
      // per block instead of one per token); the V rows are requested as soon as the scores
      // are done, so their latency hides behind the softmax steps.
      RawRow kraw[kBlockTokens];
#pragma unroll
      for (int t = 0; t < kBlockTokens; ++t) kraw[t] = Family::load_k_raw(p, __shfl_sync(kFullMask, my_loc, t), kvh, d0);

      // Step 2: scores.
#pragma unroll
      for (int t = 0; t < kBlockTokens; ++t) {
        const int loc = __shfl_sync(kFullMask, my_loc, t);
        const Float4 k = Family::widen_k(p, kraw[t], loc, kvh, d0);
        float acc[G];
#pragma unroll
        for (int h = 0; h < G; ++h) {
          float a = 0.0f;
#pragma unroll
          for (int i = 0; i < kDimsPerLane; ++i) a = fmaf(q[h][i], k.x[i], a);
          acc[h] = a;
        }
#pragma unroll
        for (int step = 0; step < kLog2G; ++step) {
          const int half = G >> (step + 1);
          const int off = (kWarpSize / 2) >> step;
          const bool upper = (lane & off) != 0;
#pragma unroll
          for (int j = 0; j < G / 2; ++j) {
            if (j < half) {
              const float send = upper ? acc[j] : acc[j + half];
              const float keep = upper ? acc[j + half] : acc[j];
              acc[j] = keep + __shfl_xor_sync(kFullMask, send, off);
            }
          }
        }
#pragma unroll
        for (int step = kLog2G; step < kLog2Warp; ++step) {
          const int off = (kWarpSize / 2) >> step;
          acc[0] = acc[0] + __shfl_xor_sync(kFullMask, acc[0], off);
        }
        if (score_writer) w[t * G + my_head] = acc[0] * scale;
      }
      RawRow vraw[kBlockTokens];
#pragma unroll
      for (int t = 0; t < kBlockTokens; ++t) vraw[t] = Family::load_v_raw(p, __shfl_sync(kFullMask, my_loc, t), kvh, d0);
      __syncwarp();

      // Step 3: block max and fold, one lane per head.
      if (lane < G) {
        float block_max = w[lane];
        for (int t = 1; t < count; ++t) block_max = score_max(block_max, w[t * G + lane]);
        sh_corr[warp][lane] = fold_block_max(st, block_max);
        sh_max[warp][lane] = st.m;
      }
      __syncwarp();
      for (int i = lane; i < count * G; i += kWarpSize) {
        SoftmaxStats head_stats;
        head_stats.m = sh_max[warp][i % G];
        w[i] = score_weight(head_stats, w[i]);
      }
      __syncwarp();
      if (lane < G) {
        for (int t = 0; t < count; ++t) st.s += w[t * G + lane];
      }
#pragma unroll
      for (int h = 0; h < G; ++h) {
        const float corr = sh_corr[warp][h];
#pragma unroll
        for (int i = 0; i < kDimsPerLane; ++i) o[h][i] *= corr;
      }
#pragma unroll
      for (int t = 0; t < kBlockTokens; ++t) {
        if (t < count) {
          const Float4 v = Family::widen_v(p, vraw[t], __shfl_sync(kFullMask, my_loc, t), kvh, d0);
#pragma unroll
          for (int h = 0; h < G; ++h) {
            const float wt = w[t * G + h];
#pragma unroll
            for (int i = 0; i < kDimsPerLane; ++i) o[h][i] = fmaf(wt, v.x[i], o[h][i]);
          }
        }
      }
      __syncwarp();
    }

    if (lane < G) {
      sh_m[warp][lane] = st.m;
      sh_s[warp][lane] = st.s;
    }
#pragma unroll
    for (int h = 0; h < G; ++h)
      *reinterpret_cast<float4*>(&sh_o[warp][h][d0]) = make_float4(o[h][0], o[h][1], o[h][2], o[h][3]);
  }
  __syncthreads();

  // Step 4: merge the warps in warp order; one thread per (head, 4-dim chunk).
  const int stride = partial_stride(kHeadDim);
  for (int i = static_cast<int>(threadIdx.x); i < G * kWarpSize; i += static_cast<int>(blockDim.x)) {
    const int h = i / kWarpSize;
    const int c = (i % kWarpSize) * kDimsPerLane;
    float o_all[kDimsPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
    const SoftmaxStats all = merge_stats(
        sched.nsg, [&](int g) { return sh_m[g][h]; }, [&](int g) { return sh_s[g][h]; },
        [&](int g, float cg) {
#pragma unroll
          for (int j = 0; j < kDimsPerLane; ++j) o_all[j] = merge_add(o_all[j], sh_o[g][h][c + j], cg);
        });
    // A partial is 2 + 128 floats, so only 8-byte alignment holds for its o part.
    float* dst = p.partials + (static_cast<std::int64_t>(head0 + h) * sched.nwg + wg) * stride;
    if (c == 0) *reinterpret_cast<float2*>(dst) = make_float2(all.m, all.s);
    *reinterpret_cast<float2*>(dst + 2 + c) = make_float2(o_all[0], o_all[1]);
    *reinterpret_cast<float2*>(dst + 2 + c + 2) = make_float2(o_all[2], o_all[3]);
  }
}

template <class Family, int G>
__global__ void __launch_bounds__(kProducerMaxThreads) producer_kernel(ProducerParams p) {
  produce<Family, G>(p);
}

// Graph-replay form: the same DAG, its one parameter struct read from device memory that a
// captured copy refreshes every token; launched with the worst-case grid.
template <class Family, int G>
__global__ void __launch_bounds__(kProducerMaxThreads) producer_kernel_indirect(const ProducerParams* pp,
                                                                               std::size_t stride) {
  const ProducerParams p = batch_entry(pp, stride);
  if (p.family != Family::kFamily) return;  // another family's entry of a batch
  produce<Family, G>(p);
}

template <class Family, int G>
cudaError_t launch_producer_g(const ProducerParams& p, const ProducerParams* dp, const HeadShape& shape,
                              cudaStream_t stream, BatchSpan batch) {
  const unsigned chunks = static_cast<unsigned>(shape.n_kv_heads * (shape.heads_per_kv() / G));
  if (dp == nullptr) {
    if (p.sched.nwg <= 0) return cudaSuccess;
    const dim3 grid(chunks, static_cast<unsigned>(p.sched.nwg));
    producer_kernel<Family, G><<<grid, static_cast<unsigned>(p.sched.nsg * kWarpSize), 0, stream>>>(p);
  } else {
    const dim3 grid(chunks, indirect_workgroups(batch), static_cast<unsigned>(batch.count));
    producer_kernel_indirect<Family, G><<<grid, static_cast<unsigned>(kProducerMaxThreads), 0, stream>>>(dp,
                                                                                                      batch.stride);
  }
  return cudaGetLastError();
}

// heads_per_warp is already a power of two dividing heads_per_kv (see dispatch).
template <class Family>
cudaError_t launch_producer(const ProducerParams& p, const ProducerParams* dp, const HeadShape& shape,
                            int heads_per_warp, cudaStream_t stream, BatchSpan batch) {
  switch (heads_per_warp) {
    case 1: return launch_producer_g<Family, 1>(p, dp, shape, stream, batch);
    case 2: return launch_producer_g<Family, 2>(p, dp, shape, stream, batch);
    case 4: return launch_producer_g<Family, 4>(p, dp, shape, stream, batch);
    case 8: return launch_producer_g<Family, 8>(p, dp, shape, stream, batch);
    case 16: return launch_producer_g<Family, 16>(p, dp, shape, stream, batch);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace ladder::cuda_detail
