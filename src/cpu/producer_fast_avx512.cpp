// The fast CPU producer's 16-lane micro-kernels (see producer_fast_avx512.hpp). Shapes: a score
// block is up to 16 heads x 16 tokens, one register per head (16 accumulators, one K vector, one
// broadcast: 18 of 32 registers); an accumulate block is up to 8 heads x 32 dims (16
// accumulators, two V vectors, one broadcast), the last dims of a row masked.
#include "cpu/producer_fast_avx512.hpp"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "cpu/producer_fast_exp.hpp"
#include "ladder/heuristics.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12's avx512fintrin.h builds shuffles on _mm512_undefined_ps(), which its own
// -Wuninitialized then reports at every use: a false positive of the header, silenced here only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define LADDER_AVX512_KERNELS 1
#endif

namespace ladder::cpu::detail {

#if defined(LADDER_AVX512_KERNELS)
namespace {

constexpr int kLanes16 = 16;           // floats per 512-bit register
constexpr int kSubTokens16 = 16;       // tokens per transposed K tile: one register
constexpr int kScoreHeads16 = 16;      // heads per score block
constexpr int kAccumHeads16 = 8;       // heads per accumulate block
constexpr int kAccumVectors16 = 2;     // 16-dim vectors per accumulate block
constexpr int kHalfLanes = 8;          // a row's last dims may be one 8-dim half vector
constexpr __mmask16 kAllLanes = 0xFFFF;
constexpr int kRunningLanes = 8;       // chunk_max's and weights_in_place's running lanes (the 8-lane path's order)
constexpr int kHeadLaneDims = 16;      // o dims per accumulate pass with heads in lanes: 16 accumulators
constexpr LineQueue kNoLines{};
constexpr WidenQueue kNoWiden{};
constexpr __mmask16 kLowHalf = 0x00FF;

// qt: the block's first head of a [hd][qt_stride] transposed q.
template <int H>
__attribute__((target("avx512f"))) void score_block16(const float* qt, int qt_stride, int hd, const float* kt,
                                                     float scale, float* s) {
  __m512 acc[H];
#pragma GCC unroll 16
  for (int h = 0; h < H; ++h) acc[h] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int d = 0; d < hd; ++d) {
    const __m512 k = _mm512_loadu_ps(kt + d * kSubTokens16);
    const float* qd = qt + d * qt_stride;
#pragma GCC unroll 16
    for (int h = 0; h < H; ++h) acc[h] = _mm512_fmadd_ps(_mm512_set1_ps(qd[h]), k, acc[h]);
  }
  const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 16
  for (int h = 0; h < H; ++h) _mm512_storeu_ps(s + h * kFastChunkTokens, _mm512_mul_ps(acc[h], sc));
}

// softmax_exp (include/ladder/softmax.hpp) on 16 floats: producer_fast_exp.hpp's 8-lane function
// in 16 lanes, the same operations in the same order.
__attribute__((target("avx512f"))) __m512 softmax_exp16(__m512 x) {
  using C = ExpConstants;
  constexpr float kLog2e = C::kLog2e, kLn2Hi = C::kLn2Hi, kLn2Lo = C::kLn2Lo, kMinArg = C::kMinArg;
  constexpr int kExponentBias = C::kExponentBias, kMantissaBits = C::kMantissaBits;
  const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __mmask16 too_small = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kMinArg), _CMP_NGE_UQ);  // also NaN, -inf
  const __m512 xc = _mm512_min_ps(x, _mm512_setzero_ps());
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(C::kHorner[0]);
#pragma GCC unroll 8
  for (int k = 1; k < C::kTerms; ++k) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(C::kHorner[k]));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(kExponentBias)),
                                      kMantissaBits);
  __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
  y = _mm512_mask_blend_ps(too_small, y, _mm512_setzero_ps());
  return _mm512_mask_blend_ps(is_nan, y, x);
}

// c[h] = column h of the 16 x 16 matrix whose rows are r[0..15] (in place): unpack pairs of
// rows, shuffle quads, then a 4 x 4 transpose of the 128-bit blocks.
[[gnu::always_inline]] inline __attribute__((target("avx512f"))) void transpose16(__m512 (&r)[kLanes16]) {
  __m512 a[kLanes16], b[kLanes16];
  for (int i = 0; i < kLanes16 / 2; ++i) {
    a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  constexpr int kPairs01 = 0x44, kPairs23 = 0xEE;  // elements 0, 1 / 2, 3 of each operand's block
  for (int i = 0; i < kLanes16 / 4; ++i) {
    b[4 * i + 0] = _mm512_shuffle_ps(a[4 * i], a[4 * i + 2], kPairs01);
    b[4 * i + 1] = _mm512_shuffle_ps(a[4 * i], a[4 * i + 2], kPairs23);
    b[4 * i + 2] = _mm512_shuffle_ps(a[4 * i + 1], a[4 * i + 3], kPairs01);
    b[4 * i + 3] = _mm512_shuffle_ps(a[4 * i + 1], a[4 * i + 3], kPairs23);
  }
  // b[4i + m], block L: rows 4i..4i+3 of column 4L + m.
  constexpr int kBlocks01 = 0x44, kBlocks23 = 0xEE, kEvenBlocks = 0x88, kOddBlocks = 0xDD;
  for (int m = 0; m < 4; ++m) {
    const __m512 e0 = _mm512_shuffle_f32x4(b[m], b[4 + m], kBlocks01);
    const __m512 e1 = _mm512_shuffle_f32x4(b[m], b[4 + m], kBlocks23);
    const __m512 e2 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], kBlocks01);
    const __m512 e3 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], kBlocks23);
    r[0 + m] = _mm512_shuffle_f32x4(e0, e2, kEvenBlocks);
    r[4 + m] = _mm512_shuffle_f32x4(e0, e2, kOddBlocks);
    r[8 + m] = _mm512_shuffle_f32x4(e1, e3, kEvenBlocks);
    r[12 + m] = _mm512_shuffle_f32x4(e1, e3, kOddBlocks);
  }
}

// 16 plane elements of `dtype` as f32, exact: F16C's conversion for f16, a 16-bit shift for bf16
// (a bf16 is the high half of its f32).
[[gnu::always_inline]] inline __attribute__((target("avx512f"))) __m512 widen16(const KvWord* src, KvDtype dtype) {
  constexpr int kBf16Shift = 16;
  const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
  return dtype == KvDtype::bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(words), kBf16Shift))
                                : _mm512_cvtph_ps(words);
}

// A read prefetch of one line: into L2 (locality 2, as producer_fast.cpp's prefetch_rows), or into
// L1 as well (locality 3) where the line queue asks for it (cpu_prefetch_into_l1).
[[gnu::always_inline]] inline void ask_read_line(const char* line, bool into_l1) {
  if (into_l1)
    __builtin_prefetch(line, kPrefetchRead, kIntoL1);
  else
    __builtin_prefetch(line, kPrefetchRead, kIntoL2);
}

// The side work the heads-in-lanes kernels thread between their FMAs, a row at a time: the
// kernel's steps (a dim of the scores, a token of the V pass; 16 FMAs each) go in groups of
// kGroupSteps, and group g widens row g of the widen queue, one vector per step at fixed offsets
// from two pointers read once, and asks for line group g of the line queue (kLinesPerRow lines:
// row g's, or past the rows, lines to be written), one every kStepsPerAsk steps. Per vector and
// per line, a queue indexed by a running count (a division, a remainder, two pointer loads and
// two bounds tests) cost the score kernel ~15 % of its rate (docs/perf.md, 2026-12-06, change 58).
struct GroupWork {
  static constexpr int kGroupSteps = WidenQueue::kVectorsPerRow;
  static constexpr int kStepsPerAsk = kGroupSteps / LineQueue::kLinesPerRow;
  static_assert(kStepsPerAsk * LineQueue::kLinesPerRow == kGroupSteps, "a row's lines spread evenly over its group");
  const KvWord* src = nullptr;  // the row to widen (none: null)
  float* dst = nullptr;
  const char* line_row = nullptr;         // the row whose lines to ask for (none: null)
  const char* const* write = nullptr;     // else up to kLinesPerRow lines to be written
  int writes = 0;
};

// Groups the queues need: one per widened row, one per row of lines and per kLinesPerRow lines
// to be written.
[[gnu::always_inline]] inline int work_groups(const LineQueue& lines, const WidenQueue& widen) {
  const int line_groups = (lines.total() + LineQueue::kLinesPerRow - 1) / LineQueue::kLinesPerRow;
  const int widen_rows = widen.vectors / WidenQueue::kVectorsPerRow;
  return line_groups > widen_rows ? line_groups : widen_rows;
}

[[gnu::always_inline]] inline GroupWork group_work(const LineQueue& lines, const WidenQueue& widen, int g) {
  using L = LineQueue;
  GroupWork w;
  if (g < widen.vectors / WidenQueue::kVectorsPerRow) {
    w.src = widen.src[g];
    w.dst = widen.dst[g];
  }
  const int rows = lines.count / L::kLinesPerRow;
  if (g < rows) {
    w.line_row = reinterpret_cast<const char*>(lines.rows[g]);
    return w;
  }
  const int first = (g - rows) * L::kLinesPerRow;
  if (first < lines.write_count) {
    w.write = lines.write_lines + first;
    w.writes = lines.write_count - first < L::kLinesPerRow ? lines.write_count - first : L::kLinesPerRow;
  }
  return w;
}

// Step j (< kGroupSteps; a constant once unrolled) of a group's work: vector j of its row widened
// (exact, as widen_rows_avx512), and at every kStepsPerAsk-th step one line asked for: a row's
// line read (ask_read_line), a line to be written with the intent to write (`prefetchw`).
[[gnu::always_inline]] inline __attribute__((target("avx512f,prfchw"))) void group_step(const GroupWork& w, int j,
                                                                                      KvDtype dtype, bool into_l1) {
  constexpr int kDims = WidenQueue::kVectorDims;
  if (w.src != nullptr) _mm512_storeu_ps(w.dst + j * kDims, widen16(w.src + j * kDims, dtype));
  if (j % GroupWork::kStepsPerAsk != 0) return;
  const int k = j / GroupWork::kStepsPerAsk;
  if (w.line_row != nullptr) {
    ask_read_line(w.line_row + k * kCacheLineBytes, into_l1);
  } else if (k < w.writes) {
    __builtin_prefetch(w.write[k], kPrefetchWrite, kIntoL1);
  }
}

// Every group from `from` on, at once: what a short sub-block or chunk left undone.
[[gnu::always_inline]] inline __attribute__((target("avx512f,prfchw"))) void finish_groups(const LineQueue& lines,
                                                                                        const WidenQueue& widen,
                                                                                        int from) {
  const int groups = work_groups(lines, widen);
  for (int g = from; g < groups; ++g) {
    const GroupWork w = group_work(lines, widen, g);
#pragma GCC unroll 8
    for (int j = 0; j < GroupWork::kGroupSteps; ++j) group_step(w, j, widen.dtype, lines.into_l1);
  }
}

// Group g of a kernel's steps: step(j) for j < kGroupSteps (a constant once unrolled), the group's
// side work beside each.
template <class Step>
[[gnu::always_inline]] inline __attribute__((target("avx512f,prfchw"))) void steps_with_group_work(
    const LineQueue& lines, const WidenQueue& widen, int g, Step&& step) {
  const GroupWork w = group_work(lines, widen, g);
#pragma GCC unroll 8
  for (int j = 0; j < GroupWork::kGroupSteps; ++j) {
    group_step(w, j, widen.dtype, lines.into_l1);
    step(j);
  }
}

// Row line i < lines.count read (the dims-major V pass, which spreads its lines over its dim
// blocks, not in groups).
[[gnu::always_inline]] inline void ask_row_line(const LineQueue& lines, int i) {
  using L = LineQueue;
  const unsigned u = static_cast<unsigned>(i);
  ask_read_line(reinterpret_cast<const char*>(lines.rows[u / L::kLinesPerRow]) + u % L::kLinesPerRow * kCacheLineBytes,
                lines.into_l1);
}

// One dim's step of the row scores: acc[t] += q (the dim's heads) * K row t's element d.
[[gnu::always_inline]] inline __attribute__((target("avx512f"))) void score_dim_step(
    __mmask16 heads_mask, const float* qt, int qt_stride, const float* krows, int d, __m512 (&acc)[kSubTokens16]) {
  const __m512 q = _mm512_maskz_loadu_ps(heads_mask, qt + d * qt_stride);
  const float* kd = krows + d;
#pragma GCC unroll 16
  for (int t = 0; t < kSubTokens16; ++t) acc[t] = _mm512_fmadd_ps(q, _mm512_set1_ps(kd[t * kWideRowDims]), acc[t]);
}

// acc[t] = scale * (lanes `heads_mask` of qt's dim rows . K row t), t < 16, each lane one fmaf
// chain over d from 0: the row scores of both layouts (score_rows16 transposes them,
// score_rows_heads_in_lanes keeps them token-major); the dims in groups of GroupWork's, each
// widening a row of `widen` and asking for a row's lines of `lines` on the way (at 128 dims, 16
// groups: a sub-block's rows).
[[gnu::always_inline]] inline __attribute__((target("avx512f,prfchw"))) void row_score_tile(
    __mmask16 heads_mask, const float* qt, int qt_stride, int hd, const float* krows, float scale,
    const LineQueue& lines, const WidenQueue& widen, __m512 (&acc)[kSubTokens16]) {
  constexpr int kGroup = GroupWork::kGroupSteps;
#pragma GCC unroll 16
  for (int t = 0; t < kSubTokens16; ++t) acc[t] = _mm512_setzero_ps();
  int g = 0;
  int d = 0;
  for (; d + kGroup <= hd; d += kGroup, ++g)
    steps_with_group_work(lines, widen, g, [&](int j) __attribute__((always_inline, target("avx512f"))) {
      score_dim_step(heads_mask, qt, qt_stride, krows, d + j, acc);
    });
  for (; d < hd; ++d) score_dim_step(heads_mask, qt, qt_stride, krows, d, acc);  // a ragged head_dim's last dims
  const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 16
  for (int t = 0; t < kSubTokens16; ++t) acc[t] = _mm512_mul_ps(acc[t], sc);
  finish_groups(lines, widen, g);
}

// Up to 16 heads (lanes `heads_mask` of qt's rows) x 16 tokens from K rows.
__attribute__((target("avx512f,prfchw"))) void score_rows16(__mmask16 heads_mask, int heads, const float* qt, int qt_stride,
                                                    int hd, const float* krows, float scale, float* s) {
  __m512 acc[kSubTokens16];
  row_score_tile(heads_mask, qt, qt_stride, hd, krows, scale, kNoLines, kNoWiden, acc);
  transpose16(acc);
  for (int h = 0; h < heads; ++h) _mm512_storeu_ps(s + h * kFastChunkTokens, acc[h]);
}

// DB 16-dim vectors of H heads; the last vector's lanes are `last` (a row's 8-dim tail).
template <int H, int DB>
__attribute__((target("avx512f"))) void accumulate_block16(float* o, int o_stride, const float* w, const float* v,
                                                          int v_stride, int n, __mmask16 last) {
  __m512 acc[H][DB];
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 2
    for (int b = 0; b < DB; ++b)
      acc[h][b] = _mm512_maskz_loadu_ps(b == DB - 1 ? last : kAllLanes, o + h * o_stride + b * kLanes16);
#pragma GCC unroll 2
  for (int t = 0; t < n; ++t) {
    __m512 vt[DB];
#pragma GCC unroll 2
    for (int b = 0; b < DB; ++b)
      vt[b] = _mm512_maskz_loadu_ps(b == DB - 1 ? last : kAllLanes, v + t * v_stride + b * kLanes16);
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) {
      const __m512 wh = _mm512_set1_ps(w[h * kFastChunkTokens + t]);
#pragma GCC unroll 2
      for (int b = 0; b < DB; ++b) acc[h][b] = _mm512_fmadd_ps(wh, vt[b], acc[h][b]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 2
    for (int b = 0; b < DB; ++b)
      _mm512_mask_storeu_ps(o + h * o_stride + b * kLanes16, b == DB - 1 ? last : kAllLanes, acc[h][b]);
}

// score_max (softmax.hpp) on 16 lanes, bit for bit: a NaN first operand wins, then a NaN second
// (maxps returns its second operand when either is NaN or both are zeros), else a > b ? a : b.
[[gnu::always_inline]] inline __attribute__((target("avx512f"))) __m512 score_max16(__m512 a, __m512 b) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), _mm512_max_ps(a, b), a);
}

}  // namespace

// --- Heads in lanes (producer_fast_avx512.hpp): one register = one token's 16 heads. ---

__attribute__((target("avx512f,prfchw"))) void score_rows_heads_in_lanes(const float* qt, int hd, const float* krows,
                                                                 float scale, float* wt, const LineQueue& lines,
                                                                 const WidenQueue& widen) {
  __m512 acc[kSubTokens16];
  row_score_tile(kAllLanes, qt, kHeadLanes, hd, krows, scale, lines, widen, acc);
#pragma GCC unroll 16
  for (int t = 0; t < kSubTokens16; ++t) _mm512_storeu_ps(wt + t * kHeadLanes, acc[t]);
}

__attribute__((target("avx512f,prfchw"))) void score_rows_heads_in_lanes(const float* qt, int hd, const float* krows,
                                                                 float scale, float* wt, const LineQueue& lines) {
  __m512 acc[kSubTokens16];
  row_score_tile(kAllLanes, qt, kHeadLanes, hd, krows, scale, lines, kNoWiden, acc);
#pragma GCC unroll 16
  for (int t = 0; t < kSubTokens16; ++t) _mm512_storeu_ps(wt + t * kHeadLanes, acc[t]);
}

__attribute__((target("avx512f"))) void fold_heads_in_lanes(float* wt, int count, float* m, float* s, float* o,
                                                           int hd, LaneO layout, OStart start) {
  // The chunk's maximum per head, in chunk_max's order: kRunningLanes running maxima over whole
  // groups of kRunningLanes tokens, folded 0..7, then the tail token by token.
  __m512 bm;
  int t = 0;
  if (count >= kRunningLanes) {
    __m512 run[kRunningLanes];
#pragma GCC unroll 8
    for (int l = 0; l < kRunningLanes; ++l) run[l] = _mm512_loadu_ps(wt + l * kHeadLanes);
    for (t = kRunningLanes; t + kRunningLanes <= count; t += kRunningLanes)
#pragma GCC unroll 8
      for (int l = 0; l < kRunningLanes; ++l) run[l] = score_max16(run[l], _mm512_loadu_ps(wt + (t + l) * kHeadLanes));
    bm = run[0];
#pragma GCC unroll 8
    for (int l = 1; l < kRunningLanes; ++l) bm = score_max16(bm, run[l]);
  } else {
    bm = _mm512_loadu_ps(wt);
    t = 1;
  }
  for (; t < count; ++t) bm = score_max16(bm, _mm512_loadu_ps(wt + t * kHeadLanes));

  // fold_block_max: next = score_max(m, bm), corr = rescale_factor(m, next), s *= corr.
  const __m512 m_old = _mm512_loadu_ps(m);
  const __m512 next = score_max16(m_old, bm);
  const __mmask16 empty = _mm512_cmp_ps_mask(m_old, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
  const __m512 corr = _mm512_mask_blend_ps(empty, softmax_exp16(_mm512_sub_ps(m_old, next)), _mm512_setzero_ps());
  __m512 sum = _mm512_mul_ps(_mm512_loadu_ps(s), corr);
  _mm512_storeu_ps(m, next);
  // o *= corr where a head's maximum moved (x * 1 is x, so the heads whose factor is 1 keep
  // their bits whether or not they are multiplied).
  const __mmask16 moved =
      start == OStart::unwritten ? 0 : _mm512_cmp_ps_mask(corr, _mm512_set1_ps(1.0f), _CMP_NEQ_UQ);
  if (moved != 0 && layout == LaneO::dims_major)
    for (int d = 0; d < hd; ++d) _mm512_storeu_ps(o + d * kHeadLanes, _mm512_mul_ps(_mm512_loadu_ps(o + d * kHeadLanes), corr));
  if (moved != 0 && layout == LaneO::heads_major) {
    alignas(64) float factor[kHeadLanes];
    _mm512_store_ps(factor, corr);
    for (int h = 0; h < kHeadLanes; ++h) {
      if ((moved >> h & 1u) == 0) continue;
      const __m512 f = _mm512_set1_ps(factor[h]);
      for (int d = 0; d < hd; d += kLanes16) _mm512_storeu_ps(o + h * hd + d, _mm512_mul_ps(_mm512_loadu_ps(o + h * hd + d), f));
    }
  }

  // The weights in place, zero for count <= t < padded; their sum in weights_in_place's order
  // (running lane sums over t = l, l + 8, ..., then lanes 0..7 added to 0 in order).
  const int padded = (count + kRunningLanes - 1) / kRunningLanes * kRunningLanes;
  __m512 lane_sum[kRunningLanes];
#pragma GCC unroll 8
  for (int l = 0; l < kRunningLanes; ++l) lane_sum[l] = _mm512_setzero_ps();
  for (int g = 0; g < padded; g += kRunningLanes)
#pragma GCC unroll 8
    for (int l = 0; l < kRunningLanes; ++l) {
      float* at = wt + (g + l) * kHeadLanes;
      const __m512 w = g + l < count ? softmax_exp16(_mm512_sub_ps(_mm512_loadu_ps(at), next)) : _mm512_setzero_ps();
      _mm512_storeu_ps(at, w);
      lane_sum[l] = _mm512_add_ps(lane_sum[l], w);
    }
  __m512 total = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int l = 0; l < kRunningLanes; ++l) total = _mm512_add_ps(total, lane_sum[l]);
  _mm512_storeu_ps(s, _mm512_add_ps(sum, total));
}

// The dims-major V pass's pieces (accumulate_sub_block_heads_in_lanes): one dim block of o
// (kHeadLaneDims dims x 16 heads) held in registers, and one token's step into it, acc[j] += w[t]
// * v[t][d0 + j] in token order.
using DimBlock = __m512[kHeadLaneDims];
[[gnu::always_inline]] inline __attribute__((target("avx512f"))) void load_dim_block(DimBlock& acc, const float* ot,
                                                                                   int d0) {
#pragma GCC unroll 16
  for (int j = 0; j < kHeadLaneDims; ++j) acc[j] = _mm512_loadu_ps(ot + (d0 + j) * kHeadLanes);
}
[[gnu::always_inline]] inline __attribute__((target("avx512f"))) void store_dim_block(const DimBlock& acc, float* ot,
                                                                                    int d0) {
#pragma GCC unroll 16
  for (int j = 0; j < kHeadLaneDims; ++j) _mm512_storeu_ps(ot + (d0 + j) * kHeadLanes, acc[j]);
}
[[gnu::always_inline]] inline __attribute__((target("avx512f"))) void v_step(DimBlock& acc, const float* wt_t,
                                                                           const float* vt) {
  const __m512 w = _mm512_loadu_ps(wt_t);
#pragma GCC unroll 16
  for (int j = 0; j < kHeadLaneDims; ++j) acc[j] = _mm512_fmadd_ps(w, _mm512_set1_ps(vt[j]), acc[j]);
}

namespace {

// The V pass on plane rows (accumulate_rows_heads_in_lanes) in tiles of kVTileHeads heads x
// kVTileBlocks blocks of 16 dims: acc[h][b] lane j = o[h0 + h][d0 + 16 b + j], and one token's step
// into it, acc[h][b] += w[t][h0 + h] * v[t][d0 + 16 b + j]. Per token a tile loads its blocks of
// the row (converted in the load) and broadcasts its heads' weights: 8 + 2 loads for 16 FMAs,
// where a tile of 16 heads x 1 block took 16 + 1, and a loop of FMAs with memory operands runs at
// the core's load rate, not its FMA rate, past about one load per FMA (docs/perf.md, change 74).
// Each o element is the same chain of FMAs in token order, whatever the tile: the same bits.
constexpr int kVTileHeads = 8;
constexpr int kVTileBlocks = 2;
static_assert(kHeadLanes % kVTileHeads == 0, "the tiles cover the heads");
static_assert(kVTileHeads * kVTileBlocks <= 16, "a tile's accumulators leave registers for the row and the weight");
using VTile = __m512[kVTileHeads][kVTileBlocks];
[[gnu::always_inline]] inline __attribute__((target("avx512f"))) void v_tile_step(VTile& acc, const float* wt_t,
                                                                                const __m512 (&vv)[kVTileBlocks]) {
#pragma GCC unroll kVTileHeads
  for (int h = 0; h < kVTileHeads; ++h) {
    const __m512 w = _mm512_set1_ps(wt_t[h]);
#pragma GCC unroll kVTileBlocks
    for (int b = 0; b < kVTileBlocks; ++b) acc[h][b] = _mm512_fmadd_ps(w, vv[b], acc[h][b]);
  }
}

// Row t's kVTileBlocks blocks of 16 dims from d0, converted from `D`.
template <KvDtype D>
[[gnu::always_inline]] inline __attribute__((target("avx512f"))) void v_tile_row(const KvWord* row, int d0,
                                                                               __m512 (&vv)[kVTileBlocks]) {
#pragma GCC unroll kVTileBlocks
  for (int b = 0; b < kVTileBlocks; ++b) vv[b] = widen16(row + d0 + b * kLanes16, D);
}

template <KvDtype D>
__attribute__((target("avx512f,prfchw"))) void accumulate_rows(float* o, int hd, const float* wt, const KvWord* const* v,
                                                               int n, const float* last, const LineQueue& lines,
                                                               const WidenQueue& widen, OStart start) {
  constexpr int kGroup = GroupWork::kGroupSteps;
  constexpr int kTileDims = kVTileBlocks * kLanes16;
  const int plane_rows = last == nullptr ? n : n - 1;
  int g = 0;  // the side work's groups, counted over the whole pass
  for (int h0 = 0; h0 < kHeadLanes; h0 += kVTileHeads)
    for (int d0 = 0; d0 < hd; d0 += kTileDims) {
      VTile acc;
#pragma GCC unroll kVTileHeads
      for (int h = 0; h < kVTileHeads; ++h)
#pragma GCC unroll kVTileBlocks
        for (int b = 0; b < kVTileBlocks; ++b)
          acc[h][b] = start == OStart::unwritten ? _mm512_setzero_ps()
                                                 : _mm512_loadu_ps(o + (h0 + h) * hd + d0 + b * kLanes16);
      const float* w0 = wt + h0;
      int t = 0;
      for (; t + kGroup <= plane_rows; t += kGroup, ++g)
        steps_with_group_work(lines, widen, g, [&](int j) __attribute__((always_inline, target("avx512f"))) {
          __m512 vv[kVTileBlocks];
          v_tile_row<D>(v[t + j], d0, vv);
          v_tile_step(acc, w0 + (t + j) * kHeadLanes, vv);
        });
      for (; t < plane_rows; ++t) {
        __m512 vv[kVTileBlocks];
        v_tile_row<D>(v[t], d0, vv);
        v_tile_step(acc, w0 + t * kHeadLanes, vv);
      }
      if (last != nullptr) {
        __m512 vv[kVTileBlocks];
#pragma GCC unroll kVTileBlocks
        for (int b = 0; b < kVTileBlocks; ++b) vv[b] = _mm512_loadu_ps(last + d0 + b * kLanes16);
        v_tile_step(acc, w0 + plane_rows * kHeadLanes, vv);
      }
#pragma GCC unroll kVTileHeads
      for (int h = 0; h < kVTileHeads; ++h)
#pragma GCC unroll kVTileBlocks
        for (int b = 0; b < kVTileBlocks; ++b) _mm512_storeu_ps(o + (h0 + h) * hd + d0 + b * kLanes16, acc[h][b]);
    }
  finish_groups(lines, widen, g);  // a short chunk: fewer groups than rows
}

}  // namespace

void accumulate_rows_heads_in_lanes(float* o, int hd, const float* wt, const KvWord* const* v, int n, const float* last,
                                    KvDtype dtype, const LineQueue& lines, const WidenQueue& widen, OStart start) {
  if (dtype == KvDtype::bf16) return accumulate_rows<KvDtype::bf16>(o, hd, wt, v, n, last, lines, widen, start);
  accumulate_rows<KvDtype::f16>(o, hd, wt, v, n, last, lines, widen, start);
}

__attribute__((target("avx512f"))) void accumulate_sub_block_heads_in_lanes(float* ot, int hd, const float* wt,
                                                                           const float* v, int v_stride, int n,
                                                                           const LineQueue& lines) {
  int asked = 0;
  for (int d0 = 0; d0 < hd; d0 += kHeadLaneDims) {
    // Lines spread over the dim blocks: count / (hd / 16) per block, the rest with the last.
    const int upto = d0 + kHeadLaneDims >= hd ? lines.count : lines.count * (d0 + kHeadLaneDims) / hd;
    DimBlock acc;
    load_dim_block(acc, ot, d0);
#pragma GCC unroll 2
    for (int t = 0; t < n; ++t) {
      if (asked < upto) ask_row_line(lines, asked++);
      v_step(acc, wt + t * kHeadLanes, v + t * v_stride + d0);
    }
    store_dim_block(acc, ot, d0);
    while (asked < upto) ask_row_line(lines, asked++);  // a short sub-block: fewer tokens than lines
  }
}

__attribute__((target("avx512f"))) void write_partials_heads_in_lanes(const float* o, int hd, const float* m,
                                                                     const float* s, float* part0, long head_stride,
                                                                     LaneO layout) {
  for (int h = 0; h < kHeadLanes; ++h) {
    part0[h * head_stride] = m[h];
    part0[h * head_stride + 1] = s[h];
  }
  if (layout == LaneO::heads_major) {
    for (int h = 0; h < kHeadLanes; ++h)
      for (int d = 0; d < hd; d += kLanes16) _mm512_storeu_ps(part0 + h * head_stride + 2 + d, _mm512_loadu_ps(o + h * hd + d));
    return;
  }
  for (int d0 = 0; d0 < hd; d0 += kLanes16) {
    __m512 r[kLanes16];
#pragma GCC unroll 16
    for (int j = 0; j < kLanes16; ++j) r[j] = _mm512_loadu_ps(o + (d0 + j) * kHeadLanes);
    transpose16(r);  // r[h] = dims d0 .. d0 + 15 of head h
#pragma GCC unroll 16
    for (int h = 0; h < kHeadLanes; ++h) _mm512_storeu_ps(part0 + h * head_stride + 2 + d0, r[h]);
  }
}

namespace {

// score_block16 for 1 .. 16 heads, chosen at run time.
template <int H = kScoreHeads16>
void score_dispatch(int heads, const float* qt, int qt_stride, int hd, const float* kt, float scale, float* s) {
  if constexpr (H >= 1) {
    if (heads == H) return score_block16<H>(qt, qt_stride, hd, kt, scale, s);
    return score_dispatch<H - 1>(heads, qt, qt_stride, hd, kt, scale, s);
  }
}

template <int DB, int H = kAccumHeads16>
void accumulate_dispatch(int heads, float* o, int o_stride, const float* w, const float* v, int v_stride, int n,
                         __mmask16 last) {
  if constexpr (H >= 1) {
    if (heads == H) return accumulate_block16<H, DB>(o, o_stride, w, v, v_stride, n, last);
    return accumulate_dispatch<DB, H - 1>(heads, o, o_stride, w, v, v_stride, n, last);
  }
}

}  // namespace

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

namespace {

// The vendor whose cores take the heads-in-lanes kernels' AMD choices (cpu_prefetch_into_l1,
// cpu_widen_in_kernels): one test, so both choices split the CPUs the same way.
bool cpu_is_amd() { return __builtin_cpu_is("amd") != 0; }

// A choice the heads-in-lanes kernels make by vendor (true on AMD), unless environment variable
// `var` says `yes` (true) or `no` (false); any other value leaves the vendor's answer. Callers
// read it once.
bool amd_unless_env(const char* var, std::string_view yes, std::string_view no) {
  const char* v = std::getenv(var);
  const std::string_view said = v == nullptr ? std::string_view{} : std::string_view{v};
  if (said == yes) return true;
  if (said == no) return false;
  return cpu_is_amd();
}

// A test's choice of cpu_widen_in_kernels (force_widen_in_kernels): kNotForced, or 0 / 1.
constexpr int kNotForced = -1;
std::atomic<int> g_widen_forced{kNotForced};

}  // namespace

bool cpu_prefetch_into_l1() {
  // LADDER_CPU_PREFETCH=l1 or l2 overrides the vendor's answer, to measure the other hint on a CPU.
  static const bool into_l1 = amd_unless_env("LADDER_CPU_PREFETCH", "l1", "l2");
  return into_l1;
}

bool cpu_widen_in_kernels() {
  const int forced = g_widen_forced.load(std::memory_order_relaxed);
  if (forced != kNotForced) return forced != 0;
  // LADDER_CPU_WIDEN=kernels or separate overrides the vendor's answer, to measure the other
  // path on a CPU.
  static const bool in_kernels = amd_unless_env("LADDER_CPU_WIDEN", "kernels", "separate");
  return in_kernels;
}

void force_widen_in_kernels(std::optional<bool> in_kernels) {
  g_widen_forced.store(in_kernels.has_value() ? static_cast<int>(*in_kernels) : kNotForced, std::memory_order_relaxed);
}

void score_heads_avx512(int heads, const float* qt, int hd, const float* kt, float scale, float* s) {
  for (int h = 0; h < heads; h += kScoreHeads16) {
    const int block = heads - h < kScoreHeads16 ? heads - h : kScoreHeads16;
    score_dispatch(block, qt + h, heads, hd, kt, scale, s + h * kFastChunkTokens);
  }
}

void score_rows_avx512(int heads, const float* qt, int hd, const float* krows, float scale, float* s) {
  for (int h = 0; h < heads; h += kScoreHeads16) {
    const int block = heads - h < kScoreHeads16 ? heads - h : kScoreHeads16;
    const __mmask16 mask = block == kScoreHeads16 ? kAllLanes : static_cast<__mmask16>((1u << block) - 1u);
    score_rows16(mask, block, qt + h, heads, hd, krows, scale, s + h * kFastChunkTokens);
  }
}

__attribute__((target("avx512f"))) float weights_in_place_avx512(float* s, int count, int padded, float m) {
  const __m512 mv = _mm512_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();  // the 8-lane path's running lane sums
  for (int i = 0; i < padded; i += kLanes16) {
    const int left = padded - i;
    const __mmask16 lanes = left >= kLanes16 ? kAllLanes : kLowHalf;  // padded is a multiple of 8
    const int live = count - i;
    const __mmask16 keep =
        live >= kLanes16 ? kAllLanes : live <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << live) - 1u);
    const __m512 w = _mm512_maskz_mov_ps(keep, softmax_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, s + i), mv)));
    _mm512_mask_storeu_ps(s + i, lanes, w);
    sum = _mm256_add_ps(sum, _mm512_castps512_ps256(w));
    if (lanes == kAllLanes) sum = _mm256_add_ps(sum, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(w), 1)));
  }
  alignas(32) float lane_sums[kHalfLanes];
  _mm256_store_ps(lane_sums, sum);
  float total = 0.0f;
  for (float x : lane_sums) total += x;
  return total;
}

__attribute__((target("avx512f"))) void widen_rows_avx512(const KvWord* const* rows, int n, float* dst,
                                                          std::size_t dst_stride, KvDtype dtype) {
  for (int i = 0; i < n; ++i) {
    if (rows[i] == nullptr) continue;
    float* row = dst + static_cast<std::size_t>(i) * dst_stride;
#pragma GCC unroll 8
    for (int d = 0; d < kWideRowDims; d += kLanes16) _mm512_storeu_ps(row + d, widen16(rows[i] + d, dtype));
  }
}

__attribute__((target("avx512f,prfchw"))) void widen_queue_now(const WidenQueue& q) { finish_groups(kNoLines, q, 0); }

void accumulate_heads_avx512(int heads, int dims, float* o, int o_stride, const float* w, const float* v, int v_stride,
                             int n) {
  for (int h = 0; h < heads; h += kAccumHeads16) {
    const int block = heads - h < kAccumHeads16 ? heads - h : kAccumHeads16;
    float* oh = o + h * o_stride;
    const float* wh = w + h * kFastChunkTokens;
    int d = 0;
    for (; d + kAccumVectors16 * kLanes16 <= dims; d += kAccumVectors16 * kLanes16)
      accumulate_dispatch<kAccumVectors16>(block, oh + d, o_stride, wh, v + d, v_stride, n, kAllLanes);
    // What is left: one full vector and/or an 8-dim half (dims is a multiple of 8).
    for (; d < dims; d += kLanes16) {
      const __mmask16 last = dims - d >= kLanes16 ? kAllLanes : kLowHalf;
      accumulate_dispatch<1>(block, oh + d, o_stride, wh, v + d, v_stride, n, last);
    }
  }
  static_assert(kSubTokens16 == kLanes16 && kHalfLanes * 2 == kLanes16, "a K tile is one register; tails are halves");
}

#pragma GCC diagnostic pop

#else

bool cpu_has_avx512() { return false; }
bool cpu_prefetch_into_l1() { return false; }
bool cpu_widen_in_kernels() { return false; }
void force_widen_in_kernels(std::optional<bool>) {}
void score_heads_avx512(int, const float*, int, const float*, float, float*) {}
void score_rows_avx512(int, const float*, int, const float*, float, float*) {}
float weights_in_place_avx512(float*, int, int, float) { return 0.0f; }
void widen_rows_avx512(const KvWord* const*, int, float*, std::size_t, KvDtype) {}
void widen_queue_now(const WidenQueue&) {}
void accumulate_heads_avx512(int, int, float*, int, const float*, const float*, int, int) {}
void score_rows_heads_in_lanes(const float*, int, const float*, float, float*, const LineQueue&, const WidenQueue&) {}
void score_rows_heads_in_lanes(const float*, int, const float*, float, float*, const LineQueue&) {}
void fold_heads_in_lanes(float*, int, float*, float*, float*, int, LaneO, OStart) {}
void accumulate_sub_block_heads_in_lanes(float*, int, const float*, const float*, int, int, const LineQueue&) {}
void accumulate_rows_heads_in_lanes(float*, int, const float*, const KvWord* const*, int, const float*, KvDtype,
                                    const LineQueue&, const WidenQueue&, OStart) {}
void write_partials_heads_in_lanes(const float*, int, const float*, const float*, float*, long, LaneO) {}

#endif

}  // namespace ladder::cpu::detail
