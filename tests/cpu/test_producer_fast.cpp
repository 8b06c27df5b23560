// The fast CPU producer (src/cpu/producer_fast.cpp): its 8-lane exp is the scalar softmax_exp
// bit for bit; its schedule depends on the visible length only; every route meets the f64 bound
// at Muse Glimmer shapes and odd shapes, at depths that cover one chunk, ragged chunks and every
// split count, every head-block and dim-vector remainder of the micro-kernels and both the F16C
// transpose and the generic widen; bits are the same run to run, for 1..16 workers (P1), the
// same on a token-major ring (two KV heads per task) as on a head-major plane with the same rows,
// and a NaN in K still reaches the output (the project's non-finite policy, through score_max).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "cpu/producer_fast_avx512.hpp"
#include "cpu/producer_fast_exp.hpp"
#include "cpu/producer_fast_kernels.hpp"
#include "cpu_twin_helpers.hpp"
#include "ladder/heuristics.hpp"
#include "ladder/nonfinite.hpp"

namespace ladder {
namespace {

using test::Token;

// P3's bar for f16 KV.
constexpr double kSpecTolerance = 2e-3;
// The reference is fed the f16-rounded rows the producer reads, so what is left is f32
// arithmetic: 128-term dot products in 8 lanes, softmax_exp's 2e-7, a 64-token fold per chunk
// and a merge of at most 32 splits. Measured worst over this file's sweep: ~3e-7 (printed as a
// test property); 1e-5 is well above that and still four orders under the spec bar, so an
// ordering or addressing bug cannot hide in P3's slack.
constexpr double kTightTolerance = 1e-5;

// Arguments of the exp's tests: the special ones, a dense sweep of [-90, 1] and every 2^k
// boundary of the reduction.
std::vector<float> exp_arguments() {
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, 3.5f, -1e-30f, -1e-7f, -0.5f, -0.6931472f, -1.0f, -10.0f, -86.99f,
                           -87.0f, -87.0001f, -88.0f, -100.0f, -1e30f, std::numeric_limits<float>::denorm_min(),
                           -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  for (float x = -90.0f; x <= 1.0f; x += 0.0137f) xs.push_back(x);
  for (int k = -24; k <= 6; ++k) xs.push_back(-std::ldexp(1.0f, k));
  return xs;
}

#if defined(__AVX2__) && defined(__FMA__)
TEST(FastExp, EightLanesAreTheScalarFunctionBitForBit) {
  std::vector<float> xs = exp_arguments();
  while (xs.size() % 8 != 0) xs.push_back(-2.0f);
  for (std::size_t i = 0; i < xs.size(); i += 8) {
    alignas(32) float got[8];
    _mm256_store_ps(got, cpu::detail::softmax_exp8(_mm256_loadu_ps(xs.data() + i)));
    for (int l = 0; l < 8; ++l) {
      const float want = softmax_exp(xs[i + l]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[l])) << "x = " << xs[i + l];
      } else {
        EXPECT_EQ(std::bit_cast<std::uint32_t>(got[l]), std::bit_cast<std::uint32_t>(want))
            << "x = " << xs[i + l] << ": " << got[l] << " vs " << want;
      }
    }
  }
}
#endif

// The 16-lane weights (the exps of a chunk's scores and their sum): every weight is the scalar
// softmax_exp bit for bit, special arguments included, lanes past the count are 0 and untouched
// past `padded`, and the sum is the 8-lane path's (8 running lane sums, then lanes 0..7).
TEST(FastExp, SixteenLaneWeightsAreTheScalarFunctionAndTheEightLaneSum) {
  if (!cpu::detail::cpu_has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512F: only the 8-lane kernels run here";
  const std::vector<float> xs = exp_arguments();
  constexpr float kMax = 0.25f;  // s - m: every argument above, shifted
  constexpr int kLaneSums = 8;
  constexpr float kPastPadded = 12345.0f;
  // Counts that end inside a 16-lane vector, on its half, and on its end; padded up to 8.
  for (const int count : {1, 7, 8, 9, 16, 23, 64, 71, static_cast<int>(xs.size())}) {
    const int padded = (count + 7) / 8 * 8;
    std::vector<float> s(static_cast<std::size_t>(padded) + 16, kPastPadded);
    for (int i = 0; i < padded; ++i) s[i] = xs[static_cast<std::size_t>(i) % xs.size()] + kMax;
    std::vector<float> want(s);
    float lanes[kLaneSums] = {};
    for (int i = 0; i < padded; ++i) {
      want[i] = i < count ? softmax_exp(s[i] - kMax) : 0.0f;
      lanes[i % kLaneSums] += want[i];
    }
    float want_sum = 0.0f;
    for (float l : lanes) want_sum += l;
    const float got_sum = cpu::detail::weights_in_place_avx512(s.data(), count, padded, kMax);
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(s[i])) << "count " << count << ", i " << i;
      } else {
        EXPECT_EQ(std::bit_cast<std::uint32_t>(s[i]), std::bit_cast<std::uint32_t>(want[i])) << "count " << count << ", i " << i;
      }
    }
    if (std::isnan(want_sum)) {
      EXPECT_TRUE(std::isnan(got_sum)) << "count " << count;
    } else {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got_sum), std::bit_cast<std::uint32_t>(want_sum)) << "count " << count;
    }
  }
}

#if defined(__AVX2__) && defined(__FMA__)
// The 8-lane score kernels against the rule they document: s[h][t] = (q[h] . k[t] as one fmaf
// chain over d in increasing order from 0) * scale. Both forms (K transposed, score_block; K rows
// as widened, score_rows), 8 and 16 heads, random q and K, poisoned outputs: the row form must
// give the transposed form's bits, which is what lets it replace the transposed tile.
TEST(FastKernels, RowAndTransposedScoresAreTheScalarChainBitForBit) {
  namespace d = cpu::detail;
  constexpr int kHd = d::kWideRowDims;
  constexpr int kTokens = d::kSubTokens;
  constexpr int kMaxHeads = d::kRowScoreMaxHeadVectors * d::kLanes;
  constexpr float kScale = 0.08838835f;  // 1 / sqrt(128)
  const float poison = std::numeric_limits<float>::quiet_NaN();
  for (int heads : {d::kLanes, kMaxHeads}) {
    std::mt19937 rng(static_cast<unsigned>(heads));
    std::uniform_real_distribution<float> value(-3.0f, 3.0f);
    alignas(32) float q[kMaxHeads * kHd];       // [h][d]
    alignas(32) float qt[kHd * kMaxHeads];      // [d][heads]
    alignas(32) float krows[kTokens * kHd];     // [t][d]
    alignas(32) float kt[kHd * kTokens];        // [d][t]
    alignas(32) float tile[kTokens * kMaxHeads];
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < kHd; ++i) q[h * kHd + i] = qt[i * heads + h] = value(rng);
    for (int t = 0; t < kTokens; ++t)
      for (int i = 0; i < kHd; ++i) krows[t * kHd + i] = kt[i * kTokens + t] = value(rng);
    std::vector<float> want(static_cast<std::size_t>(heads) * kTokens);
    for (int h = 0; h < heads; ++h)
      for (int t = 0; t < kTokens; ++t) {
        float a = 0.0f;
        for (int i = 0; i < kHd; ++i) a = std::fmaf(q[h * kHd + i], krows[t * kHd + i], a);
        want[static_cast<std::size_t>(h) * kTokens + t] = a * kScale;
      }
    std::vector<float> rows(static_cast<std::size_t>(heads) * kFastChunkTokens, poison);
    std::vector<float> transposed = rows;
    if (heads == d::kLanes)
      d::score_rows<1>(qt, kHd, krows, kScale, tile, rows.data(), kFastChunkTokens);
    else
      d::score_rows<d::kRowScoreMaxHeadVectors>(qt, kHd, krows, kScale, tile, rows.data(), kFastChunkTokens);
    for (int h = 0; h < heads; h += d::kScoreHeads) {
      float* s = transposed.data() + static_cast<std::size_t>(h) * kFastChunkTokens;
      const float* qh = q + h * kHd;
      switch (std::min(d::kScoreHeads, heads - h)) {
        case 2: d::score_block<2>(qh, kHd, kt, kScale, s, kFastChunkTokens); break;
        case 4: d::score_block<4>(qh, kHd, kt, kScale, s, kFastChunkTokens); break;
        case d::kScoreHeads: d::score_block<d::kScoreHeads>(qh, kHd, kt, kScale, s, kFastChunkTokens); break;
        default: FAIL() << "a head block this test does not dispatch";
      }
    }
    for (int h = 0; h < heads; ++h)
      for (int t = 0; t < kTokens; ++t) {
        const std::size_t at = static_cast<std::size_t>(h) * kFastChunkTokens + t;
        const float w = want[static_cast<std::size_t>(h) * kTokens + t];
        ASSERT_EQ(std::bit_cast<std::uint32_t>(rows[at]), std::bit_cast<std::uint32_t>(w))
            << "row form, heads " << heads << ", head " << h << ", token " << t;
        ASSERT_EQ(std::bit_cast<std::uint32_t>(transposed[at]), std::bit_cast<std::uint32_t>(w))
            << "transposed form, heads " << heads << ", head " << h << ", token " << t;
      }
    // Past the sub-block's 16 columns nothing was written.
    for (int h = 0; h < heads; ++h) EXPECT_TRUE(std::isnan(rows[static_cast<std::size_t>(h) * kFastChunkTokens + kTokens]));
  }
}
#endif

// Heads in lanes (producer_fast_avx512.hpp) against the head-major 16-lane kernels, one chunk
// at a time: the scores, the fold (maxima, rescale factors, weights, sums) and o after the V
// pass must carry the same bits. Counts end inside, on and past 8-token groups; the running
// state starts empty (-inf) for some heads, above the chunk (factor 1) for others, below it for
// the rest; one head sees a NaN score and another a -inf one; outputs past what is written are
// poisoned. Each kernel call also widens a sub-block's worth of plane rows on the way (f16 for
// odd counts, bf16 for even ones, every 16-bit pattern allowed), which must be widen_rows_avx512's
// floats, drained in full when a short sub-block gives fewer steps than vectors.
TEST(FastKernels, HeadsInLanesChunkIsTheHeadMajorChunkBitForBit) {
  if (!cpu::detail::cpu_has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512F: only the 8-lane kernels run here";
  namespace d = cpu::detail;
  constexpr int kHd = d::kWideRowDims;
  constexpr int kH = d::kHeadLanes;
  constexpr int kSub = d::kSubTokens;
  constexpr int kChunk = kFastChunkTokens;
  constexpr float kScale = 0.08838835f;  // 1 / sqrt(128)
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const auto bits = [](float x) { return std::bit_cast<std::uint32_t>(x); };
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  for (const int count : {1, 5, 8, 13, 16, 40, 63, 64}) {
    SCOPED_TRACE(fmt::format("count {}", count));
    std::vector<float> qt(kHd * kH), krows(kChunk * kHd), vrows(kChunk * kHd);
    for (float& x : qt) x = value(rng);
    for (float& x : krows) x = value(rng);
    for (float& x : vrows) x = value(rng);
    // Scores, sub-block by sub-block (rows past count zero, as the producer fills them); the
    // kernels ask for the V rows' lines on the way (prefetches change no value).
    std::fill(krows.begin() + count * kHd, krows.end(), 0.0f);
    d::LineQueue lines;
    for (int r = 0; r < d::LineQueue::kMaxRows; ++r) lines.rows[r] = reinterpret_cast<const KvWord*>(vrows.data() + r * kHd);
    lines.count = d::LineQueue::kMaxRows * d::LineQueue::kLinesPerRow;
    std::vector<float> wt(kChunk * kH, nan), s(kH * kChunk, nan);
    const KvDtype dtype = count % 2 == 1 ? KvDtype::f16 : KvDtype::bf16;
    std::uniform_int_distribution<int> word(0, 0xFFFF);
    std::vector<KvWord> plane(kChunk * kHd);
    std::vector<float> widened(kChunk * kHd), expected(kChunk * kHd);
    // A queue of the first n plane rows; after the kernel, they must be widened exactly.
    const auto queue_rows = [&](int n) {
      for (KvWord& w : plane) w = static_cast<KvWord>(word(rng));
      std::fill(widened.begin(), widened.end(), nan);
      d::WidenQueue q;
      for (int r = 0; r < n; ++r) {
        q.src[r] = plane.data() + r * kHd;
        q.dst[r] = widened.data() + r * kHd;
      }
      q.vectors = n * d::WidenQueue::kVectorsPerRow;
      q.dtype = dtype;
      return q;
    };
    const auto check_rows = [&](int n) {
      std::vector<const KvWord*> rows(n);
      for (int r = 0; r < n; ++r) rows[r] = plane.data() + r * kHd;
      d::widen_rows_avx512(rows.data(), n, expected.data(), kHd, dtype);
      for (int i = 0; i < n * kHd; ++i) ASSERT_EQ(bits(widened[i]), bits(expected[i])) << "widened on the way, element " << i;
      for (int i = n * kHd; i < kChunk * kHd; ++i) ASSERT_TRUE(std::isnan(widened[i])) << "past the queue: untouched";
    };
    for (int b = 0; b < count; b += kSub) {
      const int n = std::min(kSub, count - b);
      const d::WidenQueue widen = queue_rows(n);
      d::score_rows_heads_in_lanes(qt.data(), kHd, krows.data() + b * kHd, kScale, wt.data() + b * kH, lines, widen);
      check_rows(n);
      d::score_rows_avx512(kH, qt.data(), kHd, krows.data() + b * kHd, kScale, s.data() + b);
    }
    for (int t = 0; t < count; ++t)
      for (int h = 0; h < kH; ++h) ASSERT_EQ(bits(wt[t * kH + h]), bits(s[h * kChunk + t])) << "score, head " << h << ", token " << t;
    // Non-finite scores on two heads (the producer's NaN policy goes through the fold).
    const int last = count - 1;
    wt[last * kH + 3] = s[3 * kChunk + last] = nan;
    wt[0 * kH + 5] = s[5 * kChunk + 0] = -inf;
    // Running states: empty, above the chunk's scores, below them.
    std::vector<float> m(kH), sum(kH), ot(kHd * kH), o(kH * kHd);
    std::vector<SoftmaxStats> st(kH);
    for (int h = 0; h < kH; ++h) {
      m[h] = h % 3 == 0 ? -inf : h % 3 == 1 ? 40.0f : value(rng) - 4.0f;
      sum[h] = h % 3 == 0 ? 0.0f : 1.0f + std::abs(value(rng));
      st[h] = SoftmaxStats{m[h], sum[h]};
      for (int i = 0; i < kHd; ++i) o[h * kHd + i] = ot[i * kH + h] = h % 3 == 0 ? 0.0f : value(rng);
    }
    const std::vector<float> before_fold = wt;
    // Both layouts of o: ot dims-major, oh heads-major (the same values as the reference's o).
    std::vector<float> oh = o, wt_heads = wt, m_heads = m, sum_heads = sum;
    d::fold_heads_in_lanes(wt.data(), count, m.data(), sum.data(), ot.data(), kHd, d::LaneO::dims_major,
                           d::OStart::accumulated);
    d::fold_heads_in_lanes(wt_heads.data(), count, m_heads.data(), sum_heads.data(), oh.data(), kHd, d::LaneO::heads_major,
                           d::OStart::accumulated);
    const int padded = (count + 7) / 8 * 8;
    for (int h = 0; h < kH; ++h) {
      float* sh = s.data() + h * kChunk;
      const float corr = fold_block_max(st[h], d::chunk_max(sh, count));
      if (corr != 1.0f) d::scale_row(o.data() + h * kHd, corr, kHd);
      st[h].s += d::weights_in_place_avx512(sh, count, padded, st[h].m);
    }
    for (int h = 0; h < kH; ++h) {
      EXPECT_EQ(bits(m[h]), bits(st[h].m)) << "max, head " << h;
      EXPECT_EQ(bits(sum[h]), bits(st[h].s)) << "sum, head " << h;
      for (int t = 0; t < padded; ++t) ASSERT_EQ(bits(wt[t * kH + h]), bits(s[h * kChunk + t])) << "weight, head " << h << ", token " << t;
    }
    for (int t = padded * kH; t < kChunk * kH; ++t) EXPECT_EQ(bits(wt[t]), bits(before_fold[t])) << "past padded: untouched";
    for (int h = 0; h < kH; ++h) {
      EXPECT_EQ(bits(m_heads[h]), bits(m[h])) << "heads-major fold: max, head " << h;
      EXPECT_EQ(bits(sum_heads[h]), bits(sum[h])) << "heads-major fold: sum, head " << h;
      for (int i = 0; i < kHd; ++i) {
        ASSERT_EQ(bits(ot[i * kH + h]), bits(o[h * kHd + i])) << "rescaled o, dims-major, head " << h << ", dim " << i;
        ASSERT_EQ(bits(oh[h * kHd + i]), bits(o[h * kHd + i])) << "rescaled o, heads-major, head " << h << ", dim " << i;
      }
    }
    for (int i = 0; i < kChunk * kH; ++i) ASSERT_EQ(bits(wt_heads[i]), bits(wt[i])) << "weights of either layout, " << i;
    // The V pass over the chunk's V rows as plane words of `dtype` (finite values); for even
    // counts the last is the current token's row, null in the row list, its f32 values (which no
    // plane word holds) given apart. Heads-major on the plane rows in one call, widening a
    // sub-block's rows on the way (more vectors than the chunk's steps when count < 8); the
    // dims-major pass and the head-major kernel sub-block by sub-block on the rows widened first,
    // the reference.
    std::vector<KvWord> vplane(kChunk * kHd);
    for (KvWord& w : vplane) w = kv_encode(value(rng), dtype);
    std::vector<const KvWord*> vptr(kChunk);
    for (int r = 0; r < kChunk; ++r) vptr[r] = vplane.data() + r * kHd;
    d::widen_rows_avx512(vptr.data(), kChunk, vrows.data(), kHd, dtype);
    const bool current = count % 2 == 0;
    std::vector<float> cur(kHd);
    for (int i = 0; i < kHd; ++i) cur[i] = value(rng) + 0x1p-20f;
    if (current) {
      vptr[last] = nullptr;
      std::copy(cur.begin(), cur.end(), vrows.begin() + last * kHd);
    }
    const d::WidenQueue widen = queue_rows(kSub);
    d::accumulate_rows_heads_in_lanes(oh.data(), kHd, wt.data(), vptr.data(), count, current ? cur.data() : nullptr, dtype,
                                      lines, widen, d::OStart::accumulated);
    check_rows(kSub);
    for (int b = 0; b < count; b += kSub) {
      const int n = std::min(kSub, count - b);
      d::accumulate_sub_block_heads_in_lanes(ot.data(), kHd, wt.data() + b * kH, vrows.data() + b * kHd, kHd, n, lines);
      d::accumulate_heads_avx512(kH, kHd, o.data(), kHd, s.data() + b, vrows.data() + b * kHd, kHd, n);
    }
    for (int h = 0; h < kH; ++h)
      for (int i = 0; i < kHd; ++i) {
        ASSERT_EQ(bits(ot[i * kH + h]), bits(o[h * kHd + i])) << "o, dims-major, head " << h << ", dim " << i;
        ASSERT_EQ(bits(oh[h * kHd + i]), bits(o[h * kHd + i])) << "o, heads-major, head " << h << ", dim " << i;
      }
    // A split's first chunk (OStart::unwritten): a fresh state whose o holds garbage folds and
    // accumulates to the bits of a fresh state whose o holds zeros, and the fold leaves o alone
    // (a finite garbage value, which a rescale by the first fold's factor 0 would change).
    {
      constexpr float kGarbage = 1234.5f;
      const d::LineQueue no_lines{};
      const d::WidenQueue no_widen{};
      std::vector<float> m_zero(kH, -inf), s_zero(kH, 0.0f), wt_zero = before_fold, o_zero(kH * kHd, 0.0f);
      std::vector<float> m_unw = m_zero, s_unw = s_zero, wt_unw = before_fold, o_unw(kH * kHd, kGarbage);
      d::fold_heads_in_lanes(wt_zero.data(), count, m_zero.data(), s_zero.data(), o_zero.data(), kHd, d::LaneO::heads_major,
                             d::OStart::accumulated);
      d::fold_heads_in_lanes(wt_unw.data(), count, m_unw.data(), s_unw.data(), o_unw.data(), kHd, d::LaneO::heads_major,
                             d::OStart::unwritten);
      for (int h = 0; h < kH; ++h) {
        EXPECT_EQ(bits(m_unw[h]), bits(m_zero[h])) << "unwritten o: max, head " << h;
        EXPECT_EQ(bits(s_unw[h]), bits(s_zero[h])) << "unwritten o: sum, head " << h;
      }
      for (int i = 0; i < kChunk * kH; ++i) ASSERT_EQ(bits(wt_unw[i]), bits(wt_zero[i])) << "unwritten o: weight " << i;
      for (float x : o_unw) ASSERT_EQ(bits(x), bits(kGarbage)) << "unwritten o: the fold does not touch it";
      const float* cur_row = current ? cur.data() : nullptr;
      d::accumulate_rows_heads_in_lanes(o_zero.data(), kHd, wt_zero.data(), vptr.data(), count, cur_row, dtype, no_lines,
                                        no_widen, d::OStart::accumulated);
      d::accumulate_rows_heads_in_lanes(o_unw.data(), kHd, wt_unw.data(), vptr.data(), count, cur_row, dtype, no_lines,
                                        no_widen, d::OStart::unwritten);
      for (int i = 0; i < kH * kHd; ++i) ASSERT_EQ(bits(o_unw[i]), bits(o_zero[i])) << "unwritten o: V pass, element " << i;
    }
    // The partials of either layout: the same rows.
    constexpr long kStride = 2 + kHd + 6;
    std::vector<float> part_dims(kH * kStride, nan), part_heads(kH * kStride, nan);
    d::write_partials_heads_in_lanes(ot.data(), kHd, m.data(), sum.data(), part_dims.data(), kStride, d::LaneO::dims_major);
    d::write_partials_heads_in_lanes(oh.data(), kHd, m.data(), sum.data(), part_heads.data(), kStride, d::LaneO::heads_major);
    for (int h = 0; h < kH; ++h) {
      ASSERT_EQ(bits(part_heads[h * kStride]), bits(m[h])) << "partial m, head " << h;
      ASSERT_EQ(bits(part_heads[h * kStride + 1]), bits(sum[h])) << "partial s, head " << h;
      for (int i = 0; i < kHd; ++i)
        ASSERT_EQ(bits(part_heads[h * kStride + 2 + i]), bits(o[h * kHd + i])) << "partial o, head " << h << ", dim " << i;
      for (long i = 0; i < kStride; ++i) ASSERT_EQ(bits(part_heads[h * kStride + i]), bits(part_dims[h * kStride + i]));
    }
  }
}

TEST(FastSchedule, FixedChunksAndBoundedSplits) {
  EXPECT_EQ(cpu::fast_schedule(0).splits, 0);
  for (int visible : {1, 63, 64, 65, 2047, 2048, 2049, 8192, 131072, 1 << 20}) {
    SCOPED_TRACE(visible);
    const cpu::FastSchedule s = cpu::fast_schedule(visible);
    EXPECT_EQ(s.chunks, (visible + kFastChunkTokens - 1) / kFastChunkTokens);
    EXPECT_GE(s.splits, 1);
    EXPECT_LE(s.splits, s.chunks);
    // The partials must fit the scratch every route reserves (scratch_needs sizes nwg of them).
    EXPECT_LE(s.splits, pinned_schedule(visible).nwg);
    // Splits of at least kFastMinChunksPerSplit chunks (one fewer split would not hold them
    // all), as many as the cap allows.
    EXPECT_LT((s.splits - 1) * kFastMinChunksPerSplit, s.chunks);
    EXPECT_TRUE(s.splits == kFastMaxSplits || s.splits * kFastMinChunksPerSplit >= s.chunks);
  }
  EXPECT_EQ(cpu::fast_schedule(2048).splits, 8) << "a 2,048-token window: 8 splits of 4 chunks";
}

// The splits' runs: contiguous, in order, covering every chunk once; equal (within one chunk)
// where not tapered; where tapered, no run longer than the one before it (but for one chunk of
// rounding), the first about kFastSplitTaper times the last, the last kFastMinChunksPerSplit
// chunks or more.
TEST(FastSchedule, SplitRunsCoverTheChunksAndTaperOnlyWhereLong) {
  EXPECT_EQ(cpu::fast_schedule(0).first_chunk(0), 0) << "nothing visible: no splits to divide by";
  for (int visible = 1; visible <= (1 << 20); visible = visible * 5 / 4 + 1) {
    SCOPED_TRACE(visible);
    const cpu::FastSchedule s = cpu::fast_schedule(visible);
    ASSERT_EQ(s.first_chunk(0), 0);
    ASSERT_EQ(s.first_chunk(s.splits), s.chunks);
    int shortest = s.chunks, longest = 0, previous = s.chunks;
    for (int i = 0; i < s.splits; ++i) {
      const int run = s.first_chunk(i + 1) - s.first_chunk(i);
      ASSERT_GE(run, 1) << "split " << i;
      if (s.tapered) {
        EXPECT_LE(run, previous + 1) << "split " << i << " (integer rounding allows one chunk)";
      }
      previous = run;
      shortest = std::min(shortest, run);
      longest = std::max(longest, run);
    }
    if (!s.tapered) {
      EXPECT_LE(longest - shortest, 1);
      continue;
    }
    const int last = s.chunks - s.first_chunk(s.splits - 1);
    const int first = s.first_chunk(1);
    EXPECT_GE(last, kFastMinChunksPerSplit);
    EXPECT_GE(first, (kFastSplitTaper - 1) * last) << "the first split about kFastSplitTaper times the last";
    EXPECT_LE(first, kFastSplitTaper * last + kFastSplitTaper);
  }
  EXPECT_FALSE(cpu::fast_schedule(2048).tapered) << "16 tasks for 16 workers: equal runs";
  EXPECT_FALSE(cpu::fast_schedule(8192).tapered);
  EXPECT_TRUE(cpu::fast_schedule(16384).tapered);
  EXPECT_TRUE(cpu::fast_schedule(131072).tapered);
}

struct FastCase {
  const char* name;
  int n_heads, n_kv_heads, head_dim;
  PlaneConfig cfg;
  int position;
};

// The sweep: Muse Glimmer shapes and odd ones, depths that cover one chunk, ragged chunks and
// every split count, every head-block and dim-vector remainder of the micro-kernels.
std::vector<FastCase> fast_cases() {
  return {
      {"muse growing 1 chunk", 32, 2, 128, test::growing_config(2, 128, 64, 4096), 40},
      {"muse growing ragged", 32, 2, 128, test::growing_config(2, 128, 4096, 8192), 2100},
      {"muse growing 64 chunks", 32, 2, 128, test::growing_config(2, 128, 4096, 8192), 4095},
      {"muse growing 4 chunks per split", 32, 2, 128, test::growing_config(2, 128, 8192, 8192), 8191},
      {"muse ring wrapped", 32, 2, 128, test::ring_config(2, 128, 2048, 2048, 1 << 20), 2600},
      {"muse ring partially wrapped ragged", 32, 2, 128, test::ring_config(2, 128, 1000, 1037, 1 << 20), 3001},
      {"gqa 6:3 head_dim 36", 6, 3, 36, test::growing_config(3, 36, 64, 1024), 300},
      {"gqa 5:1 head_dim 20 ring", 5, 1, 20, test::ring_config(1, 20, 90, 100, 1000), 500},
      {"mha 4:4 head_dim 256", 4, 4, 256, test::growing_config(4, 256, 64, 1024), 200},
      // Head blocks 6 + 3 and dim vectors 2 + 2 + 1; a ring with an odd KV head count (one KV
      // head per task).
      {"gqa 27:3 head_dim 40 ring", 27, 3, 40, test::ring_config(3, 40, 300, 333, 4000), 1200},
      // Three heads per block, the F16C transpose, a ring walked two KV heads per task (2 tasks'
      // groups).
      {"gqa 12:4 head_dim 64 ring", 12, 4, 64, test::ring_config(4, 64, 700, 700, 4000), 1900},
      {"gqa 12:4 head_dim 64 growing", 12, 4, 64, test::growing_config(4, 64, 1024, 4000), 777},
      // Scores from widened K rows: 8 heads per KV head (one head vector), and a head_dim whose
      // rows round up to the row stride but are widened row by row.
      {"gqa 16:2 head_dim 128 ring", 16, 2, 128, test::ring_config(2, 128, 1024, 1024, 8000), 2500},
      {"muse heads head_dim 124 growing", 32, 2, 124, test::growing_config(2, 124, 1024, 4000), 901},
  };
}

// Every route the plane state allows, fast producer, against the f64 reference fed the rows the
// route reads; and the same call under the exact twin for comparison of accuracy.
TEST(FastProducer, EveryRouteMeetsTheF64Bound) {
  const std::vector<FastCase> cases = fast_cases();
  std::mt19937 rng(5);
  double worst = 0.0;
  const test::ProducerScope scope(cpu::CpuProducer::fast);
  for (const FastCase& c : cases) {
    const HeadShape shape = test::make_shape(c.n_heads, c.n_kv_heads, c.head_dim);
    const HostPlane plane = test::build_plane(c.cfg, c.position, rng);
    const Token tok = test::random_token(shape, rng);
    for (Route r : {Route::vec, Route::splitk, Route::interleaved, Route::staged}) {
      SCOPED_TRACE(fmt::format("{} / {}", c.name, route_name(r)));
      const test::RouteRun run = test::run_on_copy(r, plane, c.position, shape, tok);
      if (!run.status.ok()) {
        EXPECT_EQ(run.status.code(), ErrorCode::invalid_argument) << run.status.to_string();
        continue;
      }
      const int visible = run.plane.state().len;
      const test::RowFetch rows = test::logical_rows(run.plane, c.position, r == Route::interleaved ? &tok : nullptr);
      const std::vector<double> ref = test::reference_from(shape, tok.q, visible, rows);
      const double err = relative_error(run.out.data(), ref.data(), ref.size());
      EXPECT_LT(err, kSpecTolerance);
      EXPECT_LT(err, kTightTolerance);
      worst = std::max(worst, err);
    }
  }
  RecordProperty("worst_relative_error", fmt::format("{:.3g}", worst));
  std::printf("[ fast producer ] worst relative error vs the f64 reference: %.3g\n", worst);
}

// The 16-lane kernels (producer_fast_avx512.cpp) give the 8-lane kernels' bits on every route,
// case and remainder of the sweep above (16 heads in one score block, 8-head accumulate blocks,
// 32-, 16- and masked 8-dim vectors): each lane is the same fmaf chain.
TEST(FastProducer, VectorWidthsGiveTheSameBits) {
  if (!cpu::detail::cpu_has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512F: only the 8-lane kernels run here";
  const cpu::CpuVectors before = *cpu::vectors();
  std::mt19937 rng(6);
  const test::ProducerScope scope(cpu::CpuProducer::fast);
  int compared = 0;
  for (const KvDtype dtype : test::kAllDtypes)
  for (FastCase c : fast_cases()) {
    c.cfg.kv_dtype = dtype;  // the 16-lane row widening has an f16 and a bf16 form
    const HeadShape shape = test::make_shape(c.n_heads, c.n_kv_heads, c.head_dim);
    const HostPlane plane = test::build_plane(c.cfg, c.position, rng);
    const Token tok = test::random_token(shape, rng);
    for (Route r : {Route::vec, Route::splitk, Route::interleaved, Route::staged}) {
      SCOPED_TRACE(fmt::format("{} {} / {}", c.name, kv_dtype_name(dtype), route_name(r)));
      cpu::set_vectors(cpu::CpuVectors::avx2);
      const test::RouteRun narrow = test::run_on_copy(r, plane, c.position, shape, tok);
      cpu::set_vectors(cpu::CpuVectors::avx512);
      const test::RouteRun wide = test::run_on_copy(r, plane, c.position, shape, tok);
      ASSERT_EQ(narrow.status.ok(), wide.status.ok());
      if (!narrow.status.ok()) continue;
      EXPECT_TRUE(test::same_bits(narrow.out, wide.out));
      ++compared;
    }
  }
  cpu::set_vectors(before);
  EXPECT_GT(compared, 60) << "the sweep must reach most routes of most cases, in both dtypes";
}

// Heads in lanes widens its rows inside the kernels on AMD's cores and before each kernel
// elsewhere (cpu::detail::cpu_widen_in_kernels): both paths forced in turn on the same calls
// give the same output arrays bit for bit, each within the f64 bound. Muse Glimmer's shape (16
// query heads per KV head, 128 dims: the only one that runs heads in lanes), both dtypes, every
// route, at lengths of one short chunk, one sub-block past a chunk, ragged tails of a chunk and
// of a sub-block, several chunks per split, and a wrapped ring walked two KV heads per task.
TEST(FastProducer, RowsWidenedInOrBeforeTheKernelsGiveTheSameBits) {
  if (!cpu::detail::cpu_has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512F: heads in lanes does not run here";
  // The process's choices back after the test, whatever its outcome.
  struct Restore {
    cpu::CpuVectors vectors;
    ~Restore() {
      cpu::detail::force_widen_in_kernels(std::nullopt);
      cpu::set_vectors(vectors);
    }
  } const restore{*cpu::vectors()};
  cpu::set_vectors(cpu::CpuVectors::avx512);
  const test::ProducerScope scope(cpu::CpuProducer::fast);
  const HeadShape shape = test::make_shape(32, 2, 128);
  struct LengthCase {
    const char* name;
    PlaneConfig cfg;
    int position;
  };
  const std::vector<LengthCase> cases = {
      {"growing, 1 token", test::growing_config(2, 128, 64, 4096), 0},
      {"growing, 13 tokens", test::growing_config(2, 128, 64, 4096), 12},
      {"growing, 64 tokens", test::growing_config(2, 128, 64, 4096), 63},
      {"growing, 81 tokens", test::growing_config(2, 128, 4096, 8192), 80},
      {"growing, 1,001 tokens", test::growing_config(2, 128, 4096, 8192), 1000},
      {"growing, 2,100 tokens", test::growing_config(2, 128, 4096, 8192), 2099},
      {"growing, 8,190 tokens", test::growing_config(2, 128, 8192, 8192), 8189},
      {"ring wrapped", test::ring_config(2, 128, 2048, 2048, 1 << 20), 2600},
      {"ring partially wrapped, ragged", test::ring_config(2, 128, 1000, 1037, 1 << 20), 3001},
  };
  std::mt19937 rng(12);
  int compared = 0;
  for (const KvDtype dtype : test::kAllDtypes)
    for (LengthCase c : cases) {
      c.cfg.kv_dtype = dtype;
      const HostPlane plane = test::build_plane(c.cfg, c.position, rng);
      const Token tok = test::random_token(shape, rng);
      for (Route r : {Route::vec, Route::splitk, Route::interleaved, Route::staged}) {
        SCOPED_TRACE(fmt::format("{} {} / {}", c.name, kv_dtype_name(dtype), route_name(r)));
        cpu::detail::force_widen_in_kernels(true);
        const test::RouteRun in_kernels = test::run_on_copy(r, plane, c.position, shape, tok);
        cpu::detail::force_widen_in_kernels(false);
        const test::RouteRun separate = test::run_on_copy(r, plane, c.position, shape, tok);
        ASSERT_EQ(in_kernels.status.ok(), separate.status.ok());
        if (!in_kernels.status.ok()) continue;
        ASSERT_EQ(in_kernels.out.size(), separate.out.size());
        for (std::size_t i = 0; i < separate.out.size(); ++i)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(in_kernels.out[i]), std::bit_cast<std::uint32_t>(separate.out[i]))
              << "output " << i << ": " << in_kernels.out[i] << " widened in the kernels, " << separate.out[i]
              << " widened before them";
        const int visible = separate.plane.state().len;
        const test::RowFetch rows =
            test::logical_rows(separate.plane, c.position, r == Route::interleaved ? &tok : nullptr);
        const std::vector<double> ref = test::reference_from(shape, tok.q, visible, rows);
        EXPECT_LT(relative_error(separate.out.data(), ref.data(), ref.size()), kTightTolerance);
        EXPECT_LT(relative_error(in_kernels.out.data(), ref.data(), ref.size()), kTightTolerance);
        ++compared;
      }
    }
  EXPECT_GT(compared, 50) << "the sweep must reach most routes of every length, in both dtypes";
}

TEST(FastProducer, VectorWidthNamesAreCheckedAgainstTheCpu) {
  EXPECT_EQ(*cpu::parse_cpu_vectors("avx2"), cpu::CpuVectors::avx2);
  const Result<cpu::CpuVectors> wide = cpu::parse_cpu_vectors("avx512");
  EXPECT_EQ(wide.ok(), cpu::detail::cpu_has_avx512());
  if (!wide.ok()) {
    EXPECT_EQ(wide.status().code(), ErrorCode::unsupported);
  }
  const Result<cpu::CpuVectors> bad = cpu::parse_cpu_vectors("sse");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::invalid_argument);
  EXPECT_NE(bad.status().message().find("avx2"), std::string::npos);
}

class FastThreads : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(cpu::set_threads(0).ok()); }
};

// P1: bits independent of the worker count (1..16, more workers than tasks included) and of the
// run; P6: splitk over the wrapped ring gives the bits of vec over the same rows unwrapped, at a
// depth with several chunks per split (equal runs at 4,096 tokens, tapered at 20,480).
void check_bits_do_not_depend_on_workers(int window, int position) {
  ASSERT_EQ(cpu::fast_schedule(window - 1).tapered, window > 16384) << "the case's schedule is not the one meant";
  const HeadShape shape = test::make_shape(32, 2, 128);
  std::mt19937 rng(77);
  const PlaneConfig ring = test::ring_config(2, 128, window, window, 1 << 20);
  std::vector<std::vector<float>> ks, vs;
  HostPlane plane = HostPlane::create(ring).value();
  const std::size_t row = 2 * 128;
  for (int p = 0; p < position; ++p) {
    ks.push_back(test::random_values(row, rng));
    vs.push_back(test::random_values(row, rng));
    ASSERT_TRUE(plane.append_row(p, ks.back().data(), vs.back().data()).ok());
  }
  const Token tok = test::random_token(shape, rng);
  const test::ProducerScope scope(cpu::CpuProducer::fast);
  ASSERT_TRUE(cpu::set_threads(1).ok());
  const test::RouteRun first = test::run_on_copy(Route::splitk, plane, position, shape, tok);
  ASSERT_TRUE(first.status.ok()) << first.status.to_string();
  ASSERT_NE(first.plane.state().origin_physical, 0) << "the ring must be wrapped";
  for (int threads : {1, 2, 3, 5, 8, 16}) {
    ASSERT_TRUE(cpu::set_threads(threads).ok());
    for (int rep = 0; rep < 2; ++rep) {
      const test::RouteRun again = test::run_on_copy(Route::splitk, plane, position, shape, tok);
      ASSERT_TRUE(again.status.ok());
      EXPECT_TRUE(test::same_bits(again.out, first.out)) << threads << " workers, run " << rep;
    }
  }
  // The same window unwrapped: positions 0 .. window-2 hold the window's oldest rows.
  HostPlane flat = HostPlane::create(ring).value();
  const int oldest = position + 1 - window;
  for (int i = 0; i + 1 < window; ++i)
    ASSERT_TRUE(flat.append_row(i, ks[static_cast<std::size_t>(oldest + i)].data(),
                                vs[static_cast<std::size_t>(oldest + i)].data()).ok());
  const test::RouteRun vec = test::run_on_copy(Route::vec, flat, window - 1, shape, tok);
  ASSERT_TRUE(vec.status.ok()) << vec.status.to_string();
  EXPECT_TRUE(test::same_bits(vec.out, first.out)) << "P6: splitk over the wrapped ring differs from vec unwrapped";
  // The same rows in a head-major growing plane: a task walks one KV head there and two side by
  // side on the token-major ring; the time order changes, the arithmetic and so the bits do not.
  HostPlane grown = HostPlane::create(test::growing_config(2, 128, window, 1 << 20)).value();
  for (int i = 0; i + 1 < window; ++i)
    ASSERT_TRUE(grown.append_row(i, ks[static_cast<std::size_t>(oldest + i)].data(),
                                 vs[static_cast<std::size_t>(oldest + i)].data()).ok());
  const test::RouteRun head_major = test::run_on_copy(Route::vec, grown, window - 1, shape, tok);
  ASSERT_TRUE(head_major.status.ok()) << head_major.status.to_string();
  EXPECT_TRUE(test::same_bits(head_major.out, first.out)) << "vec on the growing plane differs from splitk on the ring";
}

TEST_F(FastThreads, BitsDoNotDependOnWorkersOrRuns) { check_bits_do_not_depend_on_workers(4096, 9000); }

TEST_F(FastThreads, TaperedSplitsDoNotDependOnWorkersOrRuns) { check_bits_do_not_depend_on_workers(20480, 23000); }

// A NaN in one K row must reach the output of its KV head's query heads (N1), not vanish.
TEST(FastProducer, NanInKeyPropagates) {
  const HeadShape shape = test::make_shape(8, 2, 64);
  std::mt19937 rng(9);
  const PlaneConfig cfg = test::growing_config(2, 64, 256, 1024);
  for (int bad_position : {0, 63, 64, 130}) {
    SCOPED_TRACE(bad_position);
    HostPlane plane = test::build_plane(cfg, 200, rng);
    // An f16 NaN written straight into the plane (KV head 0, dim 5): what a store policy does
    // with a NaN activation is not this test's subject, what the producer does with one is.
    constexpr std::uint16_t kHalfNan = 0x7e00;
    plane.k()[plane.strides().offset(bad_position, 0) + 5] = kHalfNan;
    const Token tok = test::random_token(shape, rng);
    const test::ProducerScope scope(cpu::CpuProducer::fast);
    const test::RouteRun run = test::run_on_copy(Route::vec, plane, 200, shape, tok);
    ASSERT_TRUE(run.status.ok());
    for (int h = 0; h < 4; ++h) EXPECT_TRUE(std::isnan(run.out[static_cast<std::size_t>(h) * 64])) << "head " << h;
    for (int h = 4; h < 8; ++h) EXPECT_FALSE(std::isnan(run.out[static_cast<std::size_t>(h) * 64])) << "head " << h;
  }
}

}  // namespace
}  // namespace ladder
