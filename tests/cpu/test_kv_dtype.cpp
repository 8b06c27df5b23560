// The KV dtype seam (kv_dtype.hpp) on the CPU: names and parse, the geometry's and the plane's
// dtype, the bf16 conversions against an independent rounding oracle, bf16's range rule (N1)
// and its vector forms, and the error bf16 storage adds against the f64 attention of the
// unrounded inputs, derived below and compared with f16's. Every route on bf16 planes against the
// reference of the stored elements is in test_cpu_routes.cpp (the sweep runs each case on both
// dtypes), the twins' bit parity in test_cpu_parity.cpp, the engine in test_engine.cpp and the
// non-finite sweep in test_nonfinite.cpp.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/kv_convert.hpp"
#include "cpu_twin_helpers.hpp"
#include "ladder/kv_dtype.hpp"
#include "ladder/nonfinite.hpp"
#include "cpu/float_bits.hpp"

namespace ladder {
namespace {

using test::bits;
using test::kInf;
using test::kNaN;
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
bool bf16_is_nan(KvWord w) { return (w & 0x7f80u) == 0x7f80u && (w & 0x7fu) != 0; }

TEST(KvDtype, NamesParseAndSizes) {
  EXPECT_STREQ(kv_dtype_name(KvDtype::f16), "f16");
  EXPECT_STREQ(kv_dtype_name(KvDtype::bf16), "bf16");
  EXPECT_EQ(parse_kv_dtype("f16").value(), KvDtype::f16);
  EXPECT_EQ(parse_kv_dtype("bf16").value(), KvDtype::bf16);
  for (const char* bad : {"", "fp16", "BF16", "bfloat16", "f32", "bf16 "}) {
    const Result<KvDtype> r = parse_kv_dtype(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
    EXPECT_NE(r.status().message().find("use f16 (the default) or bf16"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(kv_dtype_bytes(KvDtype::f16), 2);
  EXPECT_EQ(kv_dtype_bytes(KvDtype::bf16), 2);
}

TEST(KvDtype, GeometryAndPlaneCarryIt) {
  Geometry g = Geometry::muse_glimmer();
  EXPECT_EQ(g.kv_dtype, KvDtype::f16);  // the default
  // 2 planes x 2 KV heads x 128 dims x 2 bytes, for either 16-bit dtype.
  constexpr std::int64_t kMuseKvBytes = 2 * 2 * 128 * 2;
  EXPECT_EQ(g.kv_bytes_per_token_layer(), kMuseKvBytes);
  g.kv_dtype = KvDtype::bf16;
  EXPECT_EQ(g.kv_bytes_per_token_layer(), kMuseKvBytes);
  EXPECT_TRUE(g.validate().ok());
  EXPECT_NE(g.describe().find("KV bf16"), std::string::npos) << g.describe();
  for (LayerClass c : {LayerClass::swa, LayerClass::nope}) {
    const PlaneConfig cfg = PlaneConfig::for_layer(g, c);
    EXPECT_EQ(cfg.kv_dtype, KvDtype::bf16);
    EXPECT_EQ(cfg.array_bytes(10).value(), std::int64_t{10} * 2 * 128 * 2);
  }
  Geometry bad = g;
  bad.kv_dtype = static_cast<KvDtype>(7);
  EXPECT_EQ(bad.validate().code(), ErrorCode::invalid_argument);
  PlaneConfig pc = PlaneConfig::for_layer(g, LayerClass::swa);
  pc.kv_dtype = static_cast<KvDtype>(7);
  EXPECT_EQ(HostPlane::create(pc).status().code(), ErrorCode::invalid_argument);
}

// Unwritten rows of a bf16 plane are a bf16 NaN (read as NaN), and write_row stores the rule's
// rounding of each value.
TEST(KvDtype, Bf16PlanePoisonAndWriteRow) {
  const PlaneConfig cfg = test::growing_config(2, 8, 4, 64, KvDtype::bf16);
  HostPlane p = HostPlane::create(cfg).value();
  for (std::size_t i = 0; i < p.elements(); ++i) EXPECT_TRUE(std::isnan(kv_decode(p.k()[i], KvDtype::bf16)));
  std::mt19937 rng(3);
  std::vector<float> k = test::random_values(16, rng), v = test::random_values(16, rng);
  k[3] = 7e4f;   // beyond the rule's bound: saturates to 65504, stored as bf16 65536
  v[5] = kInf;   // becomes NaN
  ASSERT_TRUE(p.append_row(0, k.data(), v.data()).ok());
  const PlaneStrides s = p.strides();
  for (int h = 0; h < 2; ++h)
    for (int d = 0; d < 8; ++d) {
      const std::int64_t at = s.offset(0, h) + d;
      EXPECT_EQ(p.k()[at], f32_to_bf16(kv_range(k[h * 8 + d], kKvRangeMax)));
      EXPECT_EQ(p.v()[at], kv_encode(v[h * 8 + d], KvDtype::bf16));
    }
  EXPECT_EQ(p.k()[s.offset(0, 0) + 3], 0x4780);  // 65536
  EXPECT_TRUE(bf16_is_nan(p.v()[s.offset(0, 0) + 5]));
  EXPECT_EQ(p.range_stats().saturated, 1);
  EXPECT_EQ(p.range_stats().nonfinite, 1);
}

// bf16 -> f32 -> bf16 is the identity on every non-NaN word; a NaN word stays a NaN.
TEST(Bf16Convert, EveryWordRoundTrips) {
  for (std::uint32_t w = 0; w <= 0xffffu; ++w) {
    const KvWord word = static_cast<KvWord>(w);
    const float f = bf16_to_f32(word);
    EXPECT_EQ(bits(f), w << 16);
    if (bf16_is_nan(word)) {
      EXPECT_TRUE(bf16_is_nan(f32_to_bf16(f))) << w;
    } else {
      ASSERT_EQ(f32_to_bf16(f), word) << w;
    }
  }
}

// f32 -> bf16 against an oracle written from the definition: of the two bf16 values around x
// (truncation and one step away from zero) take the nearer in f64, a tie to the even word.
KvWord bf16_oracle(float x) {
  const std::uint32_t u = bits(x);
  const KvWord lo = static_cast<KvWord>(u >> 16);
  const KvWord hi = static_cast<KvWord>(lo + 1);
  const double dlo = std::fabs(static_cast<double>(x) - bf16_to_f32(lo));
  const double dhi = std::fabs(static_cast<double>(bf16_to_f32(hi)) - x);
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1u) == 0 ? lo : hi;
}

TEST(Bf16Convert, RoundsToNearestEven) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<std::uint32_t> any;
  int checked = 0, ties = 0;
  constexpr std::uint32_t kLargestFiniteBf16Bits = 0x7f7f0000u;
  for (int i = 0; i < 400000; ++i) {
    std::uint32_t u = any(rng);
    if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u;  // an exact tie
    const float x = from_bits(u);
    // Finite and not past the largest finite bf16 (those round to Inf: checked below).
    if (!std::isfinite(x) || (u & 0x7fffffffu) > kLargestFiniteBf16Bits) continue;
    ASSERT_EQ(f32_to_bf16(x), bf16_oracle(x)) << std::hexfloat << x;
    ++checked;
    ties += (u & 0xffffu) == 0x8000u;
  }
  EXPECT_GT(checked, 300000);
  EXPECT_GT(ties, 50000);
  EXPECT_EQ(f32_to_bf16(1.0f + 1.0f / 256.0f), 0x3f80);  // tie to even (down)
  EXPECT_EQ(f32_to_bf16(1.0f + 3.0f / 256.0f), 0x3f82);  // tie to even (up)
  EXPECT_EQ(f32_to_bf16(kInf), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-kInf), 0xff80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // IEEE overflow, without the rule
  EXPECT_EQ(f32_to_bf16(kBf16Max), 0x7f7f);
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16(kNaN)));
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16(from_bits(0x7f800001u))));  // a NaN whose payload is all dropped bits
  EXPECT_EQ(f32_to_bf16(from_bits(0xff800001u)) & 0x8000u, 0x8000u);  // the sign is kept
}

// N1 for bf16 planes: the bound is 65504 as for f16 (kv_dtype.hpp says why); the stored value is
// then rounded to bf16, so saturated values read as 65536; NaN and +-Inf become NaN; the counters
// count exactly what they count for f16.
TEST(Bf16RangeRule, SaturatesToTheBoundNaNStaysInfBecomesNaN) {
  EXPECT_EQ(kv_range_max(KvDtype::bf16), kKvRangeMax);
  EXPECT_EQ(kv_range_max(KvDtype::f16), kKvRangeMax);
  EXPECT_EQ(kv_encode(7e4f, KvDtype::bf16), 0x4780);
  EXPECT_EQ(kv_encode(-7e4f, KvDtype::bf16), 0xc780);
  EXPECT_EQ(kv_encode(std::numeric_limits<float>::max(), KvDtype::bf16), 0x4780);
  EXPECT_EQ(kv_encode(1e30f, KvDtype::bf16), 0x4780);
  EXPECT_EQ(kv_encode(65504.0f, KvDtype::bf16), 0x4780);  // in range, and rounds up to 65536
  EXPECT_EQ(kv_encode(1.0f, KvDtype::bf16), 0x3f80);
  for (float x : {kNaN, kInf, -kInf}) EXPECT_TRUE(bf16_is_nan(kv_encode(x, KvDtype::bf16))) << x;
  const std::vector<float> x = {1.0f, 7e4f, kNaN, -kInf, -7e4f, 65504.0f, 2.0f, 1e30f};
  RangeStats f16, bf16;
  count_range(x.data(), x.size(), f16, KvDtype::f16);
  count_range(x.data(), x.size(), bf16, KvDtype::bf16);
  EXPECT_EQ(bf16.saturated, 3);
  EXPECT_EQ(bf16.nonfinite, 2);
  EXPECT_EQ(bf16, f16);
}

// The bulk forms (AVX2 where built) against the scalar rule, every lane position.
TEST(Bf16RangeRule, BulkStoreAndWidenMatchTheScalarForms) {
  const std::vector<float> specials = {kNaN, kInf, -kInf, 7e4f, -7e4f, 65504.0f, 1.0f + 1.0f / 256.0f,
                                       -0.0f, 0.0f, 1.0f, -3.5f, 1e-40f, std::numeric_limits<float>::max()};
  constexpr int kN = 37;  // four vectors of 8 and a scalar tail
  for (float sp : specials) {
    for (int lane = 0; lane < kN; ++lane) {
      std::vector<float> src(kN, 0.25f);
      src[static_cast<std::size_t>(lane)] = sp;
      std::vector<KvWord> dst(kN, 0);
      cpu::detail::narrow_row(src.data(), dst.data(), kN, KvDtype::bf16);
      const KvWord want = kv_encode(sp, KvDtype::bf16);
      const KvWord got = dst[static_cast<std::size_t>(lane)];
      if (bf16_is_nan(want)) {
        EXPECT_TRUE(bf16_is_nan(got)) << sp << " lane " << lane;
      } else {
        EXPECT_EQ(got, want) << sp << " lane " << lane;
      }
    }
  }
  std::vector<KvWord> words(0x10000);
  for (std::uint32_t w = 0; w <= 0xffffu; ++w) words[w] = static_cast<KvWord>(w);
  std::vector<float> wide(words.size());
  cpu::detail::widen_row<KvDtype::bf16>(words.data(), wide.data(), static_cast<int>(words.size()));
  for (std::uint32_t w = 0; w <= 0xffffu; ++w) ASSERT_EQ(bits(wide[w]), w << 16) << w;
}

// ---- the error bf16 storage adds -------------------------------------------------------------
//
// Against the f64 attention of the UNROUNDED f32 inputs, a route's output error is the storage
// rounding's effect plus the kernel's own f32 arithmetic. Rounding to nearest gives each stored
// element |k' - k| <= u|k| and |v' - v| <= u|v|, with u = 2^-8 for bf16 (8 significant bits) and
// 2^-11 for f16 (11 bits). For head h, write Delta = u * scale * max_t sum_d |q_d| |k_td| (a bound on
// every score's change). Every weight then moves by a factor within [e^-2Delta, e^2Delta], so
//   |w'_t - w_t| <= w_t (e^(2 Delta) - 1),
// and for every output element d, with V = max over visible t of |v_td|,
//   |out'_d - out_d| <= sum_t |w'_t - w_t| |v'_td| + sum_t w_t |v'_td - v_td|
//                    <= (e^(2 Delta) - 1)(1 + u) V + u V.
// The kernel's own error against the f64 reference of the stored elements is under 1e-5 of the
// output's norm (test_cpu_routes.cpp's tight bound), so each element also gets that much.
// The bound is rigorous and loose (it adds |q||k| where the rounding errors cancel in sign); the
// test also shows bf16's measured error is several times f16's on the same inputs.
constexpr double kUnitRoundoffBf16 = 0x1p-8;
constexpr double kUnitRoundoffF16 = 0x1p-11;
constexpr double kKernelRelative = 1e-5;  // test_cpu_routes.cpp: kTightTolerance

struct Unrounded {
  std::vector<std::vector<float>> k, v;  // [position][n_kv_heads * head_dim]
};

// Worst ratio of |error| to the bound above over every output element; and the P3 norm error.
struct BoundCheck {
  double worst_ratio = 0.0;
  double norm_error = 0.0;
};

BoundCheck check_against_unrounded(const HeadShape& s, const std::vector<float>& q, const Unrounded& h, int first,
                                   int visible, const std::vector<float>& out, double u) {
  const int hd = s.head_dim;
  const std::size_t row = static_cast<std::size_t>(s.n_kv_heads) * hd;
  std::vector<double> kd(row * visible), vd(row * visible), qd(q.begin(), q.end()), ref(q.size());
  for (int t = 0; t < visible; ++t)
    for (std::size_t i = 0; i < row; ++i) {
      kd[t * row + i] = h.k[static_cast<std::size_t>(first + t)][i];
      vd[t * row + i] = h.v[static_cast<std::size_t>(first + t)][i];
    }
  reference_attention(s, qd.data(), kd.data(), vd.data(), visible, ref.data());
  BoundCheck r;
  r.norm_error = relative_error(out.data(), ref.data(), ref.size());
  double ref_norm = 0.0;
  for (double x : ref) ref_norm += x * x;
  const double kernel_slack = kKernelRelative * std::sqrt(ref_norm);
  for (int head = 0; head < s.n_heads; ++head) {
    const int kvh = s.kv_head_of(head);
    double max_dot = 0.0, vmax = 0.0;
    for (int t = 0; t < visible; ++t) {
      double dot = 0.0;
      for (int d = 0; d < hd; ++d) {
        dot += std::fabs(qd[static_cast<std::size_t>(head) * hd + d]) * std::fabs(kd[t * row + kvh * hd + d]);
        vmax = std::max(vmax, std::fabs(vd[t * row + kvh * hd + d]));
      }
      max_dot = std::max(max_dot, dot);
    }
    const double delta = u * s.scale * max_dot;
    const double bound = std::expm1(2.0 * delta) * (1.0 + u) * vmax + u * vmax + kernel_slack;
    for (int d = 0; d < hd; ++d) {
      const std::size_t i = static_cast<std::size_t>(head) * hd + d;
      r.worst_ratio = std::max(r.worst_ratio, std::fabs(out[i] - ref[i]) / bound);
    }
  }
  return r;
}

TEST(KvDtypeError, Bf16AgainstUnroundedInputsIsWithinItsBoundAndAboveF16s) {
  const HeadShape shape = test::make_shape(32, 2, 128);
  struct PlaneCase {
    const char* name;
    PlaneConfig (*make)(KvDtype);
    int position;
  };
  const PlaneCase cases[] = {
      {"ring w256 partially wrapped", [](KvDtype d) { return test::ring_config(2, 128, 256, 280, 4096, d); }, 700},
      {"growing ragged", [](KvDtype d) { return test::growing_config(2, 128, 64, 4096, d); }, 1000},
  };
  double worst_ratio[2] = {0.0, 0.0};
  for (const PlaneCase& c : cases) {
    std::mt19937 rng(41);
    Unrounded h;
    const std::size_t row = 2 * 128;
    for (int p = 0; p <= c.position; ++p) {
      h.k.push_back(test::random_values(row, rng));
      h.v.push_back(test::random_values(row, rng));
    }
    const std::vector<float> q = test::random_values(static_cast<std::size_t>(shape.n_heads) * shape.head_dim, rng);
    for (cpu::CpuProducer producer : test::kAllProducers) {
      const test::ProducerScope scope(producer);
      for (Route r : {Route::vec, Route::splitk, Route::interleaved, Route::staged}) {
        double err[2] = {0.0, 0.0};
        bool ran = false;
        for (KvDtype dt : test::kAllDtypes) {
          const PlaneConfig cfg = c.make(dt);
          HostPlane plane = HostPlane::create(cfg).value();
          for (int p = 0; p < c.position; ++p) ASSERT_TRUE(plane.append_row(p, h.k[p].data(), h.v[p].data()).ok());
          const test::Token tok{q, h.k[static_cast<std::size_t>(c.position)], h.v[static_cast<std::size_t>(c.position)]};
          test::RouteRun run = test::run_on_copy(r, plane, c.position, shape, tok);
          if (run.status.code() == ErrorCode::invalid_argument) continue;  // the route does not apply here
          ASSERT_TRUE(run.status.ok()) << run.status.to_string();
          ran = true;
          const int visible = run.plane.state().len;
          const double u = dt == KvDtype::bf16 ? kUnitRoundoffBf16 : kUnitRoundoffF16;
          const BoundCheck b = check_against_unrounded(shape, q, h, c.position + 1 - visible, visible, run.out, u);
          SCOPED_TRACE(fmt::format("{} / {} / {} / {}", c.name, route_name(r), cpu::cpu_producer_name(producer),
                                   kv_dtype_name(dt)));
          EXPECT_LE(b.worst_ratio, 1.0);
          const int di = dt == KvDtype::bf16 ? 1 : 0;
          worst_ratio[di] = std::max(worst_ratio[di], b.worst_ratio);
          err[di] = b.norm_error;
        }
        if (!ran) continue;
        // The measured error follows u: bf16's is several times f16's (u is 8x larger; both are
        // sums of rounding errors of random sign, so the ratio is near 8, and 3 leaves room for
        // the spread). A bf16 plane that secretly stored f16 would fail here.
        constexpr double kMinRatio = 3.0;
        EXPECT_GT(err[1], kMinRatio * err[0]) << c.name << " " << route_name(r) << ": bf16 " << err[1] << " f16 "
                                              << err[0];
        RecordProperty(fmt::format("{}_{}_{}_f16", c.name, route_name(r), cpu::cpu_producer_name(producer)),
                       fmt::format("{:.3g}", err[0]));
        RecordProperty(fmt::format("{}_{}_{}_bf16", c.name, route_name(r), cpu::cpu_producer_name(producer)),
                       fmt::format("{:.3g}", err[1]));
        std::printf("unrounded-input error %s / %s / %s: f16 %.3g, bf16 %.3g\n", c.name, route_name(r),
                    cpu::cpu_producer_name(producer), err[0], err[1]);
      }
    }
  }
  std::printf("worst error / bound: f16 %.3g, bf16 %.3g\n", worst_ratio[0], worst_ratio[1]);
  EXPECT_GT(worst_ratio[1], 0.0);
}

}  // namespace
}  // namespace ladder
