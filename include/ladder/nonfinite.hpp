// N1: the non-finite policy's range rule, its counters and its opt-in check (docs/nonfinite.md).
// The softmax half of the policy (score_max, a NaN argument of softmax_exp staying NaN) lives
// in softmax.hpp.
//
// The range rule: every q, k and v value a kernel reads passes through kv_range first, on every
// route and device, so all of them compute on the same inputs. R = kv_range_max(plane dtype)
// (kv_dtype.hpp): 65504, the largest finite f16, for both f16 and bf16 planes (why bf16 does not
// use its own maximum: kv_dtype.hpp, docs/nonfinite.md):
//  * a finite value within +-R is unchanged;
//  * a finite value beyond it saturates to +-R (counted: RangeStats::saturated);
//  * NaN stays NaN, and +-Inf becomes NaN (both counted: RangeStats::nonfinite).
// K and V are then rounded to the plane's dtype by the store (the interleaved route's current token is read
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
#include "ladder/kv_dtype.hpp"

namespace ladder {

// The range rule above, for one value, with bound R = range_max (kv_range_max(dtype) or
// KvTraits<D>::kRangeMax). Bit-identical to x for every finite |x| <= R.
// On the GPU it is branch-free (a clamp by the NaN-keeping max/min instructions of sm_80 and
// later, and one select): every thread of a tensor-core producer CTA passes its 64 q values
// through it in the prologue, where the branchy form below tripled the branches.
LADDER_HD float kv_range(float x, float range_max) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float c;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(c) : "f"(x), "f"(-range_max));
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(c) : "f"(c), "f"(range_max));
  const float zero_if_finite = x - x;  // NaN for NaN and +-Inf
  return zero_if_finite == 0.0f ? c : zero_if_finite;
#else
  if (x != x) return x;                  // NaN stays NaN
  if (x - x != 0.0f) return x - x;       // +-Inf: Inf - Inf is NaN
  if (x > range_max) return range_max;
  if (x < -range_max) return -range_max;
  return x;
#endif
}

// What the range rule did to the inputs of a plane or an engine: counts of values, summed over
// every q, k and v value passed to attention (and every k, v value passed to a pure append).
struct RangeStats {
  std::int64_t saturated = 0;  // finite values beyond +-R of the plane's dtype, read as +-R
  std::int64_t nonfinite = 0;  // NaN and +-Inf values, read as NaN
  RangeStats& operator+=(const RangeStats& o) {
    saturated += o.saturated;
    nonfinite += o.nonfinite;
    return *this;
  }
  bool operator==(const RangeStats&) const = default;
};

// What kv_range does to one value under bound R = range_max: the counters' classification, host
// and device alike (the CUDA device counts every call's inputs with it, src/cuda/count_inputs.cu).
enum class RangeClass : std::uint8_t { kept, saturated, nonfinite };
LADDER_HD RangeClass range_class(float x, float range_max) {
  if (x - x != 0.0f) return RangeClass::nonfinite;  // NaN - NaN and Inf - Inf are NaN
  return x > range_max || x < -range_max ? RangeClass::saturated : RangeClass::kept;
}

// Adds to `stats` what kv_range does to x[0..n) (host memory) for a plane of dtype d.
void count_range(const float* x, std::size_t n, RangeStats& stats, KvDtype d);

// The rule, then rounding to nearest even: the host's one f32 -> plane-element conversion.
KvWord kv_encode(float x, KvDtype d);
// A stored element as f32: exact for both dtypes.
float kv_decode(KvWord w, KvDtype d);
// kv_encode for f16 planes.
inline KvWord kv_to_f16(float x) { return kv_encode(x, KvDtype::f16); }

// The opt-in check (EngineOptions::check_finite, LADDER_CHECK_FINITE=1): ErrorCode::non_finite
// naming `what` and the index of the first NaN or Inf in x[0..n), ok when every value is finite.
Status check_finite(const char* what, const float* x, std::size_t n);

// Whether LADDER_CHECK_FINITE=1 is set in the environment (read once).
bool check_finite_from_env();

}  // namespace ladder
