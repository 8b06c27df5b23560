// N1: the non-finite policy's range rule, its counters and its opt-in check (docs/nonfinite.md).
// The softmax half of the policy (score_max, a NaN argument of softmax_exp staying NaN) lives
// in softmax.hpp.
//
// The range rule: every q, k and v value a kernel reads passes through kv_range first, on every
// route and device, so all of them compute on the same inputs:
//  * a finite value within +-65504 (the f16 range of the KV planes) is unchanged;
//  * a finite value beyond it saturates to +-65504 (counted: RangeStats::saturated);
//  * NaN stays NaN, and +-Inf becomes NaN (both counted: RangeStats::nonfinite).
// K and V are then rounded to f16 by the store (the interleaved route's current token is read
// in f32 after the rule, never rounded). Why Inf becomes NaN and why q obeys the KV range: the
// default GPU producer splits q, K, V and the weights into f16 hi + lo pairs for its tensor-core
// products, where an Inf or a value beyond 65504 turns into NaN or a sign that depends on a
// rounding residual; with the rule, every route reads the same finite values or a NaN, and a NaN
// reaches every output it touches (IEEE propagation, identical to the f64 reference's).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ladder/errors.hpp"
#include "ladder/hd.hpp"

namespace ladder {

// The largest finite f16 value: the range of the KV planes and of every attention input.
inline constexpr float kKvRangeMax = 65504.0f;

// The range rule above, for one value. Bit-identical to x for every finite |x| <= 65504.
// On the GPU it is branch-free (a clamp by the NaN-keeping max/min instructions of sm_80 and
// later, and one select): every thread of a tensor-core producer CTA passes its 64 q values
// through it in the prologue, where the branchy form below tripled the branches.
LADDER_HD float kv_range(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float c;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(c) : "f"(x), "f"(-kKvRangeMax));
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(c) : "f"(c), "f"(kKvRangeMax));
  const float zero_if_finite = x - x;  // NaN for NaN and +-Inf
  return zero_if_finite == 0.0f ? c : zero_if_finite;
#else
  if (x != x) return x;                  // NaN stays NaN
  if (x - x != 0.0f) return x - x;       // +-Inf: Inf - Inf is NaN
  if (x > kKvRangeMax) return kKvRangeMax;
  if (x < -kKvRangeMax) return -kKvRangeMax;
  return x;
#endif
}

// What the range rule did to the inputs of a plane or an engine: counts of values, summed over
// every q, k and v value passed to attention (and every k, v value passed to a pure append).
struct RangeStats {
  std::int64_t saturated = 0;  // finite values beyond +-65504, read as +-65504
  std::int64_t nonfinite = 0;  // NaN and +-Inf values, read as NaN
  RangeStats& operator+=(const RangeStats& o) {
    saturated += o.saturated;
    nonfinite += o.nonfinite;
    return *this;
  }
  bool operator==(const RangeStats&) const = default;
};

// What kv_range does to one value: the counters' classification, host and device alike (the
// CUDA device counts inputs that live in device memory with it, src/cuda/count_inputs.cu).
enum class RangeClass : std::uint8_t { kept, saturated, nonfinite };
LADDER_HD RangeClass range_class(float x) {
  if (x - x != 0.0f) return RangeClass::nonfinite;  // NaN - NaN and Inf - Inf are NaN
  return x > kKvRangeMax || x < -kKvRangeMax ? RangeClass::saturated : RangeClass::kept;
}

// Adds to `stats` what kv_range does to x[0..n) (host memory).
void count_range(const float* x, std::size_t n, RangeStats& stats);

// The rule, then f16 rounding to nearest even: the host's one f32 -> plane-element conversion.
std::uint16_t kv_to_f16(float x);

// The opt-in check (EngineOptions::check_finite, LADDER_CHECK_FINITE=1): ErrorCode::non_finite
// naming `what` and the index of the first NaN or Inf in x[0..n), ok when every value is finite.
Status check_finite(const char* what, const float* x, std::size_t n);

// Whether LADDER_CHECK_FINITE=1 is set in the environment (read once).
bool check_finite_from_env();

}  // namespace ladder
