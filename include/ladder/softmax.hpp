// M2: the one online-softmax state, shared by every producer and reducer, CPU and GPU.
//
// Conventions (written once, used everywhere):
//  * base e; scores are already scaled: score = (q . k) * (1/sqrt(head_dim)).
//  * m = running max of the scores seen (-inf when nothing was seen),
//    s = sum exp(score - m),  o[d] = sum exp(score - m) * v[d]   (unnormalised).
//  * The output is o / s, divided exactly once, at the very end (normalize). Producers never
//    normalise: an early division would only have to be undone by the merge.
//  * Merging k states: M = max m_i; c_i = exp(m_i - M) (0 for an empty state, so an empty
//    partial is an exact identity); S = sum s_i c_i; O = sum o_i c_i, summed in index order.
//  * Every multiply-add is an explicit fmaf and exp is softmax_exp below, on CPU and GPU
//    alike; both builds turn off floating-point contraction. That makes the CPU twins able to
//    reproduce the GPU kernels' bits, not only their mathematics. One deliberate exception:
//    the GPU's default tensor-core producer (src/cuda/producer_tc.cuh) computes in-block scores
//    and weights with mma and ex2.approx; it keeps this state, its fold and merge rules and the
//    shared reducer, so it differs from the CPU twins only inside a block (a few ulp, reported
//    by `ladder parity`). The exact-DAG GPU producer (LADDER_GPU_DAG=exact) has no exception.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "ladder/hd.hpp"

namespace ladder {

// A builtin rather than numeric_limits: that one is a host-only constexpr function in CUDA.
LADDER_HD float neg_inf_f32() { return -__builtin_huge_valf(); }

LADDER_HD float bits_to_f32(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// exp(x) for x <= 0 (every softmax argument is score - max <= 0), deterministic across CPU and
// GPU: Cody–Waite reduction x = n ln2 + r, |r| <= ln2/2, then a degree-7 Taylor polynomial in
// Horner form with explicit fmaf, then scaling by 2^n through the exponent bits.
// Accuracy: relative error below 2e-7 on [-87, 0] (tested against std::exp in f64);
// returns exactly 0 below -87 (the result would be subnormal) and for -inf.
// No early return: the polynomial runs on a clamped argument and the special cases are picked
// after it, so a caller with several independent exps (a merge's factors) can overlap them. The
// early-return form compiled to a branch region per exp in the reducer's step 4, which ran its
// six exps one after another (docs/perf.md, change 50d). Same value for every input.
LADDER_HD float softmax_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;        // ln 2 split so n*kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723e-6f;
  constexpr float kMinArg = -87.0f;                    // exp(-87) ~ 1.6e-38, still normal
  const bool is_nan = x != x;                          // N1: a NaN argument stays NaN
  const bool under = !(x >= kMinArg);                  // also -inf (and NaN, picked first)
  const float arg = under ? 0.0f : (x > 0.0f ? 0.0f : x);  // callers pass score - max <= 0
  const float n = rintf(arg * kLog2e);
  float r = fmaf(-n, kLn2Hi, arg);
  r = fmaf(-n, kLn2Lo, r);
  float p = 1.0f / 5040.0f;
  p = fmaf(p, r, 1.0f / 720.0f);
  p = fmaf(p, r, 1.0f / 120.0f);
  p = fmaf(p, r, 1.0f / 24.0f);
  p = fmaf(p, r, 1.0f / 6.0f);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  const int e = static_cast<int>(n) + 127;            // n in [-126, 0]: a normal exponent
  const float value = p * bits_to_f32(static_cast<std::uint32_t>(e) << 23);
  return is_nan ? x : (under ? 0.0f : value);
}

// The one max of scores and running maxima (block max, warp and workgroup merges, reducers,
// CPU and GPU). Unlike fmaxf / std::max it never drops a NaN: a NaN score (a NaN in q or k) or
// a NaN partial max makes the result NaN, so the output turns NaN as the f64 reference's does
// instead of silently losing a token (N1). Order-free up to two things no output depends on:
// which NaN survives, and the sign of a zero maximum (every weight is exp(score - max), the
// same for either zero).
// On the GPU it is the one instruction max.NaN.f32 (sm_80 and later): the branchy form below
// doubled the comparisons in the tensor-core producer's block loop and cost 3 us per layer at
// 2,048 tokens on the H200 (docs/perf.md, N1 outcome). The two forms agree on every input up to
// the sign of a zero maximum and the payload of a NaN, neither of which reaches an output.
LADDER_HD float score_max(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
#else
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
#endif
}

// Running statistics (m, s); the accumulator o lives beside it in whatever shape the
// producer holds it (a float4 per lane on the GPU, a span on the CPU).
struct SoftmaxStats {
  float m = neg_inf_f32();
  float s = 0.0f;
};

// Factor that rescales statistics kept against max `m_old` to max `m_new` (m_new >= m_old).
// An empty state (m_old = -inf) rescales to exactly 0: it contributes nothing.
LADDER_HD float rescale_factor(float m_old, float m_new) {
  return m_old == neg_inf_f32() ? 0.0f : softmax_exp(m_old - m_new);
}

// Fold one 32-token block (the chapter's per-block step): given the block's max, rescale the
// running state once. Returns the factor the caller applies to its accumulator o.
LADDER_HD float fold_block_max(SoftmaxStats& st, float block_max) {
  const float next = score_max(st.m, block_max);
  const float corr = rescale_factor(st.m, next);
  st.s *= corr;
  st.m = next;
  return corr;
}
// The merge of parts 0 .. count-1 in index order, written once for the mergers (the CPU
// producer's and reducer's, the GPU producers' slot and pair merges, the fused kernel's,
// SoftmaxState::merge; the GPU reducer writes it out, for a measured reason given in
// reduce.cuh), so that they cannot drift from the rule above:
// M = max m_i, c_i = rescale_factor(m_i, M), S = s_i c_i summed by fmaf from 0 in index order.
// It returns (M, S) and hands each part's factor to `factor(i, c_i)`, in index order; the caller
// then weights the parts' o values with merge_add in the same order. `m(i)` and `s(i)` read part
// i. kMaxParts > 0 bounds count at compile time, for device callers whose parts live in
// registers (the loops unroll to constant indices); 0 leaves it unbounded.
// One step of a merged value's chain: acc + x c_i, the parts in index order from acc = 0.
LADDER_HD float merge_add(float acc, float x, float c) { return fmaf(x, c, acc); }

template <int kMaxParts = 0, class PartM, class PartS, class Factor>
LADDER_HD SoftmaxStats merge_stats(int count, PartM&& m, PartS&& s, Factor&& factor) {
  SoftmaxStats all;
  // The two passes' bodies, one loop form each below.
  const auto take_max = [&](int i) { all.m = score_max(all.m, m(i)); };
  const auto take_sum = [&](int i) {
    const float c = rescale_factor(m(i), all.m);
    factor(i, c);
    all.s = merge_add(all.s, s(i), c);
  };
  if constexpr (kMaxParts > 0) {
    LADDER_UNROLL
    for (int i = 0; i < kMaxParts; ++i)
      if (i < count) take_max(i);
    LADDER_UNROLL
    for (int i = 0; i < kMaxParts; ++i)
      if (i < count) take_sum(i);
  } else {
    for (int i = 0; i < count; ++i) take_max(i);
    for (int i = 0; i < count; ++i) take_sum(i);
  }
  return all;
}

// The factors of one left-fold step (fold_in): the running state's and the next part's.
struct FoldFactors {
  float run = 0.0f;
  float next = 0.0f;
};

// One step of a left fold over parts in index order: the running state (part 0 as it is, then
// each step's result) merged with the next part by merge_stats' rule for two parts. The caller
// folds its o values by the same factors: o_run = merge_add(merge_add(0, o_run, c.run), o_next,
// c.next). The GPU tensor-core path merges a workgroup's warp-slot partials this way (the
// reducer's step 4, the one-kernel form's, and a walking producer CTA that folds a whole
// workgroup, docs/perf.md change 49): a fold needs only the running state, so a producer can
// keep it in registers while it walks the slots, and every merger gives the same bits. At two
// parts it is exactly merge_stats.
LADDER_HD SoftmaxStats fold_in(const SoftmaxStats& run, const SoftmaxStats& next, FoldFactors& c) {
  const float pm[2] = {run.m, next.m};
  const float ps[2] = {run.s, next.s};
  float pc[2] = {0.0f, 0.0f};
  const SoftmaxStats all = merge_stats<2>(
      2, [&](int i) { return pm[i]; }, [&](int i) { return ps[i]; }, [&](int i, float ci) { pc[i] = ci; });
  c.run = pc[0];
  c.next = pc[1];
  return all;
}

// The o chain of one fold_in step.
LADDER_HD float fold_add(float o_run, float o_next, const FoldFactors& c) {
  return merge_add(merge_add(0.0f, o_run, c.run), o_next, c.next);
}

// Weight of one score under the current max; the caller adds it to s and w*v to o (fmaf).
LADDER_HD float score_weight(const SoftmaxStats& st, float score) { return softmax_exp(score - st.m); }

// Host-side full state with its accumulator: the reference shape used by the CPU twins'
// merge and by tests (Figure 16.2).
struct SoftmaxState {
  SoftmaxStats st;
  std::vector<float> o;

  explicit SoftmaxState(int dim = 0) : o(static_cast<std::size_t>(dim), 0.0f) {}
  // Fold a single score with its value row (one token of the running table).
  void fold(float score, const float* v);
  // Merge states in index order into one (the reducer's rule above).
  static SoftmaxState merge(const SoftmaxState* parts, int count);
  // o / s: the single final divide.
  void normalize(float* out) const;
};

}  // namespace ladder
