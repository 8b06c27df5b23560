// The fast CPU producer's 16-lane micro-kernels (AVX-512F), used instead of the 8-lane ones
// (producer_fast_kernels.hpp) where the CPU has AVX-512 and the choice is `avx512`
// (cpu_backend.hpp, CpuVectors). They are compiled for AVX-512 whatever the build's flags
// (a function attribute), so one binary runs on CPUs with and without it.
//
// Why: a Zen 5 core issues 512-bit FMAs at the rate it issues 256-bit ones, so twice the FMA
// lanes per cycle (docs/perf.md, 2026-12-01), and 32 vector registers hold every one of 16
// sibling heads' score accumulators at once.
//
// Each lane is the same fmaf chain as the 8-lane kernels' and the portable loops' (scores: q.k
// over d in increasing order from 0, then * scale; o: w.v over tokens in increasing order from
// o's value), so every width gives the same bits (tests/cpu/test_producer_fast.cpp).
#pragma once

#include <cstddef>
#include <optional>

#include "cpu/cache_lines.hpp"
#include "ladder/heuristics.hpp"
#include "ladder/kv_dtype.hpp"

namespace ladder::cpu::detail {

// Whether this CPU runs AVX-512F instructions (and its OS saves the registers).
bool cpu_has_avx512();

// s[h * kFastChunkTokens + t] = scale * sum_d qt[d * heads + h] * kt[d * 16 + t] for h < heads,
// t < 16: qt is the query rows transposed ([hd][heads]: a dim's heads side by side, so every
// head's broadcast addresses off one pointer; with 16 row pointers the kernel ran out of
// general registers), kt one sub-block's K widened and transposed ([hd][16], as the 8-lane
// path lays it out).
void score_heads_avx512(int heads, const float* qt, int hd, const float* kt, float scale, float* s);

// The same scores from K rows as widened, krows [16][kWideRowDims] (rows past the sub-block's
// tokens hold any finite values: their scores are never read), with no transpose of K: each
// token's 16 heads accumulate in one register (qt's dim row times the token's broadcast
// element), and the 16 x 16 result is transposed once in registers. The K transpose (8 x 8
// blocks of shuffles) was the largest part of the producer's own instructions once the FMA
// kernels ran in 16 lanes (docs/perf.md, 2026-12-01). Rows of one stride only (a compile-time
// one keeps every token's broadcast off one pointer): head_dim kWideRowDims, for these kernels
// and the 8-lane row scores (producer_fast_kernels.hpp, score_rows).
inline constexpr int kWideRowDims = 128;
void score_rows_avx512(int heads, const float* qt, int hd, const float* krows, float scale, float* s);

// The plane rows of a sub-block in one call: dst + i * dst_stride [0 .. kWideRowDims) = the f32
// values of rows[i] (i < n) of dtype `dtype` (exact: F16C's conversion for f16, a 16-bit shift
// for bf16), 16 at a time; a null row (the current token's f32 row) is skipped, for the caller.
// A call per row, each behind a vzeroupper, was ~11 % of a worker's samples on a Xeon
// (docs/perf.md, 2026-12-05 late night).
void widen_rows_avx512(const KvWord* const* rows, int n, float* dst, std::size_t dst_stride, KvDtype dtype);

// w[i] = softmax_exp(s[i] - m) for i < count (in place), zero for count <= i < padded (padded a
// multiple of 8); returns the sum of the weights in the 8-lane path's order (8 running lane sums
// over i = l, l + 8, ..., then lanes 0..7), so the same bits: each 16-lane exp is the scalar
// softmax_exp's operations lane by lane, and its two halves are added as two 8-lane steps.
float weights_in_place_avx512(float* s, int count, int padded, float m);

// o[h * o_stride + j] += sum over t < n of w[h * kFastChunkTokens + t] * v[t * v_stride + j], for
// h < heads and j < dims (a multiple of 8).
void accumulate_heads_avx512(int heads, int dims, float* o, int o_stride, const float* w, const float* v, int v_stride,
                             int n);

// Heads in lanes: where a KV head has exactly kHeadLanes query heads (Muse Glimmer's 32:2) and
// rows of kWideRowDims, one register holds one token's (or one dim's) 16 heads through the
// whole chunk, so scores, the softmax fold and o never change layout: no 16 x 16 transpose of
// the scores, and the fold's maxima, rescale factors, weights and sums are one vector operation
// for all 16 heads instead of a scalar chain and a horizontal maximum per head (the per-head
// fold was ~a fifth of a worker's instructions; docs/perf.md, 2026-12-02). Each lane runs the
// operations of the head-major path in the same order, so the bits are those of every other
// width (tests/cpu/test_producer_fast.cpp). Layouts: wt [kFastChunkTokens][kHeadLanes] (scores,
// then weights, token-major), ot [hd][kHeadLanes] (o transposed), m and s [kHeadLanes].
inline constexpr int kHeadLanes = 16;

// Cache lines the heads-in-lanes kernels ask for (an L2 prefetch, as the producer's bursts do),
// one at a time between their FMAs instead of in a burst before them: a burst of 64 lines
// waited for the core's fill buffers, ~15 % of a worker's samples on the Xeon and on this
// session's build machine (docs/perf.md, 2026-12-02, "spread prefetches"). The queue holds
// rows of kWideRowDims 2-byte elements, at most a chunk's, and line i is line i % kLinesPerRow
// of row i / kLinesPerRow (the kernels compute the address: a queue of line addresses took a
// loop of 64 stores per sub-block to build). `into_l1`: asked into L1 and L2 (`prefetcht0`)
// instead of L2 only (cpu_prefetch_into_l1).
struct LineQueue {
  static constexpr int kLinesPerRow = kWideRowDims * static_cast<int>(sizeof(KvWord)) / kCacheLineBytes;
  static constexpr int kMaxRows = kFastChunkTokens;  // a chunk's rows
  // Entries past `count` are never read, so left unset: a queue is built per chunk and KV head,
  // and zeroing its arrays was ~0.6 % of a worker's step (docs/perf.md, change 73).
  const KvWord* rows[kMaxRows];
  int count = 0;  // lines: rows x kLinesPerRow
  bool into_l1 = false;
  // Lines the task will write soon (its partials), asked for with the intent to write
  // (`prefetchw`) after the rows' lines: the reducer, on another core, read them last, and
  // storing into them unasked waited for each line to come back (write_partials was 7 % of a
  // worker's samples at 2,048 on two workers, 1.5 % on one; docs/perf.md, 2026-12-04).
  const char* const* write_lines = nullptr;
  int write_count = 0;
  int total() const { return count + write_count; }
};

// Whether the heads-in-lanes kernels ask for their lines into L1 on this CPU: on AMD's cores.
// Once the kernels widen the next sub-block's rows between their FMAs (WidenQueue), an L2-only
// ask left those loads to wait on L2 inside the FMA loop; on the 2-vCPU EPYC (Zen 4) a worker on
// rotated growing planes ran ~15 % faster with the asks into L1 (docs/perf.md, 2026-12-04). On
// Intel's the L2 hint stays: there an L1 ask holds one of the few fill buffers until its line
// arrives, and asks into L1 were no faster and slowed the step (docs/perf.md, 2026-12-02), with
// the kernels before the widening moved into them; LADDER_CPU_PREFETCH=l1 or l2 overrides the
// choice, to measure it again there.
bool cpu_prefetch_into_l1();

// Whether the heads-in-lanes kernels widen the K rows that the next kernel reads (WidenQueue,
// score_rows_heads_in_lanes and accumulate_rows_heads_in_lanes with a widen queue, the V pass per
// chunk on the plane's rows) or the producer widens each sub-block's K and V rows in a loop of its
// own before the kernel that reads them (the kernels without a widen queue, a V pass per
// sub-block on widened rows: the path as it was before the widening moved into the kernels): on
// AMD's cores the first, elsewhere the second. On the
// 2-vCPU EPYC (Zen 4) the kernels' widening made the step and the layers 7-18 % faster
// (docs/perf.md, 2026-12-04); on the 16-CPU Xeon it made them slower, the widening alone +6.7 %
// on the step at 32,768 (0 of 6 pairs faster) and +12 % on splitk/ring at 8,192, with the V pass
// per chunk +14 % and +9 % (docs/perf.md, 2026-12-04 night). Both paths run the same operations
// per lane in the same order, so the same bits. LADDER_CPU_WIDEN=kernels or separate overrides
// the vendor's choice, to measure the other path on a CPU (read once; any other value leaves the
// vendor's choice, as LADDER_CPU_PREFETCH's does). The vendor test is cpu_prefetch_into_l1's.
bool cpu_widen_in_kernels();

// Tests: cpu_widen_in_kernels answers `in_kernels` until called again with std::nullopt, which
// gives the choice back to LADDER_CPU_WIDEN and the vendor (to run both paths in one process).
void force_widen_in_kernels(std::optional<bool> in_kernels);

// Plane rows that a heads-in-lanes kernel widens between its FMAs, one 16-dim vector per step of
// its loop (a step is 16 FMAs), for a kernel that runs after it: the next sub-block's K rows while
// a sub-block's scores are computed, the next call's first sub-block during the V pass. Widened by themselves, as a loop of
// conversions and stores with no FMA beside them, they were ~17 % of a worker's samples (the
// 2-vCPU EPYC, docs/perf.md 2026-12-04): the stores and the loads' wait from L2 then hid behind
// nothing. Row r: kWideRowDims elements of `dtype` at src[r] into dst[r] (exact, as
// widen_rows_avx512).
struct WidenQueue {
  static constexpr int kMaxRows = kFastChunkTokens;        // a chunk's rows
  static constexpr int kVectorDims = 16;                    // one 512-bit register of f32
  static constexpr int kVectorsPerRow = kWideRowDims / kVectorDims;
  const KvWord* src[kMaxRows];  // entries past `vectors` unset, as LineQueue's
  float* dst[kMaxRows];
  int vectors = 0;  // rows x kVectorsPerRow
  KvDtype dtype = KvDtype::f16;
};

// Every vector of `q` widened now (a task's first K rows, which no kernel precedes).
void widen_queue_now(const WidenQueue& q);

// wt[t * kHeadLanes + h] = scale * sum_d qt[d * kHeadLanes + h] * krows[t * kWideRowDims + d] for
// t < 16 (score_rows_avx512's chains, left token-major); asks for `lines` and widens `widen` on
// the way, a row's lines and a widened row per 8 dims (16 rows at 128 dims), any more after the
// dims (its destinations must not overlap krows, qt or wt).
void score_rows_heads_in_lanes(const float* qt, int hd, const float* krows, float scale, float* wt,
                               const LineQueue& lines, const WidenQueue& widen);

// The same scores with rows widened before the call (!cpu_widen_in_kernels): asks for `lines`'
// row lines only, and nothing is widened (the widen queue's code is not compiled in).
void score_rows_heads_in_lanes(const float* qt, int hd, const float* krows, float scale, float* wt,
                               const LineQueue& lines);

// Where the heads-in-lanes kernels keep o's kHeadLanes heads x hd dims: dims-major, ot[d *
// kHeadLanes + h] (a register holds one dim's heads: the V pass on widened rows,
// accumulate_sub_block_heads_in_lanes), or heads-major, o[h * hd + d] (a register holds 16 dims of
// one head: the V pass on plane rows, accumulate_rows_heads_in_lanes).
enum class LaneO { dims_major, heads_major };

// What o holds when a split's chunk is folded and accumulated: the sum so far (read, rescaled,
// added to), or nothing yet (the split's first chunk: o is zero in meaning but not written, the
// fold leaves it alone, as 0 x factor is 0, and the V pass starts its accumulators at zero instead
// of loading them, so the same bits as an o of zeros). Why: the fill, the first fold's rescale of
// every head by 0 and the first V pass's loads of those zeros were ~2 % of a worker's step
// (docs/perf.md, change 70). heads-major o only (accumulate_rows_heads_in_lanes).
enum class OStart { accumulated, unwritten };

// One chunk's fold for every head at once, wt's first `count` tokens (1..kFastChunkTokens):
// chunk_max's maximum per head, fold_block_max against (m, s) with o (laid out as `layout` says)
// rescaled by the factor unless `start` says o is unwritten, then wt's weights in place (zero for
// count <= t < round_up(count, 8)) and s += their sum in weights_in_place's order.
void fold_heads_in_lanes(float* wt, int count, float* m, float* s, float* o, int hd, LaneO layout, OStart start);

// o[h * hd + d] += sum over t < n, in order, of wt[t * kHeadLanes + h] * v[t][d] for d < hd (a
// multiple of 32), n up to a chunk (kFastChunkTokens), reading the V rows where they are: in
// tiles of 8 heads x 32 dims, row t's 32 dims converted from `dtype` inside the FMA loop (two
// conversions and 8 weight broadcasts per 16 FMAs; docs/perf.md, change 74), not widened into a
// tile first. Row n - 1 may be null: its f32
// values are then at `last` (the current token's row, widened with the range rule), else `last`
// is null. Asks for `lines` and widens `widen` on the way (its destinations must not overlap o or
// wt). Why: on a 2-vCPU Zen 5 the widening threaded between the FMAs cost the kernels a quarter
// of their rate, while a V pass converting in its loop ran as fast as one on widened rows
// (docs/perf.md, 2026-12-06 evening, change 56). With OStart::unwritten, o = that sum: o is only
// written.
void accumulate_rows_heads_in_lanes(float* o, int hd, const float* wt, const KvWord* const* v, int n, const float* last,
                                    KvDtype dtype, const LineQueue& lines, const WidenQueue& widen, OStart start);

// ot[d * kHeadLanes + h] (dims-major) += sum over t < n, in order, of wt[t * kHeadLanes + h] *
// v[t * v_stride + d], over one sub-block (n <= kSubTokens) with rows widened before the call
// (!cpu_widen_in_kernels): the V pass as it was before the V pass took a whole chunk and a widen
// queue, kept for the CPUs where that change was slower (the Xeon, cpu_widen_in_kernels). Asks for `lines`' row lines spread over the dim blocks (count / (hd / 16)
// in each, in its first steps), not one every other step of the whole call.
void accumulate_sub_block_heads_in_lanes(float* ot, int hd, const float* wt, const float* v, int v_stride, int n,
                                         const LineQueue& lines);

// The 16 heads' partials [m, s, o[hd]] at part0 + h * head_stride from m, s and o laid out as
// `layout` says (hd a multiple of 16): dims-major o's 16 x 16 blocks transposed in registers (a
// strided scalar copy was ~2 % of a worker's samples), heads-major o's rows copied.
void write_partials_heads_in_lanes(const float* o, int hd, const float* m, const float* s, float* part0,
                                   long head_stride, LaneO layout);

}  // namespace ladder::cpu::detail
