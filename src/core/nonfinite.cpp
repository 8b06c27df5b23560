#include "ladder/nonfinite.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

#include "ladder/reference.hpp"

namespace ladder {

void count_range(const float* x, std::size_t n, RangeStats& stats, KvDtype d) {
  const float range_max = kv_range_max(d);
  for (std::size_t i = 0; i < n; ++i) {
    switch (range_class(x[i], range_max)) {
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
