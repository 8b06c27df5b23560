// M2: the chapter's Figures 16.1 and 16.2 as tests, plus the exp and merge conventions.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <initializer_list>
#include <random>
#include <vector>

#include "ladder/reference.hpp"
#include "ladder/softmax.hpp"

namespace ladder {
namespace {

// The chapter's worked example (Figures 16.1 and 16.2), through the library's SoftmaxState: fold
// (the running-max table), merge (two or more workers) and normalize (the one final divide).
// head_dim 2, Q = [1, 0], K0 = [1, 0], K1 = [0, 1], K2 = [1, 1], 1-D values 2, 3, 4.
// The chapter prints 4 decimals, so its numbers are matched to half a unit of the last place
// (kPrinted); its running O is built from the rounded weight 0.4931 (0.4931 x 3 = 1.4793, the
// exact product is 1.479206...), so O agrees with the printed table to kTableO.
constexpr double kPrinted = 5e-5;
constexpr double kTableO = 1e-4;
constexpr int kFigTokens = 3;
constexpr int kFigDim = 2;
constexpr float kFigQ[kFigDim] = {1, 0};
constexpr float kFigK[kFigTokens][kFigDim] = {{1, 0}, {0, 1}, {1, 1}};
constexpr float kFigV[kFigTokens] = {2, 3, 4};

// Step 1 and 2 of Figure 16.1: the dot product, scaled by 1/sqrt(head_dim).
float fig_score(int t) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(kFigDim));
  float dot = 0;
  for (int d = 0; d < kFigDim; ++d) dot += kFigQ[d] * kFigK[t][d];
  return dot * scale;
}

// Value rows [one-hot(t) x3, V_t]: after normalize, entries 0..2 are token t's softmax weight
// and entry 3 is the attention output, so one fold sequence yields both rows of Figure 16.1.
constexpr int kProbeDim = kFigTokens + 1;
std::array<float, kProbeDim> probe_row(int t) {
  std::array<float, kProbeDim> row{};
  row[static_cast<std::size_t>(t)] = 1.0f;
  row[kFigTokens] = kFigV[t];
  return row;
}

SoftmaxState fold_tokens(std::initializer_list<int> tokens) {
  SoftmaxState st(kProbeDim);
  for (int t : tokens) st.fold(fig_score(t), probe_row(t).data());
  return st;
}

TEST(Figure16_1, ScoresWeightsAndOutputThroughTheSoftmaxState) {
  // 2) scaled scores [0.7071, 0.0000, 0.7071]
  EXPECT_NEAR(fig_score(0), 0.7071, kPrinted);
  EXPECT_NEAR(fig_score(1), 0.0000, kPrinted);
  EXPECT_NEAR(fig_score(2), 0.7071, kPrinted);
  const SoftmaxState st = fold_tokens({0, 1, 2});
  // 3) row max m = 0.7071; exp(s_t - m) = [1.0000, 0.4931, 1.0000] (the unnormalised weights:
  // the max never moved after token 0, so o holds them as they were folded); Z = 2.4931.
  EXPECT_NEAR(st.st.m, 0.7071, kPrinted);
  EXPECT_NEAR(st.o[0], 1.0000, kPrinted);
  EXPECT_NEAR(st.o[1], 0.4931, kPrinted);
  EXPECT_NEAR(st.o[2], 1.0000, kPrinted);
  EXPECT_NEAR(st.st.s, 2.4931, kPrinted);
  // weights = exp / Z = [0.4011, 0.1978, 0.4011], summing to 1; 4) out = 3.0000.
  std::array<float, kProbeDim> out{};
  st.normalize(out.data());
  EXPECT_NEAR(out[0], 0.4011, kPrinted);
  EXPECT_NEAR(out[1], 0.1978, kPrinted);
  EXPECT_NEAR(out[2], 0.4011, kPrinted);
  EXPECT_NEAR(out[0] + out[1] + out[2], 1.0, 1e-6);  // f32 sum of three weights
  EXPECT_NEAR(out[kFigTokens], 3.0000, kPrinted);
}

TEST(Figure16_2, RunningTableRowByRow) {
  // The table: (M, S, O) after each token, in arrival order [0.7071, 0.0000, 0.7071].
  struct Row {
    double m, s, o, o_tolerance;
  };
  const Row table[kFigTokens] = {{0.7071, 1.0000, 2.0000, kPrinted},
                                 {0.7071, 1.4931, 3.4793, kTableO},
                                 {0.7071, 2.4931, 7.4793, kTableO}};
  SoftmaxState st(1);
  EXPECT_EQ(st.st.m, -INFINITY);  // start: M = -inf, S = 0, O = 0
  EXPECT_EQ(st.st.s, 0.0f);
  EXPECT_EQ(st.o[0], 0.0f);
  for (int t = 0; t < kFigTokens; ++t) {
    st.fold(fig_score(t), &kFigV[t]);
    EXPECT_NEAR(st.st.m, table[t].m, kPrinted) << "token " << t;
    EXPECT_NEAR(st.st.s, table[t].s, kPrinted) << "token " << t;
    EXPECT_NEAR(st.o[0], table[t].o, table[t].o_tolerance) << "token " << t;
  }
  float out = 0;
  st.normalize(&out);  // O / S = 7.4793 / 2.4931 = 3.0000
  EXPECT_NEAR(out, 3.0000, kPrinted);
}

TEST(Figure16_2, ALaterLargerScoreRescalesEveryEarlierStatistic) {
  // The chapter's remark: had a later token beaten 0.7071, every earlier statistic would have
  // been scaled down by exp(old - new) in one multiply. Token 3 with score 1.5 and value 5,
  // checked against the same arithmetic in f64.
  constexpr float kLateScore = 1.5f, kLateValue = 5.0f;
  SoftmaxState st(1);
  for (int t = 0; t < kFigTokens; ++t) st.fold(fig_score(t), &kFigV[t]);
  st.fold(kLateScore, &kLateValue);
  // The f64 oracle: every weight against the final max 1.5, no running state.
  double s_ref = 1.0, o_ref = kLateValue;  // the late token's own exp(0) and value
  for (int t = 0; t < kFigTokens; ++t) {
    const double w = std::exp(static_cast<double>(fig_score(t)) - kLateScore);
    s_ref += w;
    o_ref += w * kFigV[t];
  }
  EXPECT_EQ(st.st.m, kLateScore);
  EXPECT_NEAR(st.st.s, s_ref, 1e-6 * s_ref);  // f32 state: a few ulp
  EXPECT_NEAR(st.o[0], o_ref, 1e-6 * o_ref);
  float out = 0;
  st.normalize(&out);
  EXPECT_NEAR(out, o_ref / s_ref, 1e-6 * (o_ref / s_ref));
}

TEST(Figure16_2, WorkersOverAnySplitMergeToTheSameAnswer) {
  // Figure 16.2's closing remark: workers over parts of the tokens, merged, give the one-worker
  // answer: S 2.4931, output 3.0000 and the weights. The splits include a first worker whose max
  // (0.0000, token 1 alone) is below the global max, and an empty worker.
  const std::vector<std::vector<std::vector<int>>> splits = {
      {{0}, {1, 2}}, {{0, 1}, {2}}, {{1}, {0, 2}}, {{1}, {2}, {0}}, {{}, {2, 0}, {}, {1}}};
  for (const auto& split : splits) {
    std::vector<SoftmaxState> parts;
    for (const auto& tokens : split) {
      SoftmaxState part(kProbeDim);
      for (int t : tokens) part.fold(fig_score(t), probe_row(t).data());
      parts.push_back(part);
    }
    const SoftmaxState merged = SoftmaxState::merge(parts.data(), static_cast<int>(parts.size()));
    std::array<float, kProbeDim> out{};
    merged.normalize(out.data());
    SCOPED_TRACE(::testing::Message() << "split of " << split.size() << " workers, first " << split[0].size());
    EXPECT_NEAR(merged.st.m, 0.7071, kPrinted);
    EXPECT_NEAR(merged.st.s, 2.4931, kPrinted);
    EXPECT_NEAR(out[0], 0.4011, kPrinted);
    EXPECT_NEAR(out[1], 0.1978, kPrinted);
    EXPECT_NEAR(out[2], 0.4011, kPrinted);
    EXPECT_NEAR(out[kFigTokens], 3.0000, kPrinted);
  }
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

// The left fold the GPU tensor-core path merges a workgroup's warp slots by (fold_in /
// fold_add: the reducer's step 4, and a walking producer CTA's own fold). Random parts with
// spread-out maxima: at two parts it is merge_stats bit for bit; at four it agrees with the f64
// merge to a few f32 roundings (each step rounds the running s and o once more than the one
// four-way merge: 1e-6 relative bounds 8 roundings of 2^-24 with room); an empty part (m = -inf,
// s = 0, o = 0) leaves the running state's bits as they were.
TEST(SoftmaxFold, LeftFoldAgreesWithTheMerge) {
  std::mt19937 rng(49);
  std::uniform_real_distribution<float> um(-8, 8), us(0.5f, 40), uo(-5, 5);
  constexpr int kParts = 4;
  for (int trial = 0; trial < 200; ++trial) {
    float m[kParts], sv[kParts], o[kParts];
    for (int g = 0; g < kParts; ++g) {
      m[g] = um(rng);
      sv[g] = us(rng);
      o[g] = uo(rng);
    }
    // Two parts: merge_stats' bits.
    float c2[2] = {0, 0};
    const SoftmaxStats two = merge_stats<2>(2, [&](int g) { return m[g]; }, [&](int g) { return sv[g]; },
                                            [&](int g, float c) { c2[g] = c; });
    FoldFactors f;
    const SoftmaxStats folded2 = fold_in(SoftmaxStats{m[0], sv[0]}, SoftmaxStats{m[1], sv[1]}, f);
    EXPECT_EQ(folded2.m, two.m);
    EXPECT_EQ(folded2.s, two.s);
    EXPECT_EQ(fold_add(o[0], o[1], f), merge_add(merge_add(0.0f, o[0], c2[0]), o[1], c2[1]));
    // Four parts against f64.
    SoftmaxStats run{m[0], sv[0]};
    float o_run = o[0];
    for (int g = 1; g < kParts; ++g) {
      FoldFactors c;
      run = fold_in(run, SoftmaxStats{m[g], sv[g]}, c);
      o_run = fold_add(o_run, o[g], c);
    }
    double big = m[0];
    for (int g = 1; g < kParts; ++g) big = std::max(big, static_cast<double>(m[g]));
    double s64 = 0, o64 = 0;
    for (int g = 0; g < kParts; ++g) {
      const double c = std::exp(static_cast<double>(m[g]) - big);
      s64 += sv[g] * c;
      o64 += o[g] * c;
    }
    EXPECT_EQ(run.m, static_cast<float>(big));
    EXPECT_NEAR(run.s, s64, 1e-6 * s64);
    EXPECT_NEAR(o_run / run.s, o64 / s64, 1e-6 * (std::abs(o64 / s64) + 1));
    // An empty part folded in changes nothing.
    FoldFactors e;
    const SoftmaxStats same = fold_in(run, SoftmaxStats{}, e);
    EXPECT_EQ(same.m, run.m);
    EXPECT_EQ(same.s, run.s);
    EXPECT_EQ(fold_add(o_run, 0.0f, e), o_run);
  }
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

TEST(SoftmaxExp, SpecialCasesArePickedAfterThePolynomial) {
  // The special cases are selects after a polynomial on a clamped argument (no early return,
  // docs/perf.md change 50d): each must still come out as documented.
  EXPECT_TRUE(std::isnan(softmax_exp(std::numeric_limits<float>::quiet_NaN())));  // N1
  EXPECT_TRUE(std::isnan(softmax_exp(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(softmax_exp(0.5f), 1.0f);  // callers pass score - max <= 0; above it clamps to 0
  EXPECT_EQ(softmax_exp(INFINITY), 1.0f);
  EXPECT_GT(softmax_exp(-87.0f), 0.0f);  // the last argument with a normal result
  EXPECT_NEAR(softmax_exp(-87.0f), std::exp(-87.0), 2e-7 * std::exp(-87.0));
  EXPECT_EQ(softmax_exp(std::nextafter(-87.0f, -INFINITY)), 0.0f);
  EXPECT_EQ(softmax_exp(-std::numeric_limits<float>::max()), 0.0f);
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
