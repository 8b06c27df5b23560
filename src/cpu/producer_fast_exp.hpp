// softmax_exp (include/ladder/softmax.hpp) on 8 floats at once, for the fast CPU producer.
// The same operations in the same order as the scalar function — one rounding multiply, round
// to nearest even, the two-part Cody–Waite reduction and the degree-7 Horner chain with fused
// multiply-adds, then scaling by 2^n through the exponent bits — so every element is bit for
// bit the scalar result (tests/cpu/test_producer_fast.cpp sweeps it), including the special
// cases: a NaN argument stays NaN, arguments below -87 (and -inf) give exactly 0, positive
// arguments are clamped to 0.
#pragma once

namespace ladder::cpu::detail {

// softmax_exp's constants, for the vector forms (8 lanes here, 16 in producer_fast_avx512.cpp).
struct ExpConstants {
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kLn2Hi = 0.693145751953125f;
  static constexpr float kLn2Lo = 1.42860682030941723e-6f;
  static constexpr float kMinArg = -87.0f;
  static constexpr int kExponentBias = 127;
  static constexpr int kMantissaBits = 23;
  // The Horner chain's coefficients, highest degree first: p = c[0], then p = fmaf(p, r, c[k]).
  static constexpr int kTerms = 8;
  static constexpr float kHorner[kTerms] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                                            1.0f / 6.0f,    0.5f,           1.0f,           1.0f};
};

}  // namespace ladder::cpu::detail

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "ladder/softmax.hpp"

namespace ladder::cpu::detail {

inline __m256 softmax_exp8(__m256 x) {
  using C = ExpConstants;
  constexpr float kLog2e = C::kLog2e, kLn2Hi = C::kLn2Hi, kLn2Lo = C::kLn2Lo, kMinArg = C::kMinArg;
  constexpr int kExponentBias = C::kExponentBias, kMantissaBits = C::kMantissaBits;
  const __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 too_small = _mm256_cmp_ps(x, _mm256_set1_ps(kMinArg), _CMP_NGE_UQ);  // also NaN, -inf
  const __m256 xc = _mm256_min_ps(x, _mm256_setzero_ps());
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), xc);  // fmaf(-n, hi, x): negation is exact
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(C::kHorner[0]);
#pragma GCC unroll 8
  for (int k = 1; k < C::kTerms; ++k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(C::kHorner[k]));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(kExponentBias)),
                                      kMantissaBits);
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), too_small);
  return _mm256_blendv_ps(y, x, is_nan);
}

}  // namespace ladder::cpu::detail

#endif
