// Bulk f16 <-> f32 conversion for the CPU twins, with the range rule of nonfinite.hpp on the way in. F16C when the build enables it (one
// instruction per 8 values), the exact portable converters of reference.hpp otherwise; both
// round to nearest even and are exact on the f16 -> f32 side, so the choice never changes a bit.
#pragma once

#include <cstdint>

#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "ladder/kernel_params.hpp"
#include "ladder/nonfinite.hpp"
#include "ladder/reference.hpp"

namespace ladder::cpu::detail {

// Values per F16C conversion (one 256-bit register of f32).
inline constexpr int kHalfVector = 8;

inline void halfs_to_floats(const std::uint16_t* src, float* dst, int n) {
  int i = 0;
#if defined(__F16C__)
  for (; i + kHalfVector <= n; i += kHalfVector) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

#if defined(__F16C__)
// kv_range (nonfinite.hpp) on 8 values, bit for bit.
inline __m256 kv_range8(__m256 x) {
  // max(lo, x) and min(hi, y) return their second operand when either is NaN: a NaN x survives
  // the clamp, and every finite x within the range (-0.0 included) comes out unchanged.
  const __m256 clamped =
      _mm256_min_ps(_mm256_set1_ps(kKvRangeMax), _mm256_max_ps(_mm256_set1_ps(-kKvRangeMax), x));
  const __m256 diff = _mm256_sub_ps(x, x);  // NaN exactly for NaN and +-Inf, else 0
  return _mm256_blendv_ps(clamped, diff, _mm256_cmp_ps(diff, diff, _CMP_UNORD_Q));
}
#endif

// The store: the range rule, then round to nearest even (N1, docs/nonfinite.md).
inline void floats_to_halfs(const float* src, std::uint16_t* dst, int n) {
  int i = 0;
#if defined(__F16C__)
  for (; i + kHalfVector <= n; i += kHalfVector) {
    const __m256 x = kv_range8(_mm256_loadu_ps(src + i));
    const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
#endif
  for (; i < n; ++i) dst[i] = kv_to_f16(src[i]);
}

// The range rule on f32 values that are read unrounded (q, the interleaved current token).
inline void floats_in_range(const float* src, float* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = kv_range(src[i]);
}

// The interleaved route's fused store (kernel_params.hpp): the current token's f32 K/V of one KV
// head into the plane row at store_slot, as the store kernel writes it. Nothing when the
// producer has no store target.
inline void store_current_row(const ProducerParams& p, int kv_head) {
  if (p.store_k == nullptr || p.store_v == nullptr || p.store_slot < 0) return;
  const int hd = p.shape.head_dim;
  const std::int64_t at = p.rows.strides.offset(p.store_slot, kv_head);
  const std::size_t from = static_cast<std::size_t>(kv_head) * hd;
  floats_to_halfs(p.cur_k + from, p.store_k + at, hd);
  floats_to_halfs(p.cur_v + from, p.store_v + at, hd);
}

}  // namespace ladder::cpu::detail
