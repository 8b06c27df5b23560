// One kernel per layer: the tensor-core producer (producer_tc.cuh's building blocks and
// per-block arithmetic) with the store and the reduce fused in, and programmatic dependent
// launch (PDL) brackets. The bits equal store + producer_tc + reduce.cu's reducer:
//
//  * Store. The current token (index Family::current(p) in the route's visiting order: visible - 1,
//    as both routes walk the window in logical order) is never read from the plane in this
//    launch: its tile row is zero-filled by the copy (source size 0) and then written with
//    D(cur_k/cur_v), the very bits the store kernel would have put in the plane. The CTA of
//    tile 0 that owns the token's block writes the plane row (one warp per KV head). So the row
//    is stored once and read as the route prescribes, with no ordering between CTAs.
//  * vec needs no pad: rows past a block's count are zero-filled by the copy, never read, so a
//    head-major plane's ragged tail is read in place (the pad copy was bit-exact, so the bits
//    are those of pad + producer).
//  * Reduce, "the last CTA to finish merges". Each CTA writes its warp-slot partial to its fixed
//    slot and arrives on its fold group's counter (arrive_last: barrier, one acq_rel atomic;
//    fold groups: schedule.hpp's tc_fold_groups, parts interleaved slots); the last of a group's
//    parts CTAs folds the group's slots in part order (step 4) into the group's part 0 and
//    arrives on the tile group's counter; the last fold group merges the groups in order (step 5)
//    and divides once. Both merges are reduce.cu's rule with its operation order (max,
//    rescale_factor, fmaf chains from 0 in index order), so the output bits do not depend on
//    which CTA arrives last: the merger reads every partial from its fixed slot in index order.
//    Counters advance with inc (limit n - 1), which wraps to 0 on the n-th arrival, so they are
//    zero again for the next launch (graph replay) with no reset pass.
//  * Speed (docs/perf.md, change 7): the final merge runs in one CTA per 16-head group and is
//    latency-bound (~10 us at nwg 32 on the H200), which makes this kernel slower than the
//    separate kernels; it is selected only by GpuFusion::fused / LADDER_GPU_FUSED=1.
//  * PDL. Everything a layer may read before the previous kernel finished — its plane rows,
//    which nothing upstream writes — is issued before griddepcontrol.wait: the first
//    kTcStages - 1 blocks per pair of warps. q, the current token's activations, the partials and
//    the counters are touched only after the wait. Without the launch attribute the wait is a
//    no-op.
//
// Shape at the boundary: q f32 [n_heads][128]; cur_k/cur_v f32 [n_kv_heads][128]; partials: the
// reducer's n_heads x nwg x nsg x 130 floats, laid out as o [n_heads][nwg * nsg][128] then (m, s)
// [n_heads][nwg * nsg][2] (part 0 of fold group j, slot j, ends holding the group's fold when its parts >
// 1); arrivals u32 [tile groups][1 + kMaxWorkgroups] (tile group = KV head x tile: [0] counts
// fold groups, [1 + w] counts fold group w's slots); out f32 [n_heads][128].
#pragma once

#include "cuda/kernels.hpp"
#include "cuda/producer_tc.cuh"

namespace ladder::cuda_detail {

// Heads of a tile each warp of the merging CTA walks (kTcHeads / warps per CTA).
inline constexpr int kMergeHeadsPerWarp = kTcHeads / (kTcThreads / kWarpSize);
static_assert(kMergeHeadsPerWarp * (kTcThreads / kWarpSize) == kTcHeads, "merge: warps x heads per warp = tile");
static_assert(kTcHeads * kMaxWorkgroups % kTcThreads == 0, "merge: (head, workgroup) items per thread");
static_assert(kMaxWorkgroups == kWarpSize, "merge: one lane per workgroup");
static_assert((3 * kMaxWorkgroups + 1) * kTcHeads <= TcPaddedSmem::kMergeAreaFloats,
              "merge statistics fit in the pair merge area");


// Loads of other CTAs' stores of this launch (after arrive_last's acquire): from L2, never a
// stale L1 line.
__device__ __forceinline__ float ld_l2(const float* p) { return __ldcg(p); }
__device__ __forceinline__ float2 ld_l2_2(const float* p) { return __ldcg(reinterpret_cast<const float2*>(p)); }
__device__ __forceinline__ float4 ld_l2_4(const float* p) { return __ldcg(reinterpret_cast<const float4*>(p)); }

// The CTA-wide "am I the last to arrive": a CTA barrier (every thread's partial stores are done),
// then one thread's acq_rel atomic at GPU scope — release for this CTA's stores (cumulative over
// the barrier), acquire for the other CTAs' stores that the merger reads next — then a barrier
// that hands the answer (and the acquire) to the whole CTA. inc with limit n - 1 wraps the
// counter to 0 on the n-th arrival. One fence-like operation per CTA: a first version fenced in
// every thread (__threadfence, sequentially consistent) before and after arriving.
__device__ __forceinline__ bool arrive_last(unsigned* counter, unsigned n, unsigned* flag) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(counter), "r"(n - 1u) : "memory");
    *flag = old == n - 1u ? 1u : 0u;
  }
  __syncthreads();
  return *flag != 0u;
}

template <class Family>
__device__ void produce_fused(const ProducerParams& p, const FusedTail& tail, KvWord* smem, unsigned* flag) {
  constexpr KvDtype D = Family::kDtype;
  const Schedule sched = p.sched;
  const int flat = static_cast<int>(blockIdx.y);
  if (flat >= sched.slots()) return;
  // The fold group this slot belongs to (tc_fold_groups: the reducer's steps 4 and 5 shape).
  const FoldGroups fg = tc_fold_groups(sched);
  const int grp = fg.group_of(flat);
  static_assert(kTcFoldSlots <= kMaxWarpsPerWorkgroup, "a group's slots fit the step-4 arrays below");
  const TcThread t = tc_thread(p.shape);
  const int lane = t.lane, pair = t.pair, half = t.half, hpk = t.hpk, kvh = t.kvh, tile = t.tile;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  // Whether this CTA folds the block holding the current token (the family says where its
  // route visits it).
  const bool cta_current = tc_owns_block(sched, flat, Family::current(p) / kBlockTokens);

  // Before the wait: this pair's first kTcStages - 1 blocks (plane rows only; the current row
  // is zero-filled by the copy and comes from the activations in the block loop).
  tc_prologue<Family, TcPaddedTile>(p, sched, flat, pair, kvh, half, lane, smem + pair * TcPaddedSmem::kSlotHalfs);
  pdl_wait();
  // The next kernel may start now: its pre-wait part reads only its own plane.
  pdl_allow_dependents();

  // The store: the tile-0 CTA owning the current token's block writes its row into the plane
  // (nobody in this launch reads it from there).
  if (tile == 0 && cta_current && threadIdx.x < kWarpSize) store_current_row<D>(p, kvh, lane);

  SoftmaxStats st[2];
  float o[kHeadDim / 16][4];
#pragma unroll
  for (int j = 0; j < kHeadDim / 16; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] = 0.0f;
  {
    TcQ q;
    tc_load_q<D, TcPaddedTile>(p, t, smem, q);
    tc_fold_slot<Family, TcPaddedTile>(p, sched, flat, t, q, smem, st, o);
  }

  __syncthreads();  // every pair is done with its tiles: the merge area reuses them

  float* merge = reinterpret_cast<float*>(smem);

  // The slot's partial: the pairs merged in pair order (producer_tc.cuh's rule), to its slot.
  const int groups = fg.groups;
  const int parts = fg.parts;
  // The fused kernel's layout of the partials scratch (the reducer's n_heads x slots x 130
  // floats, split): o rows [n_heads][slots][128], 16-byte aligned so that a warp reads one
  // coalesced 512-byte row, then (m, s) pairs [n_heads][slots][2]. Partial (head, flat slot) is
  // index head * slots + flat.
  const std::int64_t slots = static_cast<std::int64_t>(groups) * parts;
  float* const o_rows = p.partials;
  float* const ms_pairs = p.partials + static_cast<std::int64_t>(p.shape.n_heads) * slots * kHeadDim;
  tc_merge_pairs(t, st, o, merge, [&](int h, int, int d, float m_all, float s_all, float o_d, float o_d1) {
    const int head = kvh * hpk + tile * kTcHeads + h;
    const std::int64_t idx = head * slots + flat;
    if (d == 0) *reinterpret_cast<float2*>(ms_pairs + 2 * idx) = make_float2(m_all, s_all);
    *reinterpret_cast<float2*>(o_rows + idx * kHeadDim + d) = make_float2(o_d, o_d1);
  });

  if (tail.delay_ns != nullptr) debug_sleep_ns(tail.delay_ns[flat]);

  // The merges read other CTAs' partials from L2. Every load of a phase is issued before any
  // value is used: score_max and rescale_factor branch, and a load followed by a branch on its
  // value waits for it, which made a first version ~45 us slower (one L2 round trip per
  // workgroup per head, in series).
  // Item (head, 4-dim chunk): warp w walks heads w, w + 4, ..., lane = chunk.
  constexpr int kWarps = kTcThreads / kWarpSize;
  const int c = lane * kDimsPerLane;
  unsigned* counters = tail.arrivals + static_cast<std::int64_t>(blockIdx.x) * kFusedArrivalsPerGroup;
  const auto head_of = [&](int h) { return kvh * hpk + tile * kTcHeads + h; };
  const auto has_head = [&](int h) { return tile * kTcHeads + h < hpk; };
  if (parts > 1) {
    if (!arrive_last(counters + 1 + grp, static_cast<unsigned>(parts), flag)) return;
    // Step 4 for fold group grp: its parts slots folded in slot order, reduce.cuh's rule; the
    // result goes to the group's slot 0 once every thread has read its inputs.
    float pm[kMergeHeadsPerWarp][kMaxWarpsPerWorkgroup], ps[kMergeHeadsPerWarp][kMaxWarpsPerWorkgroup];
    float4 v[kMergeHeadsPerWarp][kMaxWarpsPerWorkgroup];
#pragma unroll
    for (int k = 0; k < kMergeHeadsPerWarp; ++k) {
      const int h = warp + k * kWarps;
      const std::int64_t head_idx = static_cast<std::int64_t>(head_of(h)) * slots;
#pragma unroll
      for (int g = 0; g < kMaxWarpsPerWorkgroup; ++g) {
        const bool has = has_head(h) && g < parts;
        const std::int64_t idx = head_idx + fg.slot(grp, g);
        const float2 msg = has ? ld_l2_2(ms_pairs + 2 * idx) : make_float2(neg_inf_f32(), 0.0f);
        pm[k][g] = msg.x;
        ps[k][g] = msg.y;
        v[k][g] = has ? ld_l2_4(o_rows + idx * kHeadDim + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    }
    float my_m[kMergeHeadsPerWarp], my_s[kMergeHeadsPerWarp], o_w[kMergeHeadsPerWarp][kDimsPerLane];
#pragma unroll
    for (int k = 0; k < kMergeHeadsPerWarp; ++k) {
      // Slot 0 as it is, then each next slot folded in (softmax.hpp's fold_in, as reduce.cuh).
      SoftmaxStats all{pm[k][0], ps[k][0]};
      float o4[kDimsPerLane] = {v[k][0].x, v[k][0].y, v[k][0].z, v[k][0].w};
#pragma unroll
      for (int g = 1; g < kMaxWarpsPerWorkgroup; ++g) {
        if (g >= parts) break;
        FoldFactors fc;
        all = fold_in(all, SoftmaxStats{pm[k][g], ps[k][g]}, fc);
        o4[0] = fold_add(o4[0], v[k][g].x, fc);
        o4[1] = fold_add(o4[1], v[k][g].y, fc);
        o4[2] = fold_add(o4[2], v[k][g].z, fc);
        o4[3] = fold_add(o4[3], v[k][g].w, fc);
      }
      my_m[k] = all.m;
      my_s[k] = all.s;
#pragma unroll
      for (int jj = 0; jj < kDimsPerLane; ++jj) o_w[k][jj] = o4[jj];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kMergeHeadsPerWarp; ++k) {
      const int h = warp + k * kWarps;
      if (!has_head(h)) continue;
      const std::int64_t idx0 = static_cast<std::int64_t>(head_of(h)) * slots + fg.slot(grp, 0);
      if (lane == 0) *reinterpret_cast<float2*>(ms_pairs + 2 * idx0) = make_float2(my_m[k], my_s[k]);
      *reinterpret_cast<float4*>(o_rows + idx0 * kHeadDim + c) = make_float4(o_w[k][0], o_w[k][1], o_w[k][2], o_w[k][3]);
    }
  }
  if (!arrive_last(counters, static_cast<unsigned>(groups), flag)) return;

  // Step 5: the fold groups (slot 0 of each) in order, then one divide. Phase 1: every group's
  // (m, s) of every head into shared memory (the tiles' memory, free now).
  float* sm_m = merge;                          // [kTcHeads][kMaxWorkgroups]
  float* sm_s = sm_m + kTcHeads * kMaxWorkgroups;  // [kTcHeads][kMaxWorkgroups]
  float* sm_c = sm_s + kTcHeads * kMaxWorkgroups;  // rescale factors c_w
  float* sm_sall = sm_c + kTcHeads * kMaxWorkgroups;  // [kTcHeads]
  {
    constexpr int kItems = kTcHeads * kMaxWorkgroups / kTcThreads;
    float mv[kItems], sv[kItems];
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const int i = static_cast<int>(threadIdx.x) + j * kTcThreads;
      const int h = i / kMaxWorkgroups;
      const int w = i % kMaxWorkgroups;
      const bool has = has_head(h) && w < groups;
      const float2 msw =
          has ? ld_l2_2(ms_pairs + 2 * (static_cast<std::int64_t>(head_of(h)) * slots + fg.slot(w, 0)))
              : make_float2(neg_inf_f32(), 0.0f);
      mv[j] = msw.x;
      sv[j] = msw.y;
    }
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const int i = static_cast<int>(threadIdx.x) + j * kTcThreads;
      sm_m[i] = mv[j];
      sm_s[i] = sv[j];
    }
  }
  __syncthreads();
  // Phase 2: per head, lane w holds fold group w: M = max (order-free), c_w = rescale_factor(m_w,
  // M) (0 for lanes past groups: -inf), S = fmaf chain over w in order (every lane the same chain).
  for (int h = warp; h < kTcHeads; h += kWarps) {
    const float m = sm_m[h * kMaxWorkgroups + lane];
    float m_all = m;
    for (int off = kWarpSize / 2; off > 0; off /= 2) m_all = score_max(m_all, __shfl_xor_sync(kFullMask, m_all, off));
    const float cw = lane < groups ? rescale_factor(m, m_all) : 0.0f;
    sm_c[h * kMaxWorkgroups + lane] = cw;
    __syncwarp();
    if (lane == 0) {
      // The chain in group order from shared memory (loads independent of the chain).
      float s_all = 0.0f;
#pragma unroll
      for (int w = 0; w < kMaxWorkgroups; ++w)
        if (w < groups) s_all = merge_add(s_all, sm_s[h * kMaxWorkgroups + w], sm_c[h * kMaxWorkgroups + w]);
      sm_sall[h] = s_all;
    }
  }
  __syncthreads();
  // Phase 3: o, one head per round: all groups loads in flight, then the fmaf chain in order.
#pragma unroll 1
  for (int k = 0; k < kMergeHeadsPerWarp; ++k) {
    const int h = warp + k * kWarps;
    if (!has_head(h)) continue;
    const float* base = o_rows + static_cast<std::int64_t>(head_of(h)) * slots * kHeadDim + c;
    const std::int64_t wstride = kHeadDim;  // group w's fold sits in its part 0: slot w
    float4 v[kMaxWorkgroups];
#pragma unroll
    for (int w = 0; w < kMaxWorkgroups; ++w)
      v[w] = w < groups ? ld_l2_4(base + w * wstride) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float o_all[kDimsPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < kMaxWorkgroups; ++w) {
      if (w >= groups) continue;
      const float cw = sm_c[h * kMaxWorkgroups + w];
      o_all[0] = merge_add(o_all[0], v[w].x, cw);
      o_all[1] = merge_add(o_all[1], v[w].y, cw);
      o_all[2] = merge_add(o_all[2], v[w].z, cw);
      o_all[3] = merge_add(o_all[3], v[w].w, cw);
    }
    const float s_all = sm_sall[h];
    const float4 res = make_float4(o_all[0] / s_all, o_all[1] / s_all, o_all[2] / s_all, o_all[3] / s_all);
    *reinterpret_cast<float4*>(tail.out + static_cast<std::int64_t>(head_of(h)) * kHeadDim + c) = res;
  }
}

template <class Family>
__global__ void __launch_bounds__(kTcThreads, kTcCtasPerSm) fused_tc_kernel(ProducerParams p, FusedTail tail) {
  extern __shared__ __align__(16) KvWord fused_smem[];
  __shared__ unsigned flag;
  produce_fused<Family>(p, tail, fused_smem, &flag);
}

// Graph form: the per-token structs come from device memory, read before the PDL wait unless the
// state fetch that writes them is the kernel just before (EntriesFrom).
template <class Family>
__global__ void __launch_bounds__(kTcThreads, kTcCtasPerSm) fused_tc_kernel_indirect(const ProducerParams* pp, const FusedTail* tp,
                                                                      std::size_t stride, EntriesFrom from) {
  extern __shared__ __align__(16) KvWord fused_smem[];
  __shared__ unsigned flag;
  const ProducerParams p = batch_entry_from(pp, stride, from);
  if (p.family != Family::kFamily) return;  // another family's entry of a batch
  const FusedTail tail = batch_entry(tp, stride);
  produce_fused<Family>(p, tail, fused_smem, &flag);
}

// Launches through cudaLaunchKernelEx so that `programmatic` can allow the launch to overlap the
// previous kernel in the stream (PDL; captured as a programmatic edge in a graph).
template <class Family>
cudaError_t launch_fused_tc(const ProducerParams& p, const ProducerParams* dp, const FusedTail& tail,
                            const FusedTail* dtail, bool programmatic, cudaStream_t stream, BatchSpan batch) {
  static const cudaError_t opt_in = tc_opt_in<TcPaddedTile>(fused_tc_kernel<Family>, fused_tc_kernel_indirect<Family>);
  if (opt_in != cudaSuccess) return opt_in;
  const auto x = static_cast<unsigned>(tc_groups(p.shape));
  TcLaunchAttrs attrs;
  cudaLaunchConfig_t cfg = tc_launch_config(attrs, TcPaddedSmem::kBytes, programmatic, stream);
  if (dp == nullptr) {
    if (p.sched.slots() <= 0) return cudaSuccess;
    cfg.gridDim = dim3(x, static_cast<unsigned>(p.sched.slots()));
    return cudaLaunchKernelEx(&cfg, fused_tc_kernel<Family>, p, tail);
  }
  cfg.gridDim = dim3(x, indirect_slots(batch), static_cast<unsigned>(batch.count));
  return cudaLaunchKernelEx(&cfg, fused_tc_kernel_indirect<Family>, dp, dtail, batch.stride, batch.entries);
}

}  // namespace ladder::cuda_detail
