#include "ladder/nonfinite.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <fmt/format.h>

#include "ladder/reference.hpp"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace ladder {

void count_range(const float* x, std::size_t n, RangeStats& stats, KvDtype d) {
  const float bound = kv_range_max(d);
  std::size_t i = 0;
#if defined(__AVX2__)
  // Eight values per step on their magnitude bits (sign cleared), as integers: a magnitude above
  // the largest finite float's is NaN or Inf, one above the bound's (and finite) saturates. The
  // same counts as range_class in the scalar loop below; the engine counts every q, k and v of
  // every layer of a step, ~240k values for Muse Glimmer, on the calling thread.
  static_assert(sizeof(float) == sizeof(std::int32_t));
  std::int32_t largest_finite = 0;
  std::int32_t range_max = 0;
  {
    const float big = std::numeric_limits<float>::max();
    std::memcpy(&largest_finite, &big, sizeof big);
    std::memcpy(&range_max, &bound, sizeof range_max);
  }
  const __m256i magnitude = _mm256_set1_epi32(std::numeric_limits<std::int32_t>::max());
  const __m256i finite_top = _mm256_set1_epi32(largest_finite);
  const __m256i range_top = _mm256_set1_epi32(range_max);
  constexpr std::size_t kLanes = 8;
  std::int64_t nonfinite = 0;
  std::int64_t saturated = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256i bits = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), magnitude);
    const __m256i bad = _mm256_cmpgt_epi32(bits, finite_top);
    const __m256i beyond = _mm256_andnot_si256(bad, _mm256_cmpgt_epi32(bits, range_top));
    nonfinite += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(bad))));
    saturated += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(beyond))));
  }
  stats.nonfinite += nonfinite;
  stats.saturated += saturated;
#endif
  for (; i < n; ++i) {
    switch (range_class(x[i], bound)) {
      case RangeClass::kept: break;
      case RangeClass::saturated: ++stats.saturated; break;
      case RangeClass::nonfinite: ++stats.nonfinite; break;
    }
  }
}

KvWord kv_encode(float x, KvDtype d) {
  const float ruled = kv_range(x, kv_range_max(d));
  return d == KvDtype::bf16 ? f32_to_bf16(ruled) : f32_to_f16(ruled);
}

float kv_decode(KvWord w, KvDtype d) { return d == KvDtype::bf16 ? bf16_to_f32(w) : f16_to_f32(w); }

Status check_finite(const char* what, const float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]))
      return make_error(ErrorCode::non_finite,
                        fmt::format("{}[{}] is {} (the finite check is on: nothing was appended)", what, i,
                                    std::isnan(x[i]) ? "NaN" : (x[i] > 0.0f ? "+Inf" : "-Inf")));
  }
  return {};
}

bool check_finite_from_env() {
  static const bool on = [] {
    const char* v = std::getenv("LADDER_CHECK_FINITE");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

}  // namespace ladder
