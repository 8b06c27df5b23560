// Shared by the GPU suites: skipping without a GPU, the reduced sweep switch, ulp reporting.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ladder/engine.hpp"
#include "ladder/reference.hpp"

namespace ladder::test {

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
