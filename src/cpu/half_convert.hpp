// Bulk f16 <-> f32 conversion for the CPU twins. F16C when the build enables it (one
// instruction per 8 values), the exact portable converters of reference.hpp otherwise; both
// round to nearest even and are exact on the f16 -> f32 side, so the choice never changes a bit.
#pragma once

#include <cstdint>

#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

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

inline void floats_to_halfs(const float* src, std::uint16_t* dst, int n) {
  int i = 0;
#if defined(__F16C__)
  for (; i + kHalfVector <= n; i += kHalfVector) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
#endif
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

}  // namespace ladder::cpu::detail
