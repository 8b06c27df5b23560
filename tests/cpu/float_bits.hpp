// Special floats and bit views shared by the CPU tests of the range rule and the KV dtypes.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

namespace ladder::test {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

// A float's IEEE-754 bits.
inline std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

}  // namespace ladder::test
