// The fast CPU producer's 16-lane micro-kernels (see producer_fast_avx512.hpp). Shapes: a score
// block is up to 16 heads x 16 tokens, one register per head (16 accumulators, one K vector, one
// broadcast: 18 of 32 registers); an accumulate block is up to 8 heads x 32 dims (16
// accumulators, two V vectors, one broadcast), the last dims of a row masked.
#include "cpu/producer_fast_avx512.hpp"

#include <cmath>

#include "ladder/heuristics.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define LADDER_AVX512_KERNELS 1
#endif

namespace ladder::cpu::detail {

#if defined(LADDER_AVX512_KERNELS)
namespace {

constexpr int kLanes16 = 16;           // floats per 512-bit register
constexpr int kSubTokens16 = 16;       // tokens per transposed K tile: one register
constexpr int kScoreHeads16 = 16;      // heads per score block
constexpr int kAccumHeads16 = 8;       // heads per accumulate block
constexpr int kAccumVectors16 = 2;     // 16-dim vectors per accumulate block
constexpr int kHalfLanes = 8;          // a row's last dims may be one 8-dim half vector
constexpr __mmask16 kAllLanes = 0xFFFF;
constexpr __mmask16 kLowHalf = 0x00FF;

// qt: the block's first head of a [hd][qt_stride] transposed q.
template <int H>
__attribute__((target("avx512f"))) void score_block16(const float* qt, int qt_stride, int hd, const float* kt,
                                                     float scale, float* s) {
  __m512 acc[H];
#pragma GCC unroll 16
  for (int h = 0; h < H; ++h) acc[h] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int d = 0; d < hd; ++d) {
    const __m512 k = _mm512_loadu_ps(kt + d * kSubTokens16);
    const float* qd = qt + d * qt_stride;
#pragma GCC unroll 16
    for (int h = 0; h < H; ++h) acc[h] = _mm512_fmadd_ps(_mm512_set1_ps(qd[h]), k, acc[h]);
  }
  const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 16
  for (int h = 0; h < H; ++h) _mm512_storeu_ps(s + h * kFastChunkTokens, _mm512_mul_ps(acc[h], sc));
}

// DB 16-dim vectors of H heads; the last vector's lanes are `last` (a row's 8-dim tail).
template <int H, int DB>
__attribute__((target("avx512f"))) void accumulate_block16(float* o, int o_stride, const float* w, const float* v,
                                                          int v_stride, int n, __mmask16 last) {
  __m512 acc[H][DB];
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 2
    for (int b = 0; b < DB; ++b)
      acc[h][b] = _mm512_maskz_loadu_ps(b == DB - 1 ? last : kAllLanes, o + h * o_stride + b * kLanes16);
#pragma GCC unroll 2
  for (int t = 0; t < n; ++t) {
    __m512 vt[DB];
#pragma GCC unroll 2
    for (int b = 0; b < DB; ++b)
      vt[b] = _mm512_maskz_loadu_ps(b == DB - 1 ? last : kAllLanes, v + t * v_stride + b * kLanes16);
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) {
      const __m512 wh = _mm512_set1_ps(w[h * kFastChunkTokens + t]);
#pragma GCC unroll 2
      for (int b = 0; b < DB; ++b) acc[h][b] = _mm512_fmadd_ps(wh, vt[b], acc[h][b]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 2
    for (int b = 0; b < DB; ++b)
      _mm512_mask_storeu_ps(o + h * o_stride + b * kLanes16, b == DB - 1 ? last : kAllLanes, acc[h][b]);
}

// score_block16 for 1 .. 16 heads, chosen at run time.
template <int H = kScoreHeads16>
void score_dispatch(int heads, const float* qt, int qt_stride, int hd, const float* kt, float scale, float* s) {
  if constexpr (H >= 1) {
    if (heads == H) return score_block16<H>(qt, qt_stride, hd, kt, scale, s);
    return score_dispatch<H - 1>(heads, qt, qt_stride, hd, kt, scale, s);
  }
}

template <int DB, int H = kAccumHeads16>
void accumulate_dispatch(int heads, float* o, int o_stride, const float* w, const float* v, int v_stride, int n,
                         __mmask16 last) {
  if constexpr (H >= 1) {
    if (heads == H) return accumulate_block16<H, DB>(o, o_stride, w, v, v_stride, n, last);
    return accumulate_dispatch<DB, H - 1>(heads, o, o_stride, w, v, v_stride, n, last);
  }
}

}  // namespace

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

void score_heads_avx512(int heads, const float* qt, int hd, const float* kt, float scale, float* s) {
  for (int h = 0; h < heads; h += kScoreHeads16) {
    const int block = heads - h < kScoreHeads16 ? heads - h : kScoreHeads16;
    score_dispatch(block, qt + h, heads, hd, kt, scale, s + h * kFastChunkTokens);
  }
}

void accumulate_heads_avx512(int heads, int dims, float* o, int o_stride, const float* w, const float* v, int v_stride,
                             int n) {
  for (int h = 0; h < heads; h += kAccumHeads16) {
    const int block = heads - h < kAccumHeads16 ? heads - h : kAccumHeads16;
    float* oh = o + h * o_stride;
    const float* wh = w + h * kFastChunkTokens;
    int d = 0;
    for (; d + kAccumVectors16 * kLanes16 <= dims; d += kAccumVectors16 * kLanes16)
      accumulate_dispatch<kAccumVectors16>(block, oh + d, o_stride, wh, v + d, v_stride, n, kAllLanes);
    // What is left: one full vector and/or an 8-dim half (dims is a multiple of 8).
    for (; d < dims; d += kLanes16) {
      const __mmask16 last = dims - d >= kLanes16 ? kAllLanes : kLowHalf;
      accumulate_dispatch<1>(block, oh + d, o_stride, wh, v + d, v_stride, n, last);
    }
  }
  static_assert(kSubTokens16 == kLanes16 && kHalfLanes * 2 == kLanes16, "a K tile is one register; tails are halves");
}

#else

bool cpu_has_avx512() { return false; }
void score_heads_avx512(int, const float*, int, const float*, float, float*) {}
void accumulate_heads_avx512(int, int, float*, int, const float*, const float*, int, int) {}

#endif

}  // namespace ladder::cpu::detail
