// Shared by the GPU suites: skipping without a GPU, the reduced sweep switch, ulp reporting, the
// tensor-core producer's bound against the f64 reference.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ladder/engine.hpp"
#include "ladder/reference.hpp"

namespace ladder::test {

// The tensor-core producer's relative error against the f64 reference of the stored elements
// (every GPU sweep that compares with it, not a comparison with another approximation). 1e-5 is
// the bound the project promises for the fast path, the one the CPU's fast producer is held to
// (test_producer_fast.cpp, kTightTolerance).
// q and the softmax weights are split into f16 hi + lo (relative residual ~2^-22) and K/V are
// exact f16, so the error left is f32 accumulation inside the mma (its adder aligns products and
// may truncate) plus the f32 softmax; on bf16 planes the pieces are bf16 (residual ~2^-17 per
// product, which the 128-term dot products and the normwise error average down). Measured maxima
// on the H100 (docs/bench/h100-2026-12-06-change54/suite.txt): 5.89e-07 over 510 f16 runs, 17x
// under the bound, and 3.04e-06 over 70 bf16 runs, 3.3x under (main's build the same day:
// 6.2e-07 and 3.04e-06, docs/bench/h100-2026-12-06-main/suite/suite.log).
constexpr double kTcMaxRelErr = 1e-5;

// Every GPU test starts with this: without a usable device the suite skips, it does not fail.
#define LADDER_REQUIRE_GPU()                                                                      \
  do {                                                                                          \
    if (!::ladder::cuda_available())                                                            \
      GTEST_SKIP() << "no usable CUDA device on this machine: GPU tests run on the GPU machine " \
                      "(scripts/device_run.sh)";                                                \
  } while (0)

// LADDER_GPU_SWEEP=small: the reduced sweep the compute-sanitizer runs use. It still visits every
// route and every wrap state, with fewer positions, shapes and engine tokens.
inline bool small_sweep() {
  const char* v = std::getenv("LADDER_GPU_SWEEP");
  return v != nullptr && std::strcmp(v, "small") == 0;
}

// Largest ulp distance between two outputs (0 = bit-identical).
inline std::int64_t max_ulp(const std::vector<float>& a, const std::vector<float>& b) {
  std::int64_t worst = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const std::int64_t d = ulp_distance(a[i], b[i]);
    if (d > worst) worst = d;
  }
  return worst;
}

inline bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!(x == x) || x - x != 0.0f) return false;
  return true;
}

}  // namespace ladder::test
