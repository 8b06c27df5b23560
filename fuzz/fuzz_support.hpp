// What the C++ fuzz targets share: a reader over the fuzzer's bytes, the deterministic token
// values the checkers re-create, the f64 reference over those values and the comparison of an
// output with it (NaN pattern first, then the relative error of the rest).
#pragma once

#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ladder/kernel_params.hpp"
#include "ladder/reference.hpp"

namespace ladder::fuzz {

// Reads the input front to back; past the end every read is 0, so any prefix is a whole input.
class Bytes {
 public:
  Bytes(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  std::uint8_t next() { return i_ < n_ ? d_[i_++] : 0; }
  int u16() { return next() | (next() << 8); }  // little-endian, as fuzz/make_corpus.py writes
  int range(int lo, int hi) { return lo + next() % (hi - lo + 1); }

 private:
  const std::uint8_t* d_;
  std::size_t n_;
  std::size_t i_ = 0;
};

[[noreturn]] inline void fail(const char* fmt, ...) {
  std::va_list args;
  va_start(args, fmt);
  std::fputs("fuzz check failed: ", stderr);
  std::vfprintf(stderr, fmt, args);
  std::fputc('\n', stderr);
  va_end(args);
  std::abort();
}

// Which stream a value belongs to, so that K, V and Q of one token differ.
enum class Stream : std::uint32_t { q = 7, k = 1, v = 2 };

// Element e of `stream` of token `position` in `layer`: in (-1, 1) and never zero (the hash is
// mapped to odd multiples of 1/1024), times `amplitude`.
inline float token_value(int position, int e, Stream stream, int layer, float amplitude) {
  std::uint32_t h = static_cast<std::uint32_t>(position) * 2654435761u;
  h ^= static_cast<std::uint32_t>(e) * 40503u + static_cast<std::uint32_t>(stream) * 97u;
  h ^= static_cast<std::uint32_t>(layer) * 2246822519u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  const float unit = (static_cast<float>(h % 1024u) * 2.0f + 1.0f) / 1024.0f - 1.0f;
  return unit * amplitude;
}

inline double f16_rounded(float x) { return f16_to_f32(f32_to_f16(x)); }

// One value of one token replaced by a non-finite or out-of-f16-range value. Off unless
// LADDER_FUZZ_NONFINITE=1: the library's non-finite policy (issue 12, item 1) is being written,
// and until it lands a NaN in K is dropped silently, which this check reports at once.
struct Poke {
  int position = -1;
  int layer = 0;
  int e = 0;
  Stream stream = Stream::k;
  float value = 0.0f;
};

inline bool nonfinite_enabled() {
  static const bool on = [] {
    const char* s = std::getenv("LADDER_FUZZ_NONFINITE");
    return s != nullptr && s[0] == '1';
  }();
  return on;
}

// The poke an input asks for (4 bytes), or none when the mode is off or the first byte says no.
// The caller folds position and e into the geometry's ranges.
inline Poke read_poke(Bytes& in) {
  static constexpr float kSpecial[] = {NAN, INFINITY, -INFINITY, 1.0e5f, -7.0e4f};
  Poke p;
  const int what = in.next();
  const int position = in.u16();
  const int e = in.next();
  if (!nonfinite_enabled() || what % 2 == 0) return p;
  p.position = position;
  p.e = e;
  p.stream = (what / 2) % 3 == 0 ? Stream::q : (what / 2) % 3 == 1 ? Stream::k : Stream::v;
  p.value = kSpecial[(what / 6) % (sizeof kSpecial / sizeof kSpecial[0])];
  return p;
}

// token_value with the poke applied (the poke's layer is matched too).
inline float poked_value(const Poke& p, int position, int e, Stream stream, int layer, float amplitude) {
  if (position == p.position && e == p.e && stream == p.stream && layer == p.layer) return p.value;
  return token_value(position, e, stream, layer, amplitude);
}

// Relative error bound for f16 KV against the f64 reference (SPEC P3). The inputs keep
// |q| <= 2 and |k| < 1, so a score sums head_dim products of magnitude < 2 scaled by
// 1/sqrt(head_dim): |score| < 2 sqrt(head_dim) <= 32 at head_dim 256, and the f32 dot product
// and exp errors it induces stay near 1e-5 in practice, two orders of magnitude inside the bound.
constexpr double kRelTol = 2e-3;

// out (f32, the library's) against ref (f64): element i is NaN in out exactly when it is NaN in
// ref, an infinite element equals ref exactly, and the relative error (P3 metric) over the
// remaining elements is below kRelTol.
inline void expect_matches(const float* out, const double* ref, std::size_t n, const char* what) {
  std::vector<float> out_finite;
  std::vector<double> ref_finite;
  for (std::size_t i = 0; i < n; ++i) {
    const bool out_nan = std::isnan(out[i]);
    if (out_nan != std::isnan(ref[i]))
      fail("%s: element %zu is %g, the reference %g (NaN in one only)", what, i, out[i], ref[i]);
    if (out_nan) continue;
    if (std::isinf(ref[i]) || std::isinf(out[i])) {
      if (static_cast<double>(out[i]) != ref[i]) fail("%s: element %zu is %g, the reference %g", what, i, out[i], ref[i]);
      continue;
    }
    out_finite.push_back(out[i]);
    ref_finite.push_back(ref[i]);
  }
  const double err = relative_error(out_finite.data(), ref_finite.data(), out_finite.size());
  if (!(err < kRelTol)) fail("%s: relative error %g against the f64 reference (bound %g)", what, err, kRelTol);
}

}  // namespace ladder::fuzz
