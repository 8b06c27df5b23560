// The fast CPU producer's register-blocked micro-kernels (src/cpu/producer_fast.cpp), with no
// horizontal reduction in any hot loop:
//
//  * score_tokens<T, HV>: the scores of T tokens (T <= kScoreTokens) of a sub-block against a
//    group of up to 16 sibling query heads held transposed, qt[d][head] (HV vectors of 8 heads):
//    per dim, HV q vectors and a broadcast of each token's widened K element feed T HV FMAs into
//    T x HV accumulators (6 x 2 = 12 + 2 q + 1 broadcast = 15 of the 16 ymm registers). Scores
//    come out 8 heads per vector: s[t][h] = (sum over d in increasing order of q[h][d] k[t][d])
//    * scale, each lane one fmaf chain from 0. K rows are read as they are widened, so K needs
//    no transpose (transposing every K element cost ~3 shuffles each: docs/perf.md, 2026-12-01).
//  * accumulate_block<H, DB>: o[h][d] += sum over tokens in increasing order of w[h][t] v[t][d]
//    for H heads and DB vectors of 8 dims: per token DB V loads and a broadcast of w[h][t] per
//    head (6 x 2 = 12 accumulators).
//  * transpose8: an 8 x 8 tile of scores turned from [token][head] into [head][token] (4 per
//    16 x 16 sub-block and head group, instead of the K tile's 32).
//
// Each lane of every kernel is the same chain of fmaf as the portable loops below it, so the two
// builds give the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "cpu/kv_convert.hpp"
#include "ladder/softmax.hpp"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define LADDER_FAST_AVX2 1
#endif

namespace ladder::cpu::detail {

inline constexpr int kLanes = 8;                 // floats per 256-bit register
inline constexpr int kSubTokens = 2 * kLanes;    // tokens per sub-block: two vectors of scores
inline constexpr int kScoreTokens = 6;           // tokens per score block: 6 x 2 accumulators
inline constexpr int kScoreHeadVectors = 2;      // head vectors per score group
inline constexpr int kScoreGroupHeads = kScoreHeadVectors * kLanes;  // 16 sibling heads per group
inline constexpr int kAccumHeads = 6;            // heads per accumulate block
inline constexpr int kAccumDimVectors = 2;       // 8-dim vectors per accumulate block: 6 x 2

// s[t * s_stride + j] for t < T, j < HV * kLanes; qt = [hd][kScoreGroupHeads] (heads past the
// group's count are zero columns); K rows at k + t * k_stride, widened. Always inlined into its
// dispatch (producer_fast.cpp).
template <int T, int HV>
[[gnu::always_inline]] inline void score_tokens(const float* qt, int hd, const float* k, int k_stride, float scale,
                                                float* s, int s_stride) {
#if defined(LADDER_FAST_AVX2)
  __m256 acc[T][HV];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
    for (int v = 0; v < HV; ++v) acc[t][v] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int d = 0; d < hd; ++d) {
    __m256 q[HV];
#pragma GCC unroll 2
    for (int v = 0; v < HV; ++v) q[v] = _mm256_load_ps(qt + d * kScoreGroupHeads + v * kLanes);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 kt = _mm256_broadcast_ss(k + t * k_stride + d);
#pragma GCC unroll 2
      for (int v = 0; v < HV; ++v) acc[t][v] = _mm256_fmadd_ps(q[v], kt, acc[t][v]);
    }
  }
  const __m256 sc = _mm256_set1_ps(scale);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
    for (int v = 0; v < HV; ++v) _mm256_storeu_ps(s + t * s_stride + v * kLanes, _mm256_mul_ps(acc[t][v], sc));
#else
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < HV * kLanes; ++j) {
      float a = 0.0f;
      for (int d = 0; d < hd; ++d) a = std::fmaf(qt[d * kScoreGroupHeads + j], k[t * k_stride + d], a);
      s[t * s_stride + j] = a * scale;
    }
#endif
}

// dst[j * dst_stride + i] = src[i * src_stride + j] for i < 8 and j < rows (rows <= 8).
inline void transpose8(const float* src, int src_stride, float* dst, int dst_stride, int rows) {
#if defined(LADDER_FAST_AVX2)
  __m256 r[kLanes];
#pragma GCC unroll 8
  for (int i = 0; i < kLanes; ++i) r[i] = _mm256_loadu_ps(src + i * src_stride);
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
  const __m256 out[kLanes] = {_mm256_permute2f128_ps(u0, u4, kLowHalves), _mm256_permute2f128_ps(u1, u5, kLowHalves),
                              _mm256_permute2f128_ps(u2, u6, kLowHalves), _mm256_permute2f128_ps(u3, u7, kLowHalves),
                              _mm256_permute2f128_ps(u0, u4, kHighHalves), _mm256_permute2f128_ps(u1, u5, kHighHalves),
                              _mm256_permute2f128_ps(u2, u6, kHighHalves), _mm256_permute2f128_ps(u3, u7, kHighHalves)};
  for (int j = 0; j < rows; ++j) _mm256_storeu_ps(dst + j * dst_stride, out[j]);
#else
  for (int j = 0; j < rows; ++j)
    for (int i = 0; i < kLanes; ++i) dst[j * dst_stride + i] = src[i * src_stride + j];
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
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) {
      const __m256 wh = _mm256_broadcast_ss(w + h * w_stride + t);
#pragma GCC unroll 4
      for (int b = 0; b < DB; ++b) acc[h][b] = _mm256_fmadd_ps(wh, vt[b], acc[h][b]);
    }
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
