#include "ladder/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace ladder {

void reference_attention(const HeadShape& shape, const double* q, const double* k_rows, const double* v_rows,
                         int visible, double* out) {
  const int hd = shape.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const std::size_t row = static_cast<std::size_t>(shape.n_kv_heads) * hd;
  std::vector<double> scores(static_cast<std::size_t>(visible));
  for (int h = 0; h < shape.n_heads; ++h) {
    const int kvh = shape.kv_head_of(h);
    const double* qh = q + static_cast<std::size_t>(h) * hd;
    double m = -INFINITY;
    for (int t = 0; t < visible; ++t) {
      const double* k = k_rows + t * row + static_cast<std::size_t>(kvh) * hd;
      double dot = 0.0;
      for (int d = 0; d < hd; ++d) dot += qh[d] * k[d];
      scores[t] = dot * scale;
      // N1: the NaN-propagating max (std::max would drop a NaN score here; the NaN would still
      // reach the output through exp, but only by accident of the later arithmetic).
      if (std::isnan(scores[t]) || std::isnan(m)) {
        m = NAN;
      } else if (scores[t] > m) {
        m = scores[t];
      }
    }
    double z = 0.0;
    for (int t = 0; t < visible; ++t) {
      scores[t] = std::exp(scores[t] - m);
      z += scores[t];
    }
    double* o = out + static_cast<std::size_t>(h) * hd;
    std::fill(o, o + hd, 0.0);
    for (int t = 0; t < visible; ++t) {
      const double* v = v_rows + t * row + static_cast<std::size_t>(kvh) * hd;
      const double w = scores[t] / z;
      for (int d = 0; d < hd; ++d) o[d] += w * v[d];
    }
  }
}

double relative_error(const float* a, const double* b, std::size_t n) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += b[i] * b[i];
  }
  if (std::isnan(num)) return INFINITY;  // any NaN output fails every tolerance
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

KvWord f32_to_f16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  }
  if (absx >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (absx < 0x38800000u) {  // result is subnormal or zero
    if (absx < 0x33000000u) return static_cast<std::uint16_t>(sign);  // < half the smallest subnormal
    const std::uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(absx >> 23);  // 14 .. 24
    const std::uint32_t q = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    const std::uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
    return static_cast<std::uint16_t>(sign | r);
  }
  // normal: rebias exponent, round mantissa 23 -> 10 bits to nearest even
  std::uint32_t h = ((absx >> 13) - ((127u - 15u) << 10));
  const std::uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

float f16_to_f32(KvWord hbits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(hbits & 0x8000u) << 16;
  std::uint32_t exp = (hbits >> 10) & 0x1fu;
  std::uint32_t mant = hbits & 0x3ffu;
  std::uint32_t x;
  if (exp == 0x1fu) {
    x = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      x = sign | ((127u - 15u - static_cast<std::uint32_t>(e)) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    x = sign | ((exp + 127u - 15u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

std::int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return INT64_MAX;
  std::int32_t ia, ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  // Map the sign-magnitude bit patterns onto a monotonic integer line.
  const std::int64_t la = ia < 0 ? static_cast<std::int64_t>(INT32_MIN) - ia : ia;
  const std::int64_t lb = ib < 0 ? static_cast<std::int64_t>(INT32_MIN) - ib : ib;
  return la > lb ? la - lb : lb - la;
}

}  // namespace ladder
