// The fast CPU producer's register-blocked micro-kernels (src/cpu/producer_fast.cpp), with no
// horizontal reduction in any hot loop:
//
//  * score_block<H>: the scores of H query heads (H <= kScoreHeads) for one sub-block of
//    kSubTokens tokens whose K rows were widened and stored transposed, kt[d][token]: per dim,
//    two K vectors (8 tokens each) and a broadcast of q[h][d] for each head feed 2 H FMAs into
//    H x 2 accumulators (6 x 2 = 12 + 2 K + 1 broadcast = 15 of the 16 ymm registers). Scores
//    come out 8 tokens per vector: s[h][t] = (sum over d in increasing order of q[h][d] k[t][d])
//    * scale, each lane one fmaf chain from 0.
//  * accumulate_block<H, DB>: o[h][d] += sum over tokens in increasing order of w[h][t] v[t][d]
//    for H heads and DB vectors of 8 dims: per token DB V loads and a broadcast of w[h][t] per
//    head (6 x 2 = 12 accumulators).
//  * score_rows_block<T, HV>: the same scores from K rows as widened, not transposed
//    (krows[t][kWideRowDims]), for T tokens and HV x 8 heads: lanes are heads. Per dim, HV
//    vectors of the transposed q (qt[d][HV x 8]) and a broadcast of k[t][d] per token feed T HV
//    FMAs into T x HV accumulators (6 x 2 or 12 x 1 = 12, + HV + 1 of the 16 registers); the
//    result is a token-major tile, which score_rows transposes 8 x 8 at a time into s. Lane h of
//    token t is score_block's fmaf chain over d (fmaf is symmetric in its factors), so the bits
//    are the same; what goes is the K transpose (8 x 8 shuffles per 8 dims of 8 tokens), which
//    the 16-lane kernels already dropped (docs/perf.md, 2026-12-01 and 2026-12-02).
//  * transpose_rows8<D>: 8 rows of 8 plane elements of dtype D widened (F16C for f16, a 16-bit
//    shift for bf16: kv_convert.hpp's widen8) and transposed into kt.
//
// Each lane of every kernel is the same chain of fmaf as the portable loops below it, so the two
// builds give the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "cpu/kv_convert.hpp"
#include "cpu/producer_fast_avx512.hpp"
#include "ladder/softmax.hpp"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define LADDER_FAST_AVX2 1
#endif

namespace ladder::cpu::detail {

inline constexpr int kLanes = 8;                 // floats per 256-bit register
inline constexpr int kSubTokens = 2 * kLanes;    // tokens per transposed K tile: two vectors
inline constexpr int kScoreHeads = 6;            // heads per score block: 6 x 2 accumulators
inline constexpr int kAccumHeads = 6;            // heads per accumulate block
inline constexpr int kAccumDimVectors = 2;       // 8-dim vectors per accumulate block: 6 x 2
// Row scores (K rows of kWideRowDims, the 16-lane kernels' stride): the head vectors they take
// (heads per KV head 8 or 16), and accumulators per block (T x HV = 12 of the 16 registers).
inline constexpr int kRowScoreMaxHeadVectors = 2;
inline constexpr int kRowScoreAccumulators = 12;

#if defined(LADDER_FAST_AVX2)
// acc[r][c] = fmaf(b[r * b_stride], vec[c], acc[r][c]) lane by lane, for r < R, c < C: one
// rank-1 step of the register-blocked kernels (a broadcast per accumulator row, C vectors shared
// by every row): accumulate_block (rows = heads, vectors = a V row's dims) and score_rows_block
// (rows = tokens, vectors = heads of q). fmaf is symmetric in its factors, so which operand is
// the broadcast does not change a bit.
template <int R, int C>
[[gnu::always_inline]] inline void rank1_step(__m256 (&acc)[R][C], const float* b, int b_stride,
                                              const __m256 (&vec)[C]) {
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    const __m256 x = _mm256_broadcast_ss(b + r * b_stride);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(x, vec[c], acc[r][c]);
  }
}
#endif

// s[h * s_stride + t] for h < H, t < kSubTokens; q rows at q + h * hd; kt = [hd][kSubTokens].
// Always inlined into its dispatch (producer_fast.cpp), where the score stride is a constant.
template <int H>
[[gnu::always_inline]] inline void score_block(const float* q, int hd, const float* kt, float scale, float* s, int s_stride) {
#if defined(LADDER_FAST_AVX2)
  __m256 acc[H][2];
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h) acc[h][0] = acc[h][1] = _mm256_setzero_ps();
  // Unrolled so the head rows' addresses are formed once per 4 dims.
#pragma GCC unroll 4
  for (int d = 0; d < hd; ++d) {
    const __m256 k0 = _mm256_load_ps(kt + d * kSubTokens);
    const __m256 k1 = _mm256_load_ps(kt + d * kSubTokens + kLanes);
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) {
      const __m256 qh = _mm256_broadcast_ss(q + h * hd + d);
      acc[h][0] = _mm256_fmadd_ps(qh, k0, acc[h][0]);
      acc[h][1] = _mm256_fmadd_ps(qh, k1, acc[h][1]);
    }
  }
  const __m256 sc = _mm256_set1_ps(scale);
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h) {
    _mm256_storeu_ps(s + h * s_stride, _mm256_mul_ps(acc[h][0], sc));
    _mm256_storeu_ps(s + h * s_stride + kLanes, _mm256_mul_ps(acc[h][1], sc));
  }
#else
  for (int h = 0; h < H; ++h)
    for (int t = 0; t < kSubTokens; ++t) {
      float a = 0.0f;
      for (int d = 0; d < hd; ++d) a = std::fmaf(q[h * hd + d], kt[d * kSubTokens + t], a);
      s[h * s_stride + t] = a * scale;
    }
#endif
}

// o[h * o_stride + j] += sum over t < n of w[h * w_stride + t] * v[t * v_stride + j], for h < H and
// j < DB * kLanes. Always inlined: with w_stride a constant the weight broadcasts of all heads
// address off one pointer.
template <int H, int DB>
[[gnu::always_inline]] inline void accumulate_block(float* o, int o_stride, const float* w, int w_stride, const float* v, int v_stride,
                             int n) {
#if defined(LADDER_FAST_AVX2)
  __m256 acc[H][DB];
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
    for (int b = 0; b < DB; ++b) acc[h][b] = _mm256_loadu_ps(o + h * o_stride + b * kLanes);
#pragma GCC unroll 4
  for (int t = 0; t < n; ++t) {
    __m256 vt[DB];
#pragma GCC unroll 4
    for (int b = 0; b < DB; ++b) vt[b] = _mm256_load_ps(v + t * v_stride + b * kLanes);
    rank1_step(acc, w + t, w_stride, vt);
  }
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
    for (int b = 0; b < DB; ++b) _mm256_storeu_ps(o + h * o_stride + b * kLanes, acc[h][b]);
#else
  for (int h = 0; h < H; ++h)
    for (int j = 0; j < DB * kLanes; ++j) {
      float a = o[h * o_stride + j];
      for (int t = 0; t < n; ++t) a = std::fmaf(w[h * w_stride + t], v[t * v_stride + j], a);
      o[h * o_stride + j] = a;
    }
#endif
}

#if defined(LADDER_FAST_AVX2)
// r[j] = column j of the 8 x 8 matrix whose rows were r[0..7] (in place): unpack pairs of rows,
// shuffle quads, then swap 128-bit halves.
[[gnu::always_inline]] inline void transpose8(__m256 (&r)[kLanes]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  constexpr int kLowPairs = 0x44;   // elements 0, 1 of each operand's 128-bit half
  constexpr int kHighPairs = 0xEE;  // elements 2, 3
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, kLowPairs), u1 = _mm256_shuffle_ps(t0, t2, kHighPairs);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, kLowPairs), u3 = _mm256_shuffle_ps(t1, t3, kHighPairs);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, kLowPairs), u5 = _mm256_shuffle_ps(t4, t6, kHighPairs);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, kLowPairs), u7 = _mm256_shuffle_ps(t5, t7, kHighPairs);
  constexpr int kLowHalves = 0x20;   // low 128 bits of each operand
  constexpr int kHighHalves = 0x31;  // high 128 bits of each operand
  r[0] = _mm256_permute2f128_ps(u0, u4, kLowHalves);
  r[1] = _mm256_permute2f128_ps(u1, u5, kLowHalves);
  r[2] = _mm256_permute2f128_ps(u2, u6, kLowHalves);
  r[3] = _mm256_permute2f128_ps(u3, u7, kLowHalves);
  r[4] = _mm256_permute2f128_ps(u0, u4, kHighHalves);
  r[5] = _mm256_permute2f128_ps(u1, u5, kHighHalves);
  r[6] = _mm256_permute2f128_ps(u2, u6, kHighHalves);
  r[7] = _mm256_permute2f128_ps(u3, u7, kHighHalves);
}

// rows[i] + d0 holds 8 elements of dtype D of token i (i < 8); writes
// kt[(d0 + j) * kSubTokens + col + i] = rows[i][d0 + j] for j < 8: the 8 x 8 block widened and
// transposed in registers.
template <KvDtype D>
inline void transpose_rows8(const KvWord* const rows[kLanes], int d0, float* kt, int col) {
  __m256 r[kLanes];
#pragma GCC unroll 8
  for (int i = 0; i < kLanes; ++i) r[i] = widen8<D>(rows[i] + d0);
  transpose8(r);
  float* at = kt + d0 * kSubTokens + col;
#pragma GCC unroll 8
  for (int j = 0; j < kLanes; ++j) _mm256_store_ps(at + j * kSubTokens, r[j]);
}

// tile[t * HV * 8 + h] = scale * sum over d < hd in increasing order of qt[d * HV * 8 + h] *
// krows[t * kWideRowDims + d], for t < T, h < HV * 8 (see the header comment).
template <int T, int HV>
[[gnu::always_inline]] inline void score_rows_block(const float* qt, int hd, const float* krows, float scale,
                                                    float* tile) {
  static_assert(T * HV <= kRowScoreAccumulators, "T x HV accumulators, HV q vectors and a broadcast in 16 registers");
  constexpr int kHeads = HV * kLanes;
  __m256 acc[T][HV];
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
    for (int v = 0; v < HV; ++v) acc[t][v] = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (int d = 0; d < hd; ++d) {
    __m256 q[HV];
#pragma GCC unroll 2
    for (int v = 0; v < HV; ++v) q[v] = _mm256_loadu_ps(qt + d * kHeads + v * kLanes);
    rank1_step(acc, krows + d, kWideRowDims, q);
  }
  const __m256 sc = _mm256_set1_ps(scale);
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
    for (int v = 0; v < HV; ++v) _mm256_store_ps(tile + t * kHeads + v * kLanes, _mm256_mul_ps(acc[t][v], sc));
}

// s[h * s_stride + t] = the scores of HV x 8 heads for the kSubTokens K rows of krows
// ([kSubTokens][kWideRowDims], widened; rows past the sub-block's tokens hold any finite values:
// their scores are never read), through tile ([kSubTokens][HV x 8], 32-byte aligned).
template <int HV>
inline void score_rows(const float* qt, int hd, const float* krows, float scale, float* tile, float* s,
                       int s_stride) {
  constexpr int kHeads = HV * kLanes;
  constexpr int kTokens = kRowScoreAccumulators / HV;
  constexpr int kFull = kSubTokens / kTokens * kTokens;
  static_assert(kSubTokens % kLanes == 0 && kFull < kSubTokens, "whole blocks, then one shorter block");
#pragma GCC unroll 2
  for (int t = 0; t < kFull; t += kTokens)
    score_rows_block<kTokens, HV>(qt, hd, krows + t * kWideRowDims, scale, tile + t * kHeads);
  score_rows_block<kSubTokens - kFull, HV>(qt, hd, krows + kFull * kWideRowDims, scale, tile + kFull * kHeads);
  for (int v = 0; v < HV; ++v)
    for (int t0 = 0; t0 < kSubTokens; t0 += kLanes) {
      __m256 r[kLanes];
#pragma GCC unroll 8
      for (int i = 0; i < kLanes; ++i) r[i] = _mm256_load_ps(tile + (t0 + i) * kHeads + v * kLanes);
      transpose8(r);
#pragma GCC unroll 8
      for (int j = 0; j < kLanes; ++j) _mm256_storeu_ps(s + (v * kLanes + j) * s_stride + t0, r[j]);
    }
}

// score_max (softmax.hpp) on 8 lanes, bit for bit: a NaN first operand wins, then a NaN second
// (maxps returns its second operand when either is NaN), else a > b ? a : b (maxps exactly).
inline __m256 score_max8(__m256 a, __m256 b) {
  return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}
#endif

// The maximum of s[0 .. count) under score_max, folded in a fixed order (8 running lanes over
// the whole vectors, lanes 0..7 in order, then the tail in order): a NaN anywhere gives NaN.
inline float chunk_max(const float* s, int count) {
  int i = 0;
  float m = s[0];
#if defined(LADDER_FAST_AVX2)
  if (count >= kLanes) {
    __m256 mv = _mm256_loadu_ps(s);
    for (i = kLanes; i + kLanes <= count; i += kLanes) mv = score_max8(mv, _mm256_loadu_ps(s + i));
    alignas(32) float lanes[kLanes];
    _mm256_store_ps(lanes, mv);
    m = lanes[0];
    for (int l = 1; l < kLanes; ++l) m = score_max(m, lanes[l]);
  } else {
    i = 1;
  }
#else
  i = 1;
#endif
  for (; i < count; ++i) m = score_max(m, s[i]);
  return m;
}

// o[0 .. n) *= factor (n a multiple of kLanes).
inline void scale_row(float* o, float factor, int n) {
#if defined(LADDER_FAST_AVX2)
  const __m256 f = _mm256_set1_ps(factor);
  for (int d = 0; d < n; d += kLanes) _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), f));
#else
  for (int d = 0; d < n; ++d) o[d] *= factor;
#endif
}

}  // namespace ladder::cpu::detail
