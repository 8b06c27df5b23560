// M2: the chapter's Figures 16.1 and 16.2 as tests, plus the exp and merge conventions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ladder/reference.hpp"
#include "ladder/softmax.hpp"

namespace ladder {
namespace {

// Figure 16.1/16.2: head_dim 2, Q=[1,0], K0=[1,0], K1=[0,1], K2=[1,1], 1-D values 2, 3, 4.
constexpr float kFigScale = 0.70710678f;  // 1/sqrt(2)

TEST(Figure16_1, WeightsAndOutput) {
  const double q[2] = {1, 0};
  const double k[3][2] = {{1, 0}, {0, 1}, {1, 1}};
  const double scale = 1.0 / std::sqrt(2.0);
  double s[3], m = -INFINITY, z = 0;
  for (int t = 0; t < 3; ++t) {
    s[t] = (q[0] * k[t][0] + q[1] * k[t][1]) * scale;
    m = std::max(m, s[t]);
  }
  for (double& x : s) z += (x = std::exp(x - m));
  EXPECT_NEAR(z, 2.4931, 5e-5);
  EXPECT_NEAR(s[0] / z, 0.4011, 5e-5);
  EXPECT_NEAR(s[1] / z, 0.1978, 5e-5);
  EXPECT_NEAR(s[2] / z, 0.4011, 5e-5);
  const double out = (2 * s[0] + 3 * s[1] + 4 * s[2]) / z;
  EXPECT_NEAR(out, 3.0000, 5e-5);
}

TEST(Figure16_2, RunningTable) {
  // The chapter computes O from the 4-decimal weight 0.4931 (0.4931 * 3 = 1.4793); the exact
  // product is 1.479206..., so O agrees with the printed table to 1e-4, S to 5e-5.
  constexpr double kTableO = 1e-4;
  SoftmaxState st(1);
  const float scores[3] = {kFigScale, 0.0f, kFigScale};
  const float values[3] = {2, 3, 4};
  st.fold(scores[0], &values[0]);
  EXPECT_NEAR(st.st.s, 1.0000, 1e-6);
  EXPECT_NEAR(st.o[0], 2.0000, 1e-6);
  st.fold(scores[1], &values[1]);
  EXPECT_NEAR(st.st.s, 1.4931, 5e-5);
  EXPECT_NEAR(st.o[0], 3.4793, kTableO);
  st.fold(scores[2], &values[2]);
  EXPECT_NEAR(st.st.s, 2.4931, 5e-5);
  EXPECT_NEAR(st.o[0], 7.4793, kTableO);
  float out = 0;
  st.normalize(&out);
  EXPECT_NEAR(out, 3.0000, 5e-5);
}

TEST(Figure16_2, TwoWorkersMergeToTheSameAnswer) {
  // Figure 16.2's closing remark: two workers over halves merge exactly like one worker.
  SoftmaxState a(1), b(1);
  const float values[3] = {2, 3, 4};
  a.fold(kFigScale, &values[0]);
  b.fold(0.0f, &values[1]);
  b.fold(kFigScale, &values[2]);
  SoftmaxState parts[2] = {a, b};
  const SoftmaxState m = SoftmaxState::merge(parts, 2);
  float out = 0;
  m.normalize(&out);
  EXPECT_NEAR(m.st.s, 2.4931, 5e-5);
  EXPECT_NEAR(out, 3.0000, 5e-5);
}

TEST(SoftmaxMerge, EmptyPartialIsExactIdentity) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3, 3);
  SoftmaxState a(4);
  for (int i = 0; i < 5; ++i) {
    const float v[4] = {u(rng), u(rng), u(rng), u(rng)};
    a.fold(u(rng), v);
  }
  SoftmaxState parts[3] = {SoftmaxState(4), a, SoftmaxState(4)};
  const SoftmaxState m = SoftmaxState::merge(parts, 3);
  EXPECT_EQ(m.st.m, a.st.m);
  EXPECT_EQ(m.st.s, a.st.s);  // factor for a is exp(0) = 1 exactly; empties contribute 0
  for (int d = 0; d < 4; ++d) EXPECT_EQ(m.o[d], a.o[d]);
}

TEST(SoftmaxExp, MatchesLibmWithinTwoTenthsOfAMillionth) {
  // softmax_exp is our own so CPU and GPU share its bits; its accuracy must not cost P3.
  double worst = 0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f * static_cast<float>(i) / 200000.0f;
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(softmax_exp(x) - ref) / ref);
  }
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(softmax_exp(0.0f), 1.0f);
  EXPECT_EQ(softmax_exp(-INFINITY), 0.0f);
  EXPECT_EQ(softmax_exp(-1000.0f), 0.0f);
}

TEST(Scale, IsOneOverSqrtHeadDim) {
  EXPECT_NEAR(1.0 / std::sqrt(128.0), 0.0883883, 1e-7);  // the chapter's 1/sqrt(128)
}

TEST(Half, RoundTripAndRounding) {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto hb = static_cast<std::uint16_t>(h);
    const float f = f16_to_f32(hb);
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), hb) << h;
  }
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 4096.0f), 0x3c00);  // tie rounds to even
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                // rounds to inf
  EXPECT_EQ(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f)), 1);
  EXPECT_EQ(ulp_distance(-0.0f, 0.0f), 0);
}

}  // namespace
}  // namespace ladder
