// The KV element type seam. Every KV plane (host or device) stores 16-bit words, one per
// element; what a word means is the plane's KvDtype (PlaneConfig::kv_dtype, carried by the
// geometry): IEEE binary16 (f16, the default) or bfloat16 (bf16, the upper half of an f32).
// Everything that reads or writes plane elements goes through this header: the word type, the
// name and parse of a dtype, its element size, the bound of the N1 range rule (nonfinite.hpp) and the bf16 conversions, which are exact bit arithmetic and compile for the
// host and the CUDA kernels alike. The f16 conversions are the host's f32_to_f16/f16_to_f32
// (reference.hpp) and the CUDA half intrinsics (src/cuda/common.cuh).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "ladder/errors.hpp"
#include "ladder/hd.hpp"

namespace ladder {

// One stored KV element, whatever its dtype: a plane is two arrays of these (K and V).
using KvWord = std::uint16_t;

enum class KvDtype : std::uint8_t { f16, bf16 };

// "f16" / "bf16"; "invalid" for a value outside the enum.
const char* kv_dtype_name(KvDtype d);
// invalid_argument naming the accepted values for anything else.
Result<KvDtype> parse_kv_dtype(std::string_view name);
// Whether d is one of the enumerators (a cast integer may not be).
constexpr bool kv_dtype_valid(KvDtype d) { return d == KvDtype::f16 || d == KvDtype::bf16; }
// Bytes per stored element: both dtypes are 16-bit.
constexpr int kv_dtype_bytes(KvDtype) { return static_cast<int>(sizeof(KvWord)); }

// The largest finite value of each dtype.
inline constexpr float kF16Max = 65504.0f;             // 0x7bff
inline constexpr float kBf16Max = 3.38953139e38f;      // 0x7f7f: f32 0x7f7f0000, exactly
// The range rule's bound R (nonfinite.hpp) is a property of the attention inputs, not of the
// storage: +-65504 for both dtypes. bf16's own maximum would let a finite q.k overflow f32 in
// every producer (the f64 reference would not), and any bound large enough to matter leaves f32's
// score rounding (6e-8 x |score|) above the O(1) score differences the softmax is decided by, so
// routes summing in different orders would disagree (docs/nonfinite.md). A narrower future dtype
// (an fp8) would set a smaller bound here: every kernel reads it through KvTraits/kv_range_max.
inline constexpr float kKvRangeMax = kF16Max;
// Unwritten plane rows hold a quiet NaN of the plane's dtype (plane.cpp, device planes).
inline constexpr KvWord kF16QuietNaN = 0x7e00;
inline constexpr KvWord kBf16QuietNaN = 0x7fc0;

template <KvDtype D>
struct KvTraits;
template <>
struct KvTraits<KvDtype::f16> {
  static constexpr float kRangeMax = kKvRangeMax;
  static constexpr KvWord kQuietNaN = kF16QuietNaN;
};
template <>
struct KvTraits<KvDtype::bf16> {
  static constexpr float kRangeMax = kKvRangeMax;
  static constexpr KvWord kQuietNaN = kBf16QuietNaN;
};

LADDER_HD float kv_range_max(KvDtype d) {
  return d == KvDtype::bf16 ? KvTraits<KvDtype::bf16>::kRangeMax : KvTraits<KvDtype::f16>::kRangeMax;
}
LADDER_HD KvWord kv_quiet_nan(KvDtype d) { return d == KvDtype::bf16 ? kBf16QuietNaN : kF16QuietNaN; }

namespace kv_detail {
LADDER_HD std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
LADDER_HD float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}
}  // namespace kv_detail

// bf16 -> f32: exact (a bf16 is the upper 16 bits of an f32).
LADDER_HD float bf16_to_f32(KvWord h) { return kv_detail::bits_float(static_cast<std::uint32_t>(h) << 16); }

// f32 -> bf16, round to nearest even; a NaN stays a NaN (made quiet, sign kept), +-Inf stays
// +-Inf, and a finite value that rounds past the largest finite bf16 becomes +-Inf (IEEE). The
// store applies the range rule first (kv_encode), so the last case never reaches a plane.
LADDER_HD KvWord f32_to_bf16(float x) {
  const std::uint32_t u = kv_detail::float_bits(x);
  constexpr std::uint32_t kAbs = 0x7fffffffu, kInf = 0x7f800000u, kQuietBit = 0x00400000u;
  if ((u & kAbs) > kInf) return static_cast<KvWord>((u | kQuietBit) >> 16);
  // Adding 0x7fff plus the kept word's lowest bit rounds the dropped half to nearest even; a
  // carry out of the mantissa correctly bumps the exponent (up to Inf).
  constexpr std::uint32_t kHalfMinusOne = 0x7fffu;
  const std::uint32_t rounded = u + kHalfMinusOne + ((u >> 16) & 1u);
  return static_cast<KvWord>(rounded >> 16);
}

}  // namespace ladder
