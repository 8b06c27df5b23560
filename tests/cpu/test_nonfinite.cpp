// N1 on the CPU: the non-finite policy (docs/nonfinite.md) on every route, through attend_layer
// and through the Engine (the sweep is nonfinite_sweep.hpp, shared with the GPU twin), plus the
// pieces it is built from: the range rule and its vector form, score_max, the reference's
// propagation, the softmax merge, and the opt-in finite check.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/kv_convert.hpp"
#include "cpu/nonfinite_sweep.hpp"
#include "ladder/engine.hpp"
#include "ladder/nonfinite.hpp"
#include "ladder/reference.hpp"
#include "ladder/softmax.hpp"
#include "cpu/float_bits.hpp"

namespace ladder {
namespace {

using test::bits;
using test::kInf;
using test::kNaN;

// ---- the range rule -------------------------------------------------------------------------

TEST(RangeRule, InRangeValuesAreUnchangedBitForBit) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-kKvRangeMax, kKvRangeMax);
  std::vector<float> xs = {0.0f, -0.0f, kKvRangeMax, -kKvRangeMax, 1e-30f, -1e-45f, 65503.9f};
  for (int i = 0; i < 1000; ++i) xs.push_back(u(rng));
  for (float x : xs) EXPECT_EQ(bits(kv_range(x, kKvRangeMax)), bits(x)) << x;
}

TEST(RangeRule, BeyondSaturatesAndInfBecomesNaN) {
  EXPECT_EQ(kv_range(65504.5f, kKvRangeMax), kKvRangeMax);
  EXPECT_EQ(kv_range(test::kBeyondHalf, kKvRangeMax), kKvRangeMax);
  EXPECT_EQ(kv_range(-7e4f, kKvRangeMax), -kKvRangeMax);
  EXPECT_EQ(kv_range(std::numeric_limits<float>::max(), kKvRangeMax), kKvRangeMax);
  EXPECT_EQ(kv_range(-std::numeric_limits<float>::max(), kKvRangeMax), -kKvRangeMax);
  EXPECT_TRUE(std::isnan(kv_range(kInf, kKvRangeMax)));
  EXPECT_TRUE(std::isnan(kv_range(-kInf, kKvRangeMax)));
  EXPECT_TRUE(std::isnan(kv_range(kNaN, kKvRangeMax)));
  // Stored: 65504 is f16 0x7bff; without the rule 7e4 would round to Inf (0x7c00).
  EXPECT_EQ(kv_to_f16(7e4f), 0x7bff);
  EXPECT_EQ(kv_to_f16(-7e4f), 0xfbff);
  EXPECT_EQ(f32_to_f16(7e4f), 0x7c00);
  const std::uint16_t from_inf = kv_to_f16(kInf);
  EXPECT_EQ(from_inf & 0x7c00, 0x7c00);
  EXPECT_NE(from_inf & 0x3ff, 0);  // a NaN, not an Inf
}

// The vectorised store (F16C when built with it) against the scalar rule, every lane position.
TEST(RangeRule, BulkStoreMatchesTheScalarRule) {
  const std::vector<float> specials = {kNaN, kInf, -kInf, 7e4f, -7e4f, 65504.0f, 65519.0f, 65520.0f,
                                       -0.0f, 0.0f, 1.0f, -3.5f, 6e-8f, std::numeric_limits<float>::max()};
  constexpr int kN = 37;  // four vectors of 8 and a scalar tail
  for (std::size_t s = 0; s < specials.size(); ++s) {
    for (int lane = 0; lane < kN; ++lane) {
      std::vector<float> src(kN, 0.25f);
      src[static_cast<std::size_t>(lane)] = specials[s];
      std::vector<KvWord> dst(kN, 0);
      cpu::detail::narrow_row(src.data(), dst.data(), kN, KvDtype::f16);
      const std::uint16_t want = kv_to_f16(specials[s]);
      const KvWord got = dst[static_cast<std::size_t>(lane)];
      if (std::isnan(kv_range(specials[s], kKvRangeMax))) {
        EXPECT_TRUE((got & 0x7c00) == 0x7c00 && (got & 0x3ff) != 0) << specials[s] << " lane " << lane;
      } else {
        EXPECT_EQ(got, want) << specials[s] << " lane " << lane;
      }
    }
  }
}

TEST(RangeRule, CountAndCheck) {
  const std::vector<float> x = {1.0f, 7e4f, kNaN, -kInf, -7e4f, 65504.0f, 2.0f};
  RangeStats r;
  count_range(x.data(), x.size(), r, KvDtype::f16);
  EXPECT_EQ(r.saturated, 2);
  EXPECT_EQ(r.nonfinite, 2);
  const Status s = check_finite("k", x.data(), x.size());
  EXPECT_EQ(s.code(), ErrorCode::non_finite);
  EXPECT_NE(s.message().find("k[2] is NaN"), std::string::npos) << s.message();
  EXPECT_TRUE(check_finite("k", x.data(), 2).ok());  // 7e4 is finite: counted, not refused
}

// count_range's vector form (8 lanes) and scalar tail against each value's own classification
// by kv_range, for both plane dtypes, for every special value at every lane position of every length up to 4 vectors
// and a tail, with random filler from the three classes around it.
TEST(RangeRule, CountMatchesTheRuleAtEveryLaneAndLength) {
  const float denormal = std::numeric_limits<float>::denorm_min();
  const std::vector<float> specials = {kNaN, -kNaN, kInf, -kInf, 7e4f, -7e4f, 65504.0f, -65504.0f,
                                       std::nextafter(65504.0f, kInf), -std::nextafter(65504.0f, kInf),
                                       std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                                       -0.0f, 0.0f, denormal, -denormal, 1.0f};
  std::mt19937 rng(29);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(specials.size()) - 1);
  constexpr int kMaxN = 37;  // four vectors of 8 and a scalar tail
  for (const KvDtype d : {KvDtype::f16, KvDtype::bf16})
  for (int n = 0; n <= kMaxN; ++n) {
    for (std::size_t s = 0; s < specials.size(); ++s) {
      for (int lane = 0; lane < std::max(n, 1); ++lane) {
        std::vector<float> x(static_cast<std::size_t>(n));
        for (float& v : x) v = specials[static_cast<std::size_t>(pick(rng))];
        if (n > 0) x[static_cast<std::size_t>(lane)] = specials[s];
        RangeStats want;
        for (float v : x) {
          const float r = kv_range(v, kv_range_max(d));
          if (std::isnan(r)) ++want.nonfinite;
          else if (r != v) ++want.saturated;
        }
        RangeStats got{3, 5};  // counts add to what is there
        count_range(x.data(), x.size(), got, d);
        EXPECT_EQ(got.nonfinite, want.nonfinite + 5) << "n " << n << " special " << s << " lane " << lane;
        EXPECT_EQ(got.saturated, want.saturated + 3) << "n " << n << " special " << s << " lane " << lane;
      }
    }
  }
}

// ---- the softmax half ----------------------------------------------------------------------

TEST(ScoreMax, NeverDropsANaN) {
  for (float other : {-kInf, -1.0f, 0.0f, 3.0f, kInf}) {
    EXPECT_TRUE(std::isnan(score_max(kNaN, other))) << other;
    EXPECT_TRUE(std::isnan(score_max(other, kNaN))) << other;
    EXPECT_EQ(score_max(other, 2.0f), std::fmax(other, 2.0f));
    EXPECT_EQ(score_max(2.0f, other), std::fmax(other, 2.0f));
  }
}

TEST(SoftmaxMerge, ANaNPartPoisonsTheMergeAndAnEmptyPartIsExactlyNothing) {
  constexpr int kDim = 4;
  SoftmaxState a(kDim), b(kDim), empty(kDim);
  const float va[kDim] = {1.0f, -2.0f, 0.5f, 3.0f}, vb[kDim] = {-1.0f, 0.25f, 2.0f, -0.75f};
  a.fold(0.3f, va);
  a.fold(-1.2f, vb);
  b.fold(kNaN, vb);
  const SoftmaxState with_empty[] = {a, empty};
  const SoftmaxState merged = SoftmaxState::merge(with_empty, 2);
  EXPECT_EQ(bits(merged.st.m), bits(a.st.m));
  EXPECT_EQ(bits(merged.st.s), bits(a.st.s));
  for (int d = 0; d < kDim; ++d) EXPECT_EQ(bits(merged.o[d]), bits(a.o[d]));
  const SoftmaxState ab[] = {a, b}, ba[] = {b, a};
  for (const SoftmaxState* parts : {ab, ba}) {
    const SoftmaxState m = SoftmaxState::merge(parts, 2);
    EXPECT_TRUE(std::isnan(m.st.m));
    std::vector<float> out(kDim);
    m.normalize(out.data());
    for (float x : out) EXPECT_TRUE(std::isnan(x));
  }
}

// The oracle propagates on its own: a NaN score first (where std::max(-inf, NaN) is -inf), last,
// or alone; a NaN in V reaches exactly its dimension.
TEST(Reference, PropagatesNaNWhereverItSits) {
  const HeadShape s = test::make_shape(2, 1, 4);
  constexpr int kVisible = 3;
  for (int at = 0; at < kVisible; ++at) {
    std::vector<double> q = {0.5, -1.0, 0.25, 2.0, 1.0, 0.5, -0.5, 0.75};
    std::vector<double> k(kVisible * 4), v(kVisible * 4);
    for (int i = 0; i < kVisible * 4; ++i) {
      k[i] = 0.1 * (i + 1);
      v[i] = -0.2 * (i + 2);
    }
    std::vector<double> kk = k;
    kk[at * 4 + 1] = NAN;
    std::vector<double> out(8);
    reference_attention(s, q.data(), kk.data(), v.data(), kVisible, out.data());
    for (double x : out) EXPECT_TRUE(std::isnan(x)) << "K NaN at token " << at;
    std::vector<double> vv = v;
    vv[at * 4 + 2] = NAN;
    reference_attention(s, q.data(), k.data(), vv.data(), kVisible, out.data());
    for (int i = 0; i < 8; ++i) EXPECT_EQ(std::isnan(out[i]), i % 4 == 2) << "V NaN at token " << at << " out " << i;
  }
}

// ---- every route, through attend_layer -----------------------------------------------------

class NonfiniteSweep : public ::testing::TestWithParam<test::NonfiniteCase> {};

TEST_P(NonfiniteSweep, EveryRouteFollowsThePolicy) {
  const test::NonfiniteCase& c = GetParam();
  const test::LayerRunner cpu = [](Route r, HostPlane& plane, int pos, int slot, const HeadShape& shape,
                                   const LayerIO& io) { return attend_layer(Device::cpu, r, plane, pos, slot, shape, io); };
  const test::SweepTally t = test::run_nonfinite_sweep(c, cpu, true);
  // Not vacuous: every case has runs whose output the poison turned NaN and runs it left finite.
  EXPECT_GT(t.nan_runs, 0);
  EXPECT_GT(t.finite_runs, 0);
  if (c.name == "ring_w64_slack16_gqa4") {
    EXPECT_GT(t.left_runs, 0) << "no run read past a row that had left";
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, NonfiniteSweep, ::testing::ValuesIn(test::nonfinite_cases()),
                         [](const auto& info) { return info.param.name; });

// The same sweep on bf16 planes: the rule's bound is the same (kv_dtype.hpp), the stored rows
// and the reference's rows are bf16.
std::vector<test::NonfiniteCase> bf16_cases() {
  std::vector<test::NonfiniteCase> cases = test::nonfinite_cases();
  for (test::NonfiniteCase& c : cases) c.cfg.kv_dtype = KvDtype::bf16;
  return cases;
}
INSTANTIATE_TEST_SUITE_P(CpuBf16, NonfiniteSweep, ::testing::ValuesIn(bf16_cases()),
                         [](const auto& info) { return info.param.name; });

// ---- through the Engine --------------------------------------------------------------------

TEST(NonfiniteEngine, EveryLayerFollowsThePolicy) {
  const std::vector<float> values = test::poison_values();
  for (KvDtype dt : test::kAllDtypes)
  for (test::Site site : {test::Site::q, test::Site::cur_k, test::Site::cur_v}) {
    for (float value : values) {
      for (int layer : {1, 3}) {  // an SWA layer and the NoPE layer
        SCOPED_TRACE(kv_dtype_name(dt));
        const test::SweepTally t = test::run_engine_nonfinite(Device::cpu, site, value, layer, dt);
        EXPECT_GT(t.finite_runs, 0);
        if (std::isnan(kv_range(value, kKvRangeMax))) {
          EXPECT_GT(t.nan_runs, 0) << value;
        }
        if (layer == 1 && site != test::Site::q) {
          EXPECT_GT(t.left_runs, 0);
        }
      }
    }
  }
}

// The opt-in check refuses a NaN or Inf anywhere in a token before any plane changes; the same
// token without it then goes through, and a finite value beyond the range passes the check and
// is counted.
TEST(NonfiniteEngine, CheckFiniteRefusesBeforeAppending) {
  const Geometry g = test::nonfinite_engine_geometry();
  EngineOptions opt;
  opt.check_finite = true;
  auto engine = std::move(Engine::create(g, opt)).value();
  test::EngineHistory h(g);
  std::mt19937 rng(11);
  constexpr int kDepth = 5;
  for (int pos = 0; pos < kDepth; ++pos) {
    h.add(rng);
    std::vector<float> out = test::nan_filled(g.n_layers * h.qn);
    ASSERT_TRUE(engine->encode_token(pos, TokenIO{h.q[pos].data(), h.k[pos].data(), h.v[pos].data(), out.data()}).ok());
  }
  std::vector<PlaneState> states;
  for (int l = 0; l < g.n_layers; ++l) states.push_back(engine->plane_state(l));
  const RangeStats counted = engine->range_stats();
  EXPECT_EQ(counted, RangeStats{});
  h.add(rng);
  struct Bad {
    std::vector<float>* x;
    std::size_t at;
    float value;
    bool in_q;
  };
  const Bad bad[] = {{&h.q[kDepth], 3 * h.qn + 17, kNaN, true},
                     {&h.k[kDepth], 2 * h.kvn + 1, kInf, false},
                     {&h.v[kDepth], 0, -kInf, false}};
  for (const Bad& b : bad) {
    const float keep = (*b.x)[b.at];
    (*b.x)[b.at] = b.value;
    std::vector<float> out = test::nan_filled(g.n_layers * h.qn);
    const std::vector<float> untouched = out;
    const TokenIO io{h.q[kDepth].data(), h.k[kDepth].data(), h.v[kDepth].data(), out.data()};
    const Status s = engine->encode_token(kDepth, io);
    EXPECT_EQ(s.code(), ErrorCode::non_finite) << s.to_string();
    EXPECT_NE(s.message().find("layer"), std::string::npos) << s.message();
    // A pure append reads no q: only the k and v cases are refused there.
    if (!b.in_q) {
      const Status f = engine->fill_token(kDepth, TokenIO{nullptr, io.k, io.v, nullptr});
      EXPECT_EQ(f.code(), ErrorCode::non_finite) << f.to_string();
    }
    for (int l = 0; l < g.n_layers; ++l) EXPECT_EQ(engine->plane_state(l), states[static_cast<std::size_t>(l)]);
    EXPECT_EQ(engine->range_stats(), counted);
    EXPECT_TRUE(test::same_bits(out, untouched)) << "a refused token wrote outputs";
    (*b.x)[b.at] = keep;
  }
  h.k[kDepth][5] = test::kBeyondHalf;
  std::vector<float> out = test::nan_filled(g.n_layers * h.qn);
  ASSERT_TRUE(
      engine->encode_token(kDepth, TokenIO{h.q[kDepth].data(), h.k[kDepth].data(), h.v[kDepth].data(), out.data()})
          .ok());
  EXPECT_EQ(engine->range_stats().saturated, 1);
  EXPECT_EQ(engine->range_stats().nonfinite, 0);
  for (float x : out) EXPECT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace ladder
