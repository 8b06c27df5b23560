// The reducer's merge of one query head (every route's G2/G3/G4 step 5, and step 4 when the
// producer left its warp partials unmerged): a device function of 128 threads, called by the
// reduce kernel (reduce.cu, one CTA per head) and by the tensor-core producer's grid form
// (producer_tc.cuh, each CTA merging a share of the heads after a grid-wide barrier). Same code,
// same operation order, so both give the same bits. The partials are read through L2 (`ld.cg`):
// in the grid form they were written by other CTAs of the same launch, and an L1 line left by an
// earlier launch on this SM would be stale.
//
// Shape at the boundary: partials [n_heads][parts][groups][130] (m, s, o[128]); out [n_heads][128].
// A group is a workgroup (exact-DAG producers, parts 1) or a tensor-core fold group
// (schedule.hpp, tc_fold_groups: parts warp slots, or 1 where the producer folded them).
#pragma once

#include "cuda/common.cuh"
#include "ladder/heuristics.hpp"
#include "ladder/kernel_params.hpp"
#include "ladder/schedule.hpp"
#include "ladder/softmax.hpp"

namespace ladder::cuda_detail {

// 128 threads per query head, kReduceWarps warps: thread d owns output dim d (warp r: dims
// 32r..32r+31). Every o load is a coalesced 128-byte row segment, and every load of the kernel
// (statistics and o, up to kMaxWorkgroups x kMaxWarpsPerWorkgroup each) is issued before any
// value is used: one L2 round trip. Batches of 8 groups, each waiting for its loads, cost
// ~4 round trips at nsg 4 (docs/perf.md, change 11).
inline constexpr int kReduceWarps = kHeadDim / kWarpSize;
inline constexpr int kReduceThreads = kReduceWarps * kWarpSize;

// In each warp, lane w owns group w's statistics (m, s) and, for parts > 1, first folds
// that group's partials left in index order (step 4: softmax.hpp's fold_in, part 0 then
// each next one merged into the running state), exactly as a walking producer CTA that folds a
// whole group does (producer_tc.cuh, TcPartials::per_group); the o chains below are the
// same fmaf chains in the same order, dim by dim, so which thread holds a dim never changes a
// bit, and a group folded by its producer (parts = 1) gives the bits of one folded here.
//
// The o loads come in passes of kLoads values per thread (kLoads / kParts groups each), every
// load of a pass issued before any is used; the chains run on across passes in group order,
// so the pass size never changes a bit either. kLoads = kParts x 32 is one round trip
// (reduce_head_exact); fewer loads per pass hold fewer registers, so more CTAs fit an SM
// (reduce_head_lean).
//
// kParts is the entry's parts itself (the caller dispatched on p.parts, reduce_head_by_parts):
// every `g < parts` test and every offset from o_row below is a constant, and a load is one
// instruction with an immediate offset. With kParts only a bound on p.parts the compiler rebuilt
// each predicated load's 64-bit address from the kernel parameters, ~10 instructions per load
// for 128 loads: ncu on the H200 put that one-pass kernel at 1,516 instructions per warp, 2.6
// cycles each, issue-bound (docs/perf.md, 2026-12-04).
//
// kMaxGroups bounds p.groups (the caller checked it): the one-pass form's straight-line chain
// runs kMaxGroups steps, each a predicated no-op past the last group. A batch-1 launch with few
// fold groups (8 of 4 parts at 2,048) takes a bound of its own (reduce.cu): with the bound at 32
// its chain ran 24 empty steps of shuffles and folds, +0.55 us on the reducer and +8 % on the
// batch-1 layer; a branch out of the chain instead cost the deeper layers 3 % (docs/perf.md,
// change 50).
template <int kParts, int kLoads, int kMaxGroups = kMaxWorkgroups>
__device__ __forceinline__ void reduce_head_passes(const ReduceParams& p, int head) {
  static_assert(kParts >= 1 && kParts <= kMaxWarpsPerWorkgroup, "parts per group");
  static_assert(kMaxGroups >= 1 && kMaxGroups <= kMaxWorkgroups, "one lane per group");
  constexpr int kGroupsPerPass = kLoads / kParts < kMaxGroups ? kLoads / kParts : kMaxGroups;
  static_assert(kMaxGroups % kGroupsPerPass == 0, "passes tile the groups");
  if (head >= p.shape.n_heads || p.groups <= 0) return;
  const int d = static_cast<int>(threadIdx.x);
  const int lane = d % kWarpSize;
  const int stride = partial_stride(kHeadDim);
  constexpr int parts = kParts;
  const int groups = p.groups;
  const float* base = p.partials + static_cast<std::int64_t>(head) * groups * parts * stride;
  static_assert(kMaxWorkgroups <= kWarpSize, "one lane per group partial");

  // Lane w: group w's (m, s) per part; thread d: dim d of the first pass's partials. Both
  // are issued before any value is used: with one pass, the kernel's only round trip.
  const bool has = lane < groups;
  // Part g of group w is warp slot FoldGroups::slot(w, g) from the head's base (the parts
  // interleaved, schedule.hpp): part g's rows sit g x slot(0, 1) rows after part 0's, so every
  // load below is an immediate offset from one of kParts pointers.
  const FoldGroups fg{groups, parts};
  const std::int64_t part_stride = static_cast<std::int64_t>(fg.slot(0, 1)) * stride;
  const float* group_base = base + static_cast<std::int64_t>(fg.slot(has ? lane : 0, 0)) * stride;
  float part_m[kParts], part_s[kParts];
#pragma unroll
  for (int g = 0; g < kParts; ++g) {
    const bool live = has && g < parts;
    part_m[g] = live ? __ldcg(group_base + g * part_stride) : neg_inf_f32();
    part_s[g] = live ? __ldcg(group_base + g * part_stride + 1) : 0.0f;
  }
  float v[kGroupsPerPass][kParts];
  const float* o_part[kParts];  // dim d of part g of group 0
#pragma unroll
  for (int g = 0; g < kParts; ++g) o_part[g] = base + 2 + d + g * part_stride;
  const auto load_pass = [&](int w0) {
#pragma unroll
    for (int w = 0; w < kGroupsPerPass; ++w)
#pragma unroll
      for (int g = 0; g < kParts; ++g)
        v[w][g] = (w0 + w < groups && g < parts) ? __ldcg(o_part[g] + (w0 + w) * stride) : 0.0f;
  };
  load_pass(0);

  // Step 4 per group (lane w): its parts folded left in slot order (softmax.hpp, fold_in),
  // the factors of step g in fold_c[g]; then the groups' maximum.
  FoldFactors fold_c[kParts];
  SoftmaxStats group_st;
  if (has) {
    group_st = SoftmaxStats{part_m[0], part_s[0]};
#pragma unroll
    for (int g = 1; g < kParts; ++g) group_st = fold_in(group_st, SoftmaxStats{part_m[g], part_s[g]}, fold_c[g]);
  }
  const float my_m = group_st.m;
  const float my_s = group_st.s;
  float m_all = my_m;
  for (int off = kWarpSize / 2; off > 0; off /= 2) m_all = score_max(m_all, __shfl_xor_sync(kFullMask, m_all, off));
  const float my_c = rescale_factor(my_m, m_all);

  // Step 5: the groups in order, one fmaf chain for s and one per dim for o. One pass covers
  // every group when kGroupsPerPass is the cap: a constant trip count, so that form compiles to
  // straight-line code (a loop on groups there took 217 registers instead of ~170).
  float s_all = 0.0f;
  float o_all = 0.0f;
  constexpr bool kOnePass = kGroupsPerPass == kMaxGroups;
  const int passes = kOnePass ? 1 : (groups + kGroupsPerPass - 1) / kGroupsPerPass;
  for (int pass = 0; pass < passes; ++pass) {
    const int w0 = pass * kGroupsPerPass;
    if (pass > 0) load_pass(w0);
#pragma unroll
    for (int w = 0; w < kGroupsPerPass; ++w) {
      const int grp = w0 + w;
      const float cw = __shfl_sync(kFullMask, my_c, grp);
      const float sw = __shfl_sync(kFullMask, my_s, grp);
      float o_w = v[w][0];
#pragma unroll
      for (int g = 1; g < kParts; ++g) {
        const FoldFactors cg{__shfl_sync(kFullMask, fold_c[g].run, grp), __shfl_sync(kFullMask, fold_c[g].next, grp)};
        o_w = fold_add(o_w, v[w][g], cg);
      }
      if (grp < groups) {
        s_all = merge_add(s_all, sw, cw);
        o_all = merge_add(o_all, o_w, cw);
      }
    }
  }
  p.out[head * kHeadDim + d] = o_all / s_all;
}

// Loads per pass of an exact-parts instantiation: every group's parts in one pass, or
// kMaxLoads where that is fewer.
LADDER_HD constexpr int reduce_pass_loads(int parts, int max_loads) {
  return parts * kMaxWorkgroups < max_loads ? parts * kMaxWorkgroups : max_loads;
}

// reduce_head_passes for the entry's exact parts, an instantiation each, at most kMaxLoads loads
// per pass; the same bits whatever the pass size. The parts count is one of 1, 2 and 4 (nsg and
// tc_fold_groups' parts are powers of two up to kMaxWarpsPerWorkgroup, schedule.hpp), checked on the host where an entry
// is planned and where a direct launch is made (reducer_takes_parts): a fourth, bounded form for
// any other count was dead code that added ~2,300 instructions to each reducer kernel, where
// instruction fetch was the largest stall left (ncu, docs/perf.md 2026-12-04).
template <int kMaxLoads>
__device__ __forceinline__ void reduce_head_by_parts(const ReduceParams& p, int head) {
  constexpr int kAll = kMaxWarpsPerWorkgroup;
  static_assert(kAll == 4, "the parts counts dispatched below are 1, 2 and kAll");
  if (p.parts == 1)
    reduce_head_passes<1, reduce_pass_loads(1, kMaxLoads)>(p, head);
  else if (p.parts == 2)
    reduce_head_passes<2, reduce_pass_loads(2, kMaxLoads)>(p, head);
  else
    reduce_head_passes<kAll, reduce_pass_loads(kAll, kMaxLoads)>(p, head);
}

// Every load in one round trip, for every parts count (the direct and the one-pass batched
// kernels, and the grid form's merge).
__device__ __forceinline__ void reduce_head_exact(const ReduceParams& p, int head) {
  reduce_head_by_parts<kMaxWorkgroups * kMaxWarpsPerWorkgroup>(p, head);
}

// Half the loads per pass, instantiated for the entry's parts: one round trip for nsg 1 and 2,
// two for nsg 4, and registers for more CTAs per SM. For launches with more heads than the
// one-pass kernel holds at once (batched), docs/perf.md change 20.
inline constexpr int kLeanLoads = kMaxWorkgroups * kMaxWarpsPerWorkgroup / 2;
// The lean kernel's CTAs per SM, declared to ptxas (__launch_bounds__): it pays only if four fit
// (528 on the H200, one wave for a batch-16 layer's 512 heads). Left to itself ptxas once gave it
// 131 registers, which fit three.
inline constexpr int kLeanReduceCtasPerSm = 4;
__device__ __forceinline__ void reduce_head_lean(const ReduceParams& p, int head) {
  reduce_head_by_parts<kLeanLoads>(p, head);
}

}  // namespace ladder::cuda_detail
