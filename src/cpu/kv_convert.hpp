// Bulk plane-element <-> f32 conversion for the CPU twins, for either KV dtype (kv_dtype.hpp),
// with the range rule of nonfinite.hpp on the way in. f16: F16C when the build enables it (one
// instruction per 8 values), the exact portable converters of reference.hpp otherwise. bf16: a
// 16-bit shift (AVX2 when enabled, 8 values per instruction) on the way out of a plane, the
// portable round-to-nearest-even of kv_dtype.hpp on the way in. Every path rounds to nearest
// even and is exact on the element -> f32 side, so the choice never changes a bit.
#pragma once

#include <cstdint>

#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "ladder/kernel_params.hpp"
#include "ladder/kv_dtype.hpp"
#include "ladder/nonfinite.hpp"
#include "ladder/reference.hpp"

namespace ladder::cpu::detail {

// Values per vector conversion (one 256-bit register of f32).
inline constexpr int kConvertVector = 8;

#if defined(__AVX2__)
// 8 bf16 elements widened to f32: zero-extend each word to 32 bits and shift it to the top.
inline __m256 widen_bf16x8(const KvWord* src) {
  constexpr int kHalfBits = 16;
  const __m256i words = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(words, kHalfBits));
}
#endif

// One vector of 8 elements of dtype D as f32, where the build has the instructions for it
// (LADDER_KV_WIDEN8 says so): the fast producer's inner loops are templated on D through it.
#if defined(__F16C__) && defined(__AVX2__)
#define LADDER_KV_WIDEN8 1
template <KvDtype D>
inline __m256 widen8(const KvWord* src) {
  if constexpr (D == KvDtype::bf16) {
    return widen_bf16x8(src);
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  }
}
#endif

// dst[i] = the f32 value of element src[i] of dtype D, exact.
template <KvDtype D>
inline void widen_row(const KvWord* src, float* dst, int n) {
  int i = 0;
  if constexpr (D == KvDtype::bf16) {
#if defined(__AVX2__)
    for (; i + kConvertVector <= n; i += kConvertVector) _mm256_storeu_ps(dst + i, widen_bf16x8(src + i));
#endif
    for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
  } else {
#if defined(__F16C__)
    for (; i + kConvertVector <= n; i += kConvertVector) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
#endif
    for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
  }
}

// The same with the dtype chosen at run time (once per row).
inline void widen_row(const KvWord* src, float* dst, int n, KvDtype d) {
  if (d == KvDtype::bf16) {
    widen_row<KvDtype::bf16>(src, dst, n);
  } else {
    widen_row<KvDtype::f16>(src, dst, n);
  }
}

#if defined(__AVX__)
// kv_range (nonfinite.hpp) on 8 values with bound range_max, bit for bit.
inline __m256 kv_range8(__m256 x, float range_max) {
  // max(lo, x) and min(hi, y) return their second operand when either is NaN: a NaN x survives
  // the clamp, and every finite x within the range (-0.0 included) comes out unchanged.
  const __m256 clamped =
      _mm256_min_ps(_mm256_set1_ps(range_max), _mm256_max_ps(_mm256_set1_ps(-range_max), x));
  const __m256 diff = _mm256_sub_ps(x, x);  // NaN exactly for NaN and +-Inf, else 0
  return _mm256_blendv_ps(clamped, diff, _mm256_cmp_ps(diff, diff, _CMP_UNORD_Q));
}
#endif

// The store: the range rule of dtype d, then round to nearest even (N1, docs/nonfinite.md).
inline void narrow_row(const float* src, KvWord* dst, int n, KvDtype d) {
  int i = 0;
#if defined(__F16C__)
  if (d == KvDtype::f16) {
    for (; i + kConvertVector <= n; i += kConvertVector) {
      const __m256 x = kv_range8(_mm256_loadu_ps(src + i), KvTraits<KvDtype::f16>::kRangeMax);
      const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    }
  }
#endif
  // bf16 stores one row per token and layer: the scalar rounding is not on a hot path.
  for (; i < n; ++i) dst[i] = kv_encode(src[i], d);
}

// The range rule on f32 values that are read unrounded (q, the interleaved current token).
inline void floats_in_range(const float* src, float* dst, int n, float range_max) {
  for (int i = 0; i < n; ++i) dst[i] = kv_range(src[i], range_max);
}

// The interleaved route's fused store (kernel_params.hpp): the current token's f32 K/V of one KV
// head into the plane row at store_slot, as the store kernel writes it. Nothing when the
// producer has no store target.
inline void store_current_row(const ProducerParams& p, int kv_head) {
  if (p.store_k == nullptr || p.store_v == nullptr || p.store_slot < 0) return;
  const int hd = p.shape.head_dim;
  const std::int64_t at = p.rows.strides.offset(p.store_slot, kv_head);
  const std::size_t from = static_cast<std::size_t>(kv_head) * hd;
  narrow_row(p.cur_k + from, p.store_k + at, hd, p.kv_dtype);
  narrow_row(p.cur_v + from, p.store_v + at, hd, p.kv_dtype);
}

}  // namespace ladder::cpu::detail
