// The fast CPU producer (the CPU default; the exact twin of the GPU DAG is producer.cpp).
//
// Work: one task per (KV head, split). A split is a fixed run of 64-token chunks (fast_schedule,
// a function of the visible length only). For each chunk, 16 tokens at a time, the task widens
// the K rows once into an L1 tile stored transposed (kt[d][token], so a vector holds 8
// tokens of one dim; F16C for f16 planes, a 16-bit shift for bf16: the class is templated on the
// dtype, one code path for both) and computes the scores of every query head of the group from it with the
// register-blocked kernels of producer_fast_kernels.hpp (each widened K element feeds every head:
// 16 in Muse Glimmer), 8 scores per vector with no horizontal sum; then one fold per head with
// the shared softmax rules (score_max, fold_block_max, softmax_exp on 8 lanes, bit-identical to
// the scalar one); then the V rows are widened once and accumulated into every head's o (weights
// broadcast, 6 heads x 16 dims of o in registers). The split writes [m, s, o] to
// partials[head][split]; the shared reducer (reduce_head, run by run_layers) merges the splits
// of a head in split order and divides once.
// With AVX-512, 16 query heads per KV head and rows of 128 dims (Muse Glimmer), the same steps
// run with heads in lanes (producer_fast_avx512.hpp): scores, weights and o stay token- or
// dim-major with one register per token's or dim's 16 heads, and the fold is one vector
// operation for all heads; the same operations per head, so the same bits. There, on AMD's
// cores, the K rows are widened inside the FMA kernel that runs before the one reading them
// (run_chunk_lanes), the V pass covers the whole chunk with o heads-major and converts the V
// rows in its FMA loop (none widened), and a task's last V pass asks for its partials' lines;
// elsewhere (the Xeon, where the widening inside the kernels was slower) each sub-block's rows
// are widened before its kernel and the V pass goes sub-block by sub-block (run_chunk;
// detail::cpu_widen_in_kernels, LADDER_CPU_WIDEN).
//
// Determinism: the chunk and split boundaries depend on the visible length only, every sum has
// a fixed order, and each task writes its own partials, so the bits are the same for any thread
// count and for every route that reads the same rows in the same order (splitk over a wrapped
// ring == vec over the same rows unwrapped). Only the order of operations inside a chunk differs
// from the GPU's DAG, so this producer is held to the f64 bound, not to the GPU's bits.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "cpu/cache_lines.hpp"
#include "cpu/kv_convert.hpp"
#include "cpu/producer_fast_avx512.hpp"
#include "cpu/producer_fast_exp.hpp"
#include "cpu/producer_fast_kernels.hpp"
#include "cpu/thread_pool.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/heuristics.hpp"
#include "ladder/softmax.hpp"

namespace ladder::cpu {

namespace {

// Chunks before split i of n when split j's run is in proportion to w_j = (n + 1) + (taper - 1)
// * (n - 1 - j), i.e. the first about `taper` times the last: the sum of w_j for j < i over
// their total, times the chunks (integer arithmetic: the same boundaries on every host).
int tapered_first_chunk(int chunks, int splits, int split) {
  const long long n = splits, i = split, b = kFastSplitTaper - 1;
  const long long before = i * (n + 1) + b * (i * (n - 1) - i * (i - 1) / 2);
  const long long total = n * (n + 1) + b * n * (n - 1) / 2;
  return static_cast<int>(chunks * before / total);
}

}  // namespace

int FastSchedule::first_chunk(int split) const {
  if (splits <= 0) return 0;  // nothing visible: no splits, no chunks
  if (tapered) return tapered_first_chunk(chunks, splits, split);
  return static_cast<int>(static_cast<long long>(split) * chunks / splits);
}

FastSchedule fast_schedule(int visible) {
  FastSchedule s;
  if (visible <= 0) return s;
  s.chunks = (visible + kFastChunkTokens - 1) / kFastChunkTokens;
  s.splits = std::min((s.chunks + kFastMinChunksPerSplit - 1) / kFastMinChunksPerSplit, kFastMaxSplits);
  // Tapered only while its last (shortest) split still holds kFastMinChunksPerSplit chunks.
  s.tapered = s.splits > 1 &&
              s.chunks - tapered_first_chunk(s.chunks, s.splits, s.splits - 1) >= kFastMinChunksPerSplit;
  return s;
}

namespace {

using detail::kLanes;
using detail::kSubTokens;

int round_up(int x, int m) { return (x + m - 1) / m * m; }

// A float buffer aligned for 256-bit loads, grown on demand, never shrunk (a per-thread tile).
class AlignedFloats {
 public:
  static constexpr std::size_t kAlign = 64;
  float* data() { return p_.get(); }
  const float* data() const { return p_.get(); }
  void fit(std::size_t n) {
    if (n <= n_) return;
    p_.reset(static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{kAlign})));
    n_ = n;
  }

 private:
  struct Free {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t{kAlign}); }
  };
  std::unique_ptr<float, Free> p_;
  std::size_t n_ = 0;
};

// Per-thread tiles, reused across tasks and calls.
struct Tiles {
  AlignedFloats q;       // [hpk][hd], the range rule applied
  AlignedFloats krows;   // [kSubTokens][hd8]: K rows widened, untransposed (the row scores)
  AlignedFloats score_tile;  // [kSubTokens][hpk]: the 8-lane row scores, token-major
  AlignedFloats kt;      // [hd][kSubTokens]: K of one sub-block, transposed (a vector = 8 tokens)
  AlignedFloats rows;    // [kSubTokens][hd8]: widened V rows (and K rows on the generic path)
  AlignedFloats scores;  // [hpk][kFastChunkTokens], scores then weights
  AlignedFloats o;       // [hpk][hd8]; with heads in lanes and rows widened before the kernels, transposed: [hd8][hpk]
  AlignedFloats wt;      // heads in lanes: [kFastChunkTokens][hpk], scores then weights
  AlignedFloats fold;    // heads in lanes: per KV head of the task, m[hpk] then s[hpk]
  // Heads in lanes with rows widened inside the kernels: a chunk's K rows widened
  // ([kFastChunkTokens][hd8]; the V pass reads the plane's rows). A score kernel widens the next
  // sub-block's rows, kSubTokens rows (8 KiB) past the ones it reads: at distances other than a
  // whole number of 8 KiB the widening stores slowed the kernel reading beside them by up to 8 %
  // on the 2-vCPU EPYC (docs/perf.md, 2026-12-04).
  AlignedFloats k_tile;
  AlignedFloats cur_v;  // [hd8]: the current token's V row widened, for the V pass on plane rows
  std::vector<SoftmaxStats> stats;          // [hpk]
  std::vector<KvWord> zero_row;             // [hd] +0 words (either dtype): a padding token's K row
  std::vector<const char*> partial_lines;   // heads in lanes: the lines of the task's partials
};

// The plane rows of one chunk's tokens; nullptr marks the current token (read from cur_k/cur_v).
struct ChunkRows {
  const KvWord* k[kFastChunkTokens];
  const KvWord* v[kFastChunkTokens];
};

// w[i] = softmax_exp(s[i] - m) for i < count (in place), zero for count <= i < padded; returns
// the sum of the weights in a fixed order (8 running lane sums, then lanes 0..7).
float weights_in_place(float* s, int count, int padded, float m) {
#if defined(LADDER_FAST_AVX2)
  const __m256 mv = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  for (int i = 0; i < padded; i += kLanes) {
    __m256 w = detail::softmax_exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), mv));
    if (i + kLanes > count) {
      alignas(32) float keep[kLanes];
      for (int l = 0; l < kLanes; ++l) keep[l] = i + l < count ? -1.0f : 0.0f;  // sign bit selects
      w = _mm256_blendv_ps(_mm256_setzero_ps(), w, _mm256_load_ps(keep));
    }
    _mm256_storeu_ps(s + i, w);
    sum = _mm256_add_ps(sum, w);
  }
  alignas(32) float lanes[kLanes];
  _mm256_store_ps(lanes, sum);
  float total = 0.0f;
  for (float x : lanes) total += x;
  return total;
#else
  float total = 0.0f;
  for (int i = 0; i < padded; ++i) {
    s[i] = i < count ? softmax_exp(s[i] - m) : 0.0f;
    total += s[i];
  }
  return total;
#endif
}

// floats_in_range (kv_convert.hpp) with its 8-lane form, bit for bit the same values.
void range_row(const float* src, float* dst, int n, float range_max) {
  int i = 0;
#if defined(LADDER_FAST_AVX2)
  for (; i + kLanes <= n; i += kLanes)
    _mm256_storeu_ps(dst + i, detail::kv_range8(_mm256_loadu_ps(src + i), range_max));
#endif
  detail::floats_in_range(src + i, dst + i, n - i, range_max);
}

// score_block for H = 1 .. kScoreHeads heads, chosen at run time.
void score_heads(int heads, const float* q, int hd, const float* kt, float scale, float* s) {
  switch (heads) {
    case 1: return detail::score_block<1>(q, hd, kt, scale, s, kFastChunkTokens);
    case 2: return detail::score_block<2>(q, hd, kt, scale, s, kFastChunkTokens);
    case 3: return detail::score_block<3>(q, hd, kt, scale, s, kFastChunkTokens);
    case 4: return detail::score_block<4>(q, hd, kt, scale, s, kFastChunkTokens);
    case 5: return detail::score_block<5>(q, hd, kt, scale, s, kFastChunkTokens);
    default: return detail::score_block<detail::kScoreHeads>(q, hd, kt, scale, s, kFastChunkTokens);
  }
}

template <int DB>
void accumulate_heads_db(int heads, float* o, int o_stride, const float* w, const float* v, int v_stride, int n) {
  switch (heads) {
    case 1: return detail::accumulate_block<1, DB>(o, o_stride, w, kFastChunkTokens, v, v_stride, n);
    case 2: return detail::accumulate_block<2, DB>(o, o_stride, w, kFastChunkTokens, v, v_stride, n);
    case 3: return detail::accumulate_block<3, DB>(o, o_stride, w, kFastChunkTokens, v, v_stride, n);
    case 4: return detail::accumulate_block<4, DB>(o, o_stride, w, kFastChunkTokens, v, v_stride, n);
    case 5: return detail::accumulate_block<5, DB>(o, o_stride, w, kFastChunkTokens, v, v_stride, n);
    default: return detail::accumulate_block<detail::kAccumHeads, DB>(o, o_stride, w, kFastChunkTokens, v, v_stride, n);
  }
}

// accumulate_block for H = 1 .. kAccumHeads heads and 1 or 2 dim vectors, chosen at run time.
void accumulate_heads(int heads, int dim_vectors, float* o, int o_stride, const float* w, const float* v,
                      int v_stride, int n) {
  static_assert(detail::kAccumDimVectors == 2, "the dispatch below covers 1 and 2 dim vectors");
  if (dim_vectors >= detail::kAccumDimVectors)
    accumulate_heads_db<detail::kAccumDimVectors>(heads, o, o_stride, w, v, v_stride, n);
  else
    accumulate_heads_db<1>(heads, o, o_stride, w, v, v_stride, n);
}

// The 8-lane row scores for 8 or 16 heads per KV head (detail::score_rows).
void score_rows8(int heads, const float* qt, int hd, const float* krows, float scale, float* tile, float* s) {
#if defined(LADDER_FAST_AVX2)
  if (heads == kLanes) return detail::score_rows<1>(qt, hd, krows, scale, tile, s, kFastChunkTokens);
  static_assert(detail::kRowScoreMaxHeadVectors == 2, "8 or 16 heads");
  return detail::score_rows<detail::kRowScoreMaxHeadVectors>(qt, hd, krows, scale, tile, s, kFastChunkTokens);
#else
  (void)heads, (void)qt, (void)hd, (void)krows, (void)scale, (void)tile, (void)s;
#endif
}

// The chunk that a task runs after the current one (the next KV head of its group, else the first
// of the next chunk), whose first K rows the current one's last kernel widens.
struct FollowingChunk {
  const ChunkRows* rows = nullptr;  // none: the task's last
  int kv_head = 0;
  int chunk = 0;
  // The task's last call: the lines of the partials the task writes next (detail::LineQueue),
  // and the first rows of the task its worker probably claims next (none: null).
  const char* const* write_lines = nullptr;
  int write_count = 0;
  const ChunkRows* next_task = nullptr;
  int next_task_count = 0;  // tokens of that task's first chunk
};

// One KV head's running state inside a task: its query rows, accumulators and softmax stats.
struct HeadState {
  float* q;             // [hpk][hd] (the transposed-K kernels of 8 lanes only)
  const float* qt;      // [hd][hpk] (the 16-lane kernels and the row scores)
  float* o;             // [hpk][hd8], or [hd8][hpk] with heads in lanes and rows widened before the kernels
  SoftmaxStats* stats;  // [hpk] (not with heads in lanes)
  float* m;             // [hpk] with heads in lanes: the running maxima, then
  float* s;             //   the running sums
};

// D: the dtype of every row the producer reads (ProducerParams::kv_dtype).
template <KvDtype D>
class FastProducer final : public ProducerTasks {
 public:
  FastProducer(const ProducerParams& p, CpuVectors vectors)
      : p_(p),
        wide_(vectors == CpuVectors::avx512 && detail::cpu_has_avx512()),
        hd_(p.shape.head_dim),
        hd8_(round_up(p.shape.head_dim, kLanes)),
        hpk_(p.shape.heads_per_kv()),
        workers_(threads()),
        group_(kv_heads_per_task(p, workers_)),
        sched_(fast_schedule(p.visible)),
        ranges_(split_ranges(p.shape.n_kv_heads / group_, sched_.splits, workers_)),
        row_scores_(row_scores(wide_, hd_, hpk_)),
        heads_in_lanes_(heads_in_lanes(wide_, hd_, hpk_)),
        qt_form_(wide_ || row_scores_),
        lines_into_l1_(heads_in_lanes_ && detail::cpu_prefetch_into_l1()),
        widen_in_kernels_(heads_in_lanes_ && detail::cpu_widen_in_kernels()) {
    if (qt_form_) transpose_q();
  }

  int tasks() const override { return p_.shape.n_kv_heads / group_ * ranges_; }
  int kv_heads_per_task() const override { return group_; }
  int first_kv_head(int task) const override { return task % (p_.shape.n_kv_heads / group_) * group_; }
  // Range-major numbering (run_task): the range of splits that task `task` walks, and the first
  // split of range r (first_split(ranges_) == splits).
  int range_of(int task) const { return task / (p_.shape.n_kv_heads / group_); }
  int first_split(int range) const { return static_cast<int>(static_cast<long long>(range) * sched_.splits / ranges_); }
  int splits() const override { return sched_.splits; }
  void run(int task) const override { run_task(task); }

  // Range-major numbering: the tasks of one range (every KV head group) are claimed one after
  // the other, so on a token-major ring the tasks reading the two halves of the same rows run
  // at about the same time and the second finds them in the shared cache. The task walks its
  // range's chunks in order as one stream (each call widens and asks for the next one's rows,
  // across split boundaries too); at each split's last chunk it writes that split's partials and
  // starts the next split's state afresh, so every split's arithmetic is what a task of one split
  // does.
  void run_task(int task) const {
    const int kv0 = first_kv_head(task);
    const int range = range_of(task);
    thread_local Tiles tl;
    const std::size_t hd = static_cast<std::size_t>(hd_);
    const std::size_t hd8 = static_cast<std::size_t>(hd8_);
    const std::size_t hpk = static_cast<std::size_t>(hpk_);
    const std::size_t group = static_cast<std::size_t>(group_);
    if (!qt_form_) tl.q.fit(group * hpk * hd);
    if (row_scores_) tl.krows.fit(kSubTokens * hd8);
    if (row_scores_ && !wide_) tl.score_tile.fit(kSubTokens * hpk);
    tl.kt.fit(hd * kSubTokens);
    tl.rows.fit(kSubTokens * hd8);
    tl.scores.fit(hpk * kFastChunkTokens);
    tl.o.fit(group * hpk * hd8);
    if (heads_in_lanes_) tl.wt.fit(kFastChunkTokens * hpk);
    if (heads_in_lanes_) tl.fold.fit(group * 2 * hpk);
    if (widen_in_kernels_) tl.k_tile.fit(kFastChunkTokens * hd8);
    if (widen_in_kernels_) tl.cur_v.fit(hd8);
    if (tl.stats.size() < group * hpk) tl.stats.resize(group * hpk);
    if (tl.zero_row.size() < hd) tl.zero_row.resize(hd);
    std::fill(tl.zero_row.begin(), tl.zero_row.begin() + hd_, KvWord{0});
    // Padding dims of the widened rows stay zero for the whole task.
    std::fill(tl.rows.data(), tl.rows.data() + kSubTokens * hd8, 0.0f);

    const int range_first = first_split(range);  // the range's first split
    const int first_chunk = sched_.first_chunk(range_first);
    const int end_chunk = sched_.first_chunk(first_split(range + 1));
    HeadState state[kFastKvHeadsPerTask];
    ChunkRows rows[kFastKvHeadsPerTask][2];
    ChunkRows next_task_rows;  // likely_next_task_rows()
    for (int j = 0; j < group_; ++j) {
      const int kv_head = kv0 + j;
      if (p_.cur_k != nullptr && range_first == 0) detail::store_current_row(p_, kv_head);
      HeadState& st = state[j];
      st.q = qt_form_ ? nullptr : tl.q.data() + j * hpk * hd;
      st.qt = qt_form_ ? qt_.data() + static_cast<std::size_t>(kv_head) * hd * hpk : nullptr;
      st.o = tl.o.data() + j * hpk * hd8;
      st.stats = tl.stats.data() + j * hpk;
      st.m = heads_in_lanes_ ? tl.fold.data() + j * 2 * hpk : nullptr;
      st.s = heads_in_lanes_ ? st.m + hpk : nullptr;
      if (!qt_form_)
        range_row(p_.q + static_cast<std::size_t>(kv_head) * hpk * hd, st.q, hpk_ * hd_, KvTraits<D>::kRangeMax);  // N1
      start_split(st);
      chunk_rows(kv_head, first_chunk, rows[j][0]);
      // The first chunk's K rows have no earlier phase to be prefetched in: ask for them now,
      // so only the first sub-block waits for memory (a task at L = 2,048 is a single chunk).
      prefetch_rows(rows[j][0].k, chunk_count(first_chunk));
    }
    if (widen_in_kernels_) {
      // The task's first K rows: no kernel runs before them to widen them on the way.
      // Only its first sub-block's: the first call's score kernels widen the rest (a whole chunk
      // widened here was ~3.5 % of a worker's samples on rotated planes, a stall on memory with
      // no FMA beside it). Its first V rows are asked for here, as a V pass asks for the next
      // chunk's.
      detail::WidenQueue first;
      queue_widen(rows[0][0].k, std::min(kSubTokens, chunk_count(first_chunk)), true, kv0, tl.k_tile.data(), first);
      detail::widen_queue_now(first);
      prefetch_rows(rows[0][0].v, std::min(kSubTokens, chunk_count(first_chunk)));
    }
    int split = range_first;
    int split_begin = first_chunk;                  // the split's first chunk
    int split_end = sched_.first_chunk(split + 1);  // the chunk after the split's last
    for (int c = first_chunk; c < end_chunk; ++c) {
      const bool has_next = c + 1 < end_chunk;
      const bool split_ends = c + 1 == split_end;
      for (int j = 0; j < group_; ++j) {
        const ChunkRows& cur = rows[j][(c - first_chunk) % 2];
        ChunkRows& next = rows[j][(c - first_chunk + 1) % 2];
        if (has_next) chunk_rows(kv0 + j, c + 1, next);
        if (!widen_in_kernels_) {
          run_chunk(tl, state[j], kv0 + j, c, cur, has_next ? &next : nullptr);
          continue;
        }
        // The call after this one: the group's next KV head on this chunk, else its first on the
        // next chunk (whose rows were listed above, at j = 0).
        FollowingChunk following;
        if (j + 1 < group_) {
          following = {&rows[j + 1][(c - first_chunk) % 2], kv0 + j + 1, c};
        } else if (has_next) {
          following = {&rows[0][(c - first_chunk + 1) % 2], kv0, c + 1};
        } else {
          following.next_task_count = likely_next_task_rows(task, next_task_rows);
          following.next_task = following.next_task_count > 0 ? &next_task_rows : nullptr;
        }
        if (j + 1 == group_ && split_ends) {
          partial_lines(kv0, split, tl.partial_lines);
          following.write_lines = tl.partial_lines.data();
          following.write_count = static_cast<int>(tl.partial_lines.size());
        }
        // A split's first chunk finds o unwritten (start_split).
        run_chunk_lanes(tl, state[j], kv0 + j, c, cur, following,
                        c == split_begin ? detail::OStart::unwritten : detail::OStart::accumulated);
      }
      if (!split_ends) continue;
      for (int j = 0; j < group_; ++j) {
        write_partials(state[j], kv0 + j, split);
        start_split(state[j]);
      }
      ++split;
      split_begin = split_end;
      split_end = sched_.first_chunk(split + 1);
    }
  }

 private:
  // Ranges of consecutive splits per KV-head group (the tasks of each group): on one worker a
  // single range (one task walks every split: nothing to balance, and each task's setup and its
  // first rows arriving cold are paid once; docs/perf.md, change 65), else as many as give every
  // worker kFastMinTasksPerWorker tasks, at most one per split. Only the time order changes:
  // each split's arithmetic and partials are the same, so the bits do not depend on it.
  static int split_ranges(int groups, int splits, int workers) {
    if (workers <= 1) return 1;
    const int wanted = (kFastMinTasksPerWorker * workers + groups - 1) / groups;
    return std::min(splits, wanted);
  }

  // A split's state, fresh: no token seen (softmax_stats' identity) and o zero. The stats live
  // in m and s with heads in lanes, in `stats` otherwise (HeadState). Where the chunks run in
  // run_chunk_lanes, o is not filled: run_task calls a split's first chunk with OStart::unwritten,
  // whose fold and V pass treat o as zeros without reading it (docs/perf.md, change 70).
  void start_split(const HeadState& st) const {
    const std::size_t hpk = static_cast<std::size_t>(hpk_);
    if (heads_in_lanes_) {
      std::fill(st.m, st.m + hpk, SoftmaxStats{}.m);
      std::fill(st.s, st.s + hpk, SoftmaxStats{}.s);
    } else {
      std::fill(st.stats, st.stats + hpk, SoftmaxStats{});
    }
    if (!widen_in_kernels_) std::fill(st.o, st.o + hpk * static_cast<std::size_t>(hd8_), 0.0f);
  }

  // KV heads one task walks side by side: kFastKvHeadsPerTask when the plane is token-major
  // (a ring: the KV heads of a token share one row, so a task reads whole rows, not every other
  // 256-byte run) and the fewer, larger tasks still give every worker kFastMinTasksPerWorker;
  // else 1. Only the time order changes, each head's arithmetic is the same, so the bits do
  // not depend on this choice (nor, through it, on the worker count).
  static int kv_heads_per_task(const ProducerParams& p, int workers) {
    const bool token_major = p.rows.strides.head_stride < p.rows.strides.row_stride;
    if (!token_major || p.shape.n_kv_heads % kFastKvHeadsPerTask != 0) return 1;
    const int grouped_tasks = p.shape.n_kv_heads / kFastKvHeadsPerTask * fast_schedule(p.visible).splits;
    return grouped_tasks >= kFastMinTasksPerWorker * workers ? kFastKvHeadsPerTask : 1;
  }

  // Scores from K rows as widened, with no K transpose, where a widened row (head_dim rounded
  // up to 8) is kWideRowDims floats: the 16-lane kernels for any heads per KV head, the 8-lane
  // ones for 8 or 16 (one or two head vectors). Else the transposed tile (widen_k_transposed).
  static bool row_scores(bool wide, int hd, int hpk) {
    if (round_up(hd, kLanes) != detail::kWideRowDims) return false;
#if defined(LADDER_FAST_AVX2)
    return wide || hpk == kLanes || hpk == detail::kRowScoreMaxHeadVectors * kLanes;
#else
    (void)hpk;
    return wide;
#endif
  }

  // Heads in lanes (producer_fast_avx512.hpp): the 16-lane row scores with one register per
  // token's or dim's heads, where a KV head has exactly that many query heads and rows of the
  // row stride.
  static bool heads_in_lanes(bool wide, int hd, int hpk) {
    return wide && hd == detail::kWideRowDims && hpk == detail::kHeadLanes;
  }

  int chunk_count(int chunk) const { return std::min(kFastChunkTokens, p_.visible - chunk * kFastChunkTokens); }

  // The row addresses of a chunk's tokens, the ring's modulo taken once per chunk and per run of
  // rows: consecutive logical tokens sit in consecutive physical rows until the ring wraps, so
  // the rows come in at most two runs, each a loop with no test inside (vectorized; the per-row
  // wrap test was ~1.5 % of a worker's step, docs/perf.md, change 71).
  void chunk_rows(int kv_head, int chunk, ChunkRows& out) const {
    const int first = chunk * kFastChunkTokens;
    const int end = first + chunk_count(chunk);
    const int plane_end = std::min(end, p_.tail_first);
    int t = first;
    if (t < plane_end) {
      const RowSource& src = p_.rows;
      const int wrap = src.order == RowOrder::ring_logical ? src.state.capacity : std::numeric_limits<int>::max();
      const std::int64_t step = src.strides.row_stride;
      int r = src.row(t);
      while (t < plane_end) {
        const int run = std::min(plane_end - t, wrap - r);
        const KvWord* k = src.k + src.strides.offset(r, kv_head);
        const KvWord* v = src.v + src.strides.offset(r, kv_head);
        const KvWord** k_out = out.k + (t - first);
        const KvWord** v_out = out.v + (t - first);
        for (int i = 0; i < run; ++i) {
          k_out[i] = k + i * step;
          v_out[i] = v + i * step;
        }
        t += run;
        r = r + run == wrap ? 0 : r + run;
      }
    }
    for (; t < end; ++t) {
      const std::int64_t at = p_.tail.strides.offset(p_.tail.row(t - p_.tail_first), kv_head);
      out.k[t - first] = p_.tail.k + at;
      out.v[t - first] = p_.tail.v + at;
    }
    if (p_.cur_k != nullptr && p_.visible - 1 < end && p_.visible - 1 >= first) {
      out.k[p_.visible - 1 - first] = nullptr;
      out.v[p_.visible - 1 - first] = nullptr;
    }
  }

  // Asks for the given rows to be brought into the cache, issued one phase ahead (the V rows of
  // a sub-block while its K rows are scored, the next chunk's K rows while V is accumulated), so
  // the stream from memory overlaps the arithmetic.
  void prefetch_rows(const KvWord* const* rows, int n) const {
#if defined(LADDER_FAST_AVX2)
    using detail::kCacheLineBytes, detail::kIntoL2, detail::kPrefetchRead;
    const int row_bytes = hd_ * kv_dtype_bytes(D);
    for (int i = 0; i < n; ++i) {
      if (rows[i] == nullptr) continue;
      const char* at = reinterpret_cast<const char*>(rows[i]);
      // A read prefetch into L2, not L1 (what _MM_HINT_T1 asks for): on Intel cores an
      // L1 prefetch holds one of the L1's few fill buffers until its line arrives, and a burst
      // of 64 of them stalled the loop (11.5 % of a Xeon core's samples on a cached plane;
      // docs/perf.md 2026-12-02, "prefetches into L2 only"; not measured on Zen 4 and later,
      // which are documented to honour the L2 hint too).
      for (int b = 0; b < row_bytes; b += kCacheLineBytes) __builtin_prefetch(at + b, kPrefetchRead, kIntoL2);
    }
#else
    (void)rows, (void)n;
#endif
  }

  // The same lines as prefetch_rows, queued (after what q holds) for a heads-in-lanes kernel to
  // ask for one at a time; the current token's row (nullptr) is skipped.
  void queue_lines(const KvWord* const* rows, int n, detail::LineQueue& q) const {
    using Q = detail::LineQueue;
    q.into_l1 = lines_into_l1_;
    const int queued = q.count / Q::kLinesPerRow;
    const int plane = plane_rows_of(rows, n);
    std::copy_n(rows, plane, q.rows + queued);
    q.count = (queued + plane) * Q::kLinesPerRow;
  }

  // Rows [0, n) of a chunk's row list (or of a run inside it) that are plane rows: all but a
  // null last one. Only the current token's row is null (chunk_rows), and it is the visible
  // window's last token, so the last row of any run that holds it; the queues copy the plane
  // rows with no test per row (docs/perf.md, change 72).
  static int plane_rows_of(const KvWord* const* rows, int n) { return n > 0 && rows[n - 1] == nullptr ? n - 1 : n; }

  // One row widened into dst (hd_ floats): a plane row, or the current token's f32 row, read
  // before rounding with the range rule (N1), as the store keeps it.
  void widen_row(const KvWord* row, bool key, int kv_head, float* dst) const {
    if (row == nullptr) {
      const float* cur = key ? p_.cur_k : p_.cur_v;
      detail::floats_in_range(cur + static_cast<std::size_t>(kv_head) * hd_, dst, hd_, KvTraits<D>::kRangeMax);
      return;
    }
    detail::widen_row<D>(row, dst, hd_);
  }

  // K (key) or V rows of a sub-block (n <= kSubTokens) into rows ([n][hd8], padding dims left as
  // they are: zero). Plane rows of a head_dim that is a multiple of 8 are widened by one unrolled
  // loop of 8-wide conversions (widen8); the rest row by row through widen_row. Both are exact.
  void widen_rows(const KvWord* const* r, bool key, int n, int kv_head, float* rows) const {
    const std::size_t hd8 = static_cast<std::size_t>(hd8_);
    const bool wide_rows = wide_ && hd_ == detail::kWideRowDims;
    if (wide_rows) detail::widen_rows_avx512(r, n, rows, hd8, D);  // every plane row
    for (int i = 0; i < n; ++i) {
      float* dst = rows + i * hd8;
      if (wide_rows && r[i] != nullptr) continue;
#if defined(LADDER_FAST_AVX2)
      if (r[i] != nullptr && hd_ % kLanes == 0) {
        const KvWord* src = r[i];
#pragma GCC unroll 8
        for (int d = 0; d < hd_; d += kLanes) _mm256_store_ps(dst + d, detail::widen8<D>(src + d));
        continue;
      }
#endif
      widen_row(r[i], key, kv_head, dst);
    }
  }

  // K rows of a sub-block (n <= kSubTokens tokens) into tl.kt transposed, padding tokens zero.
  // 8-wide widening and an 8 x 8 transpose in registers when every row is a plane row and hd is
  // a multiple of 8; otherwise (the current token's f32 row, a ragged head_dim) row by row
  // through tl.rows. Both are exact (element -> f32 is), so the path never changes a bit.
  void widen_k_transposed(Tiles& tl, const KvWord* const* k, int n, int kv_head) const {
    bool plane_rows = hd_ % kLanes == 0;
    for (int i = 0; i < n && plane_rows; ++i) plane_rows = k[i] != nullptr;
#if defined(LADDER_FAST_AVX2)
    if (plane_rows) {
      const KvWord* r[kSubTokens];
      for (int i = 0; i < kSubTokens; ++i) r[i] = i < n ? k[i] : tl.zero_row.data();
      for (int d = 0; d < hd_; d += kLanes) {
        detail::transpose_rows8<D>(r, d, tl.kt.data(), 0);
        detail::transpose_rows8<D>(r + kLanes, d, tl.kt.data(), kLanes);
      }
      return;
    }
#endif
    const std::size_t hd8 = static_cast<std::size_t>(hd8_);
    float* rows = tl.rows.data();
    for (int i = 0; i < n; ++i) widen_row(k[i], true, kv_head, rows + i * hd8);
    float* kt = tl.kt.data();
    for (int d = 0; d < hd_; ++d)
      for (int i = 0; i < kSubTokens; ++i) kt[d * kSubTokens + i] = i < n ? rows[i * hd8 + d] : 0.0f;
  }

  void run_chunk(Tiles& tl, const HeadState& hs, int kv_head, int chunk, const ChunkRows& cur,
                 const ChunkRows* next) const {
    const std::size_t hd8 = static_cast<std::size_t>(hd8_);
    const int count = chunk_count(chunk);
    const float scale = p_.shape.scale;
    float* scores = tl.scores.data();
    // Scores of every head for the chunk, K widened and transposed once per sub-block.
    detail::LineQueue lines;  // heads in lanes: asked for inside the kernels, not in a burst
    for (int b = 0; b < count; b += kSubTokens) {
      const int n = std::min(kSubTokens, count - b);
      lines.count = 0;
      if (heads_in_lanes_)
        queue_lines(cur.v + b, n, lines);
      else
        prefetch_rows(cur.v + b, n);
      if (row_scores_) {
        float* krows = tl.krows.data();
        widen_rows(cur.k + b, true, n, kv_head, krows);
        // A ragged sub-block's rows past n: zero, as a transposed tile's (their scores are
        // never read).
        std::fill(krows + static_cast<std::size_t>(n) * hd8, krows + kSubTokens * hd8, 0.0f);
        if (heads_in_lanes_)
          detail::score_rows_heads_in_lanes(hs.qt, hd_, krows, scale, tl.wt.data() + b * hpk_, lines);
        else if (wide_)
          detail::score_rows_avx512(hpk_, hs.qt, hd_, krows, scale, scores + b);
        else
          score_rows8(hpk_, hs.qt, hd_, krows, scale, tl.score_tile.data(), scores + b);
        continue;
      }
      widen_k_transposed(tl, cur.k + b, n, kv_head);
      if (wide_) {
        detail::score_heads_avx512(hpk_, hs.qt, hd_, tl.kt.data(), scale, scores + b);
        continue;
      }
      for (int h = 0; h < hpk_; h += detail::kScoreHeads)
        score_heads(std::min(detail::kScoreHeads, hpk_ - h), hs.q + static_cast<std::size_t>(h) * hd_, hd_,
                    tl.kt.data(), scale, scores + static_cast<std::size_t>(h) * kFastChunkTokens + b);
    }
    // One fold per head (softmax.hpp): chunk max, rescale, weights, running sum.
    const int padded = round_up(count, kLanes);
    if (heads_in_lanes_)
      detail::fold_heads_in_lanes(tl.wt.data(), count, hs.m, hs.s, hs.o, hd_, detail::LaneO::dims_major,
                                  detail::OStart::accumulated);
    else
      for (int h = 0; h < hpk_; ++h) {
        float* s = scores + static_cast<std::size_t>(h) * kFastChunkTokens;
        SoftmaxStats& st = hs.stats[h];
        const float corr = fold_block_max(st, detail::chunk_max(s, count));
        if (corr != 1.0f) detail::scale_row(hs.o + h * hd8, corr, hd8_);
        st.s += wide_ ? detail::weights_in_place_avx512(s, count, padded, st.m) : weights_in_place(s, count, padded, st.m);
      }
    // o += w . V, V widened once per sub-block and applied to every head.
    float* rows = tl.rows.data();
    for (int b = 0; b < count; b += kSubTokens) {
      const int n = std::min(kSubTokens, count - b);
      const int next_n = next == nullptr ? 0 : std::min(kSubTokens, std::max(0, chunk_count(chunk + 1) - b));
      lines.count = 0;
      if (heads_in_lanes_)
        queue_lines(next_n > 0 ? next->k + b : nullptr, next_n, lines);
      else if (next_n > 0)
        prefetch_rows(next->k + b, next_n);
      widen_rows(cur.v + b, false, n, kv_head, rows);
      if (heads_in_lanes_) {
        detail::accumulate_sub_block_heads_in_lanes(hs.o, hd_, tl.wt.data() + b * hpk_, rows, hd8_, n, lines);
        continue;
      }
      if (wide_) {
        detail::accumulate_heads_avx512(hpk_, hd8_, hs.o, hd8_, scores + b, rows, hd8_, n);
        continue;
      }
      for (int h = 0; h < hpk_; h += detail::kAccumHeads) {
        const int heads = std::min(detail::kAccumHeads, hpk_ - h);
        for (int d = 0; d < hd8_; d += detail::kAccumDimVectors * kLanes)
          accumulate_heads(heads, (hd8_ - d) / kLanes, hs.o + h * hd8 + d, hd8_,
                           scores + static_cast<std::size_t>(h) * kFastChunkTokens + b, rows + d, hd8_, n);
      }
    }
  }

  // Appends to a widen queue n (up to a chunk's) K (key) or V rows into dst ([n][hd8]): plane rows
  // queued for a kernel, the current token's f32 row (nullptr) widened now with the range rule
  // (N1), and a K tile's rows from n to the end of its last sub-block zeroed now (their scores
  // are never read; zero, as the other paths' tiles), all into rows the running kernel does not
  // read.
  void queue_widen(const KvWord* const* r, int n, bool key, int kv_head, float* dst, detail::WidenQueue& q) const {
    using W = detail::WidenQueue;
    const std::size_t hd8 = static_cast<std::size_t>(hd8_);
    const int queued = q.vectors / W::kVectorsPerRow;  // after what q holds
    const int plane = plane_rows_of(r, n);
    for (int i = 0; i < plane; ++i) {
      q.src[queued + i] = r[i];
      q.dst[queued + i] = dst + i * hd8;
    }
    if (plane < n) widen_row(nullptr, key, kv_head, dst + static_cast<std::size_t>(plane) * hd8);
    q.vectors = (queued + plane) * W::kVectorsPerRow;
    q.dtype = D;
    if (key) std::fill(dst + static_cast<std::size_t>(n) * hd8, dst + static_cast<std::size_t>(round_up(n, kSubTokens)) * hd8, 0.0f);
  }

  // run_chunk with heads in lanes (producer_fast_avx512.hpp), o heads-major. K rows are widened
  // one phase ahead, inside the kernel before the one that reads them: the scores of sub-block i
  // widen sub-block i + 1's K rows (and ask for its V lines, the last for the following call's
  // first K lines), and the V pass, one call over the whole chunk on the plane's V rows (no V
  // row is widened: docs/perf.md, 2026-12-06 evening, change 56), widens the following call's
  // first sub-block (the group's next KV head, or the next chunk) and asks for the rest of its K
  // lines and its first V lines. A V pass over 64 tokens instead of four over 16 loads and
  // stores its accumulators a quarter as often. Every call finds only its first sub-block's K
  // rows widened.
  void run_chunk_lanes(Tiles& tl, const HeadState& hs, int kv_head, int chunk, const ChunkRows& cur,
                       const FollowingChunk& following, detail::OStart o_start) const {
    const std::size_t hd8 = static_cast<std::size_t>(hd8_);
    const int count = chunk_count(chunk);
    const float scale = p_.shape.scale;
    float* ktile = tl.k_tile.data();  // this chunk's K rows: the first sub-block's widened by the call before
    float* wt = tl.wt.data();
    const int next_count = following.rows == nullptr ? 0 : chunk_count(following.chunk);
    detail::LineQueue lines;
    detail::WidenQueue widen;
    for (int b = 0; b < count; b += kSubTokens) {
      lines.count = 0;
      if (b + kSubTokens < count)
        queue_lines(cur.v + b + kSubTokens, std::min(kSubTokens, count - b - kSubTokens), lines);
      else if (next_count > 0)
        queue_lines(following.rows->k, std::min(kSubTokens, next_count), lines);
      widen.vectors = 0;
      if (b + kSubTokens < count)
        queue_widen(cur.k + b + kSubTokens, std::min(kSubTokens, count - b - kSubTokens), true, kv_head,
                    ktile + (b + kSubTokens) * hd8, widen);
      detail::score_rows_heads_in_lanes(hs.qt, hd_, ktile + b * hd8, scale, wt + b * hpk_, lines, widen);
    }
    detail::fold_heads_in_lanes(wt, count, hs.m, hs.s, hs.o, hd_, detail::LaneO::heads_major, o_start);
    lines.count = 0;
    widen.vectors = 0;
    if (next_count > kSubTokens) queue_lines(following.rows->k + kSubTokens, next_count - kSubTokens, lines);
    if (following.next_task != nullptr) {
      // Its first 48 K rows (its start widens the first 16 with no FMA beside them, and asks for
      // the chunk's K rows again, then hits) and its first sub-block's V rows: one line queue's worth.
      const int n = following.next_task_count;
      queue_lines(following.next_task->k, std::min(kFastChunkTokens - kSubTokens, n), lines);
      queue_lines(following.next_task->v, std::min(kSubTokens, n), lines);
    }
    if (next_count > 0) {
      queue_lines(following.rows->v, std::min(kSubTokens, next_count), lines);
      queue_widen(following.rows->k, std::min(kSubTokens, next_count), true, following.kv_head, ktile, widen);
    }
    lines.write_lines = following.write_lines;
    lines.write_count = following.write_count;
    // The current token (a null row, always its chunk's last) from its f32 row, widened with the
    // range rule (N1) as the store keeps it.
    const float* last = nullptr;
    if (cur.v[count - 1] == nullptr) {
      widen_row(nullptr, false, kv_head, tl.cur_v.data());
      last = tl.cur_v.data();
    }
    detail::accumulate_rows_heads_in_lanes(hs.o, hd_, wt, cur.v, count, last, D, lines, widen, o_start);
  }

  // The first chunk's rows of the task that the worker running `task` most likely claims next
  // (the pool hands tasks out in index order, so about task + workers), for its first KV head,
  // into out; returns that chunk's token count, 0 where there is no such task. A hint for the
  // line queue only: a wrong guess asks for rows another worker is about to read.
  int likely_next_task_rows(int task, ChunkRows& out) const {
    const int next = task + workers_;
    if (next >= tasks()) return 0;
    const int first = sched_.first_chunk(first_split(range_of(next)));
    chunk_rows(first_kv_head(next), first, out);
    return chunk_count(first);
  }

  // The cache lines of the partials of the task's KV heads (kv0 and the rest of its group) for
  // `split`, which write_partials fills: those whole inside one head's [m, s, o] (the first and
  // last may hold a neighbouring split's partial, which another worker may be writing).
  void partial_lines(int kv0, int split, std::vector<const char*>& out) const {
    constexpr std::uintptr_t kLine = detail::kCacheLineBytes;
    const std::size_t stride = static_cast<std::size_t>(partial_stride(hd_));
    out.clear();
    for (int j = 0; j < group_; ++j)
      for (int h = 0; h < hpk_; ++h) {
        const float* part = partial_at((kv0 + j) * hpk_ + h, split);
        const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(part);
        const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(part + stride);
        for (std::uintptr_t at = (begin + kLine - 1) / kLine * kLine; at + kLine <= end; at += kLine)
          out.push_back(reinterpret_cast<const char*>(at));
      }
  }

  // Head `head`'s [m, s, o] for `split` in the partials ([n_heads][splits][partial_stride]).
  float* partial_at(int head, int split) const {
    const std::size_t stride = static_cast<std::size_t>(partial_stride(hd_));
    return p_.partials + (static_cast<std::size_t>(head) * sched_.splits + split) * stride;
  }

  void write_partials(const HeadState& hs, int kv_head, int split) const {
    const std::size_t stride = static_cast<std::size_t>(partial_stride(hd_));
    if (heads_in_lanes_) {
      detail::write_partials_heads_in_lanes(hs.o, hd_, hs.m, hs.s, partial_at(kv_head * hpk_, split),
                                            static_cast<long>(sched_.splits * stride),
                                            widen_in_kernels_ ? detail::LaneO::heads_major : detail::LaneO::dims_major);
      return;
    }
    for (int h = 0; h < hpk_; ++h) {
      float* part = partial_at(kv_head * hpk_ + h, split);
      part[0] = hs.stats[h].m;
      part[1] = hs.stats[h].s;
      std::memcpy(part + 2, hs.o + static_cast<std::size_t>(h) * hd8_, sizeof(float) * hd_);
    }
  }

  // qt_ = every KV head's query rows, the range rule applied, transposed ([n_kv_heads][hd][hpk]):
  // once per call, not once per task (every split of a KV head reads the same q; per task the
  // transposition was ~6 % of a call at 8,192 on one worker).
  void transpose_q() {
    const std::size_t hd = static_cast<std::size_t>(hd_), hpk = static_cast<std::size_t>(hpk_);
    qt_.resize(static_cast<std::size_t>(p_.shape.n_kv_heads) * hd * hpk);
    for (int kv_head = 0; kv_head < p_.shape.n_kv_heads; ++kv_head) {
      const float* q = p_.q + static_cast<std::size_t>(kv_head) * hpk * hd;
      float* qt = qt_.data() + static_cast<std::size_t>(kv_head) * hd * hpk;
      for (std::size_t h = 0; h < hpk; ++h)
        for (std::size_t d = 0; d < hd; ++d) qt[d * hpk + h] = q[h * hd + d];
    }
    // N1's range rule is element by element, so it applies to the transposed copy in place.
    range_row(qt_.data(), qt_.data(), static_cast<int>(qt_.size()), KvTraits<D>::kRangeMax);
  }

  const ProducerParams& p_;
  bool wide_;  // the 16-lane kernels (producer_fast_avx512.hpp) instead of the 8-lane ones
  int hd_;
  int hd8_;
  int hpk_;
  // The pool's worker count, read once per call (threads() takes the pool's lock): how many
  // tasks run side by side, for kv_heads_per_task and likely_next_task_rows.
  int workers_;
  int group_;
  FastSchedule sched_;
  int ranges_;  // split_ranges(): tasks per KV-head group
  bool row_scores_;        // row_scores()
  bool heads_in_lanes_;    // heads_in_lanes()
  // The 16-lane kernels and the row scores read q from qt_ (transpose_q: the range rule applied
  // once per call); the 8-lane transposed-K kernels read each task's q rows.
  bool qt_form_;
  std::vector<float> qt_;  // transpose_q()
  bool lines_into_l1_;     // the heads-in-lanes kernels' asks into L1 (detail::cpu_prefetch_into_l1)
  // Heads in lanes with rows widened inside the kernels (run_chunk_lanes), else before each
  // kernel (run_chunk): detail::cpu_widen_in_kernels.
  bool widen_in_kernels_;
};

}  // namespace

std::unique_ptr<ProducerTasks> fast_producer_tasks(const ProducerParams& p, CpuVectors vectors) {
  if (p.kv_dtype == KvDtype::bf16) return std::make_unique<FastProducer<KvDtype::bf16>>(p, vectors);
  return std::make_unique<FastProducer<KvDtype::f16>>(p, vectors);
}

}  // namespace ladder::cpu
