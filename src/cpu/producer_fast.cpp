// The fast CPU producer (the CPU default; the exact twin of the GPU DAG is producer.cpp).
//
// Work: one task per (KV head, split). A split is a fixed run of 64-token chunks (fast_schedule,
// a function of the visible length only). For each chunk the task widens the K rows once (F16C)
// into an L1 tile, 16 rows at a time, and computes the scores of every query head of the group
// from that tile (16 heads per KV head in Muse Glimmer: each widened K element feeds 16 FMAs);
// then one fold per head with the shared softmax rules (score_max, fold_block_max, softmax_exp
// on 8 lanes, bit-identical to the scalar one); then the V rows are widened once, 16 at a time,
// and accumulated into every head's o. The split writes [m, s, o] to partials[head][split];
// the shared reducer (reduce_partials) merges the splits of a head in split order and divides
// once.
//
// Determinism: the chunk and split boundaries depend on the visible length only, every sum has
// a fixed order, and each task writes its own partials, so the bits are the same for any thread
// count and for every route that reads the same rows in the same order (splitk over a wrapped
// ring == vec over the same rows unwrapped). Only the order of operations inside a chunk differs
// from the GPU's DAG, so this producer is held to the f64 bound, not to the GPU's bits.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/half_convert.hpp"
#include "cpu/producer_fast_exp.hpp"
#include "cpu/thread_pool.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/heuristics.hpp"
#include "ladder/softmax.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#define LADDER_FAST_AVX2 1
#endif

namespace ladder::cpu {

FastSchedule fast_schedule(int visible) {
  FastSchedule s;
  if (visible <= 0) return s;
  s.chunks = (visible + kFastChunkTokens - 1) / kFastChunkTokens;
  s.splits = std::min(s.chunks, kFastMaxSplits);
  return s;
}

namespace {

constexpr int kVec = 8;          // floats per 256-bit register
constexpr int kHeadTile = 4;     // query heads per register tile (QK and PV)
constexpr int kTokenTile = 2;    // tokens per QK register tile: 4 x 2 = 8 accumulators
constexpr int kDimTile = 2 * kVec;  // dims per PV register tile: 4 heads x 2 vectors = 8 accumulators

int round_up(int x, int m) { return (x + m - 1) / m * m; }

template <class V>
void fit(V& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
}

// Per-thread tiles, reused across tasks and calls. Rows are padded to `hd8` floats with zeros
// and the heads to a multiple of kHeadTile with zero rows, so no kernel has a remainder loop.
struct Tiles {
  std::vector<float> q;       // [heads4][hd8]
  std::vector<float> rows;    // [kFastSubBlockTokens][hd8] widened K or V rows
  std::vector<float> scores;  // [heads4][kFastChunkTokens], scores then weights
  std::vector<float> o;       // [heads4][hd8]
  std::vector<SoftmaxStats> stats;  // [heads4]
};

#if defined(LADDER_FAST_AVX2)
// Eight horizontal sums at once: element i of the result is the sum of x[i]'s 8 elements.
__m256 hsum8(const __m256 x[8]) {
  const __m256 h01 = _mm256_hadd_ps(x[0], x[1]);
  const __m256 h23 = _mm256_hadd_ps(x[2], x[3]);
  const __m256 h45 = _mm256_hadd_ps(x[4], x[5]);
  const __m256 h67 = _mm256_hadd_ps(x[6], x[7]);
  const __m256 g0 = _mm256_hadd_ps(h01, h23);
  const __m256 g1 = _mm256_hadd_ps(h45, h67);
  return _mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20), _mm256_permute2f128_ps(g0, g1, 0x31));
}
#endif

// scores[h][t0 + i] = (q_h . k_i) * scale for the kHeadTile heads at q and tokens i, i+1 of k.
void score_tile(const float* q, const float* k, int hd8, float scale, float* scores, int t) {
#if defined(LADDER_FAST_AVX2)
  __m256 acc[kHeadTile * kTokenTile];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  const float* k1 = k + hd8;
  for (int d = 0; d < hd8; d += kVec) {
    const __m256 ka = _mm256_loadu_ps(k + d);
    const __m256 kb = _mm256_loadu_ps(k1 + d);
    for (int j = 0; j < kHeadTile; ++j) {
      const __m256 qj = _mm256_loadu_ps(q + static_cast<std::size_t>(j) * hd8 + d);
      acc[2 * j] = _mm256_fmadd_ps(qj, ka, acc[2 * j]);
      acc[2 * j + 1] = _mm256_fmadd_ps(qj, kb, acc[2 * j + 1]);
    }
  }
  alignas(32) float sums[kHeadTile * kTokenTile];
  _mm256_store_ps(sums, _mm256_mul_ps(hsum8(acc), _mm256_set1_ps(scale)));
  for (int j = 0; j < kHeadTile; ++j) {
    scores[j * kFastChunkTokens + t] = sums[2 * j];
    scores[j * kFastChunkTokens + t + 1] = sums[2 * j + 1];
  }
#else
  for (int j = 0; j < kHeadTile; ++j)
    for (int u = 0; u < kTokenTile; ++u) {
      float a = 0.0f;
      for (int d = 0; d < hd8; ++d) a = fmaf(q[static_cast<std::size_t>(j) * hd8 + d], k[static_cast<std::size_t>(u) * hd8 + d], a);
      scores[j * kFastChunkTokens + t + u] = a * scale;
    }
#endif
}

// o[h][d] += sum over i < count of w[h][t0 + i] * v[i][d] for the kHeadTile heads at o and w.
void accumulate_tile(float* o, const float* w, const float* v, int count, int hd8) {
#if defined(LADDER_FAST_AVX2)
  for (int d = 0; d < hd8; d += kDimTile) {
    const bool two = d + kVec < hd8;  // hd8 is a multiple of 8, not always of 16
    __m256 acc[kHeadTile][2];
    for (int j = 0; j < kHeadTile; ++j) {
      acc[j][0] = _mm256_loadu_ps(o + static_cast<std::size_t>(j) * hd8 + d);
      acc[j][1] = two ? _mm256_loadu_ps(o + static_cast<std::size_t>(j) * hd8 + d + kVec) : _mm256_setzero_ps();
    }
    for (int i = 0; i < count; ++i) {
      const float* vi = v + static_cast<std::size_t>(i) * hd8 + d;
      const __m256 va = _mm256_loadu_ps(vi);
      const __m256 vb = two ? _mm256_loadu_ps(vi + kVec) : _mm256_setzero_ps();
      for (int j = 0; j < kHeadTile; ++j) {
        const __m256 wj = _mm256_broadcast_ss(w + j * kFastChunkTokens + i);
        acc[j][0] = _mm256_fmadd_ps(wj, va, acc[j][0]);
        acc[j][1] = _mm256_fmadd_ps(wj, vb, acc[j][1]);
      }
    }
    for (int j = 0; j < kHeadTile; ++j) {
      _mm256_storeu_ps(o + static_cast<std::size_t>(j) * hd8 + d, acc[j][0]);
      if (two) _mm256_storeu_ps(o + static_cast<std::size_t>(j) * hd8 + d + kVec, acc[j][1]);
    }
  }
#else
  for (int j = 0; j < kHeadTile; ++j)
    for (int d = 0; d < hd8; ++d) {
      float a = o[static_cast<std::size_t>(j) * hd8 + d];
      for (int i = 0; i < count; ++i) a = fmaf(w[j * kFastChunkTokens + i], v[static_cast<std::size_t>(i) * hd8 + d], a);
      o[static_cast<std::size_t>(j) * hd8 + d] = a;
    }
#endif
}

// w[i] = softmax_exp(s[i] - m) for i < count (in place), zero for count <= i < padded; returns
// the sum of the weights in a fixed order (8 running lane sums, then lanes 0..7).
float weights_in_place(float* s, int count, int padded, float m) {
#if defined(LADDER_FAST_AVX2)
  const __m256 mv = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  for (int i = 0; i < padded; i += kVec) {
    __m256 w = detail::softmax_exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), mv));
    if (i + kVec > count) {
      alignas(32) float keep[kVec];
      for (int l = 0; l < kVec; ++l) keep[l] = i + l < count ? -1.0f : 0.0f;  // sign bit selects
      w = _mm256_blendv_ps(_mm256_setzero_ps(), w, _mm256_load_ps(keep));
    }
    _mm256_storeu_ps(s + i, w);
    sum = _mm256_add_ps(sum, w);
  }
  alignas(32) float lanes[kVec];
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

void scale_row(float* o, float factor, int n) {
  for (int d = 0; d < n; ++d) o[d] *= factor;
}

class FastProducer {
 public:
  explicit FastProducer(const ProducerParams& p)
      : p_(p),
        hd_(p.shape.head_dim),
        hd8_(round_up(p.shape.head_dim, kVec)),
        hpk_(p.shape.heads_per_kv()),
        heads4_(round_up(p.shape.heads_per_kv(), kHeadTile)),
        sched_(fast_schedule(p.visible)) {}

  int tasks() const { return p_.shape.n_kv_heads * sched_.splits; }

  void run_task(int task) const {
    const int kv_head = task / sched_.splits;
    const int split = task % sched_.splits;
    thread_local Tiles tl;
    const std::size_t hd8 = static_cast<std::size_t>(hd8_);
    fit(tl.q, heads4_ * hd8);
    fit(tl.rows, static_cast<std::size_t>(kFastSubBlockTokens) * hd8);
    fit(tl.scores, static_cast<std::size_t>(heads4_) * kFastChunkTokens);
    fit(tl.o, heads4_ * hd8);
    fit(tl.stats, static_cast<std::size_t>(heads4_));

    if (p_.cur_k != nullptr && split == 0) detail::store_current_row(p_, kv_head);

    const int head0 = kv_head * hpk_;
    std::fill(tl.q.begin(), tl.q.begin() + heads4_ * hd8, 0.0f);
    for (int h = 0; h < hpk_; ++h)
      detail::floats_in_range(p_.q + static_cast<std::size_t>(head0 + h) * hd_, tl.q.data() + h * hd8, hd_);  // N1
    std::fill(tl.o.begin(), tl.o.begin() + heads4_ * hd8, 0.0f);
    std::fill(tl.stats.begin(), tl.stats.begin() + heads4_, SoftmaxStats{});
    // Padding dims of the widened rows stay zero for the whole task.
    std::fill(tl.rows.begin(), tl.rows.begin() + kFastSubBlockTokens * hd8, 0.0f);

    const int first_chunk = split * sched_.chunks / sched_.splits;
    const int end_chunk = (split + 1) * sched_.chunks / sched_.splits;
    for (int c = first_chunk; c < end_chunk; ++c) run_chunk(tl, kv_head, c);
    write_partials(tl, kv_head, split);
  }

 private:
  // Token t's K (key) or V row of one KV head, widened into dst (hd_ floats).
  void widen_row(int kv_head, int t, bool key, float* dst) const {
    if (p_.cur_k != nullptr && t == p_.visible - 1) {
      const float* cur = key ? p_.cur_k : p_.cur_v;
      // The bypass reads what the store keeps, before rounding (N1's range rule).
      detail::floats_in_range(cur + static_cast<std::size_t>(kv_head) * hd_, dst, hd_);
      return;
    }
    const bool in_tail = t >= p_.tail_first;
    const RowSource& src = in_tail ? p_.tail : p_.rows;
    const int r = in_tail ? src.row(t - p_.tail_first) : src.row(t);
    detail::halfs_to_floats((key ? src.k : src.v) + src.strides.offset(r, kv_head), dst, hd_);
  }

  // Asks for rows t0 .. t0+n-1 (clipped to the plane's rows) to be brought into the cache:
  // issued one phase ahead (the V rows of a sub-block while its K rows are scored, the next
  // chunk's K rows while V is accumulated), so the stream from memory overlaps the arithmetic.
  void prefetch_rows(int kv_head, int t0, int n, bool key) const {
#if defined(LADDER_FAST_AVX2)
    constexpr int kLine = 64;
    const int end = std::min(t0 + n, p_.cur_k != nullptr ? p_.visible - 1 : p_.visible);
    const int row_bytes = hd_ * static_cast<int>(sizeof(std::uint16_t));
    for (int t = t0; t < end; ++t) {
      const bool in_tail = t >= p_.tail_first;
      const RowSource& src = in_tail ? p_.tail : p_.rows;
      const int r = in_tail ? src.row(t - p_.tail_first) : src.row(t);
      const char* at = reinterpret_cast<const char*>((key ? src.k : src.v) + src.strides.offset(r, kv_head));
      // A read prefetch into every cache level (locality 3, what _MM_HINT_T0 asks for); the
      // builtin is spelled the same by GCC and clang, unlike _mm_prefetch's hint type.
      for (int b = 0; b < row_bytes; b += kLine) __builtin_prefetch(at + b, 0, 3);
    }
#else
    (void)kv_head, (void)t0, (void)n, (void)key;
#endif
  }

  // Widens rows t0 .. t0+n-1 into the tile; with `pad_even`, an odd n gets a zero row after it
  // (a QK token pair reads two rows; the extra score is never used).
  void widen_rows(Tiles& tl, int kv_head, int t0, int n, bool key) const {
    const std::size_t hd8 = static_cast<std::size_t>(hd8_);
    for (int i = 0; i < n; ++i) widen_row(kv_head, t0 + i, key, tl.rows.data() + i * hd8);
    if (n % kTokenTile != 0) std::fill(tl.rows.data() + n * hd8, tl.rows.data() + (n + 1) * hd8, 0.0f);
  }


  void run_chunk(Tiles& tl, int kv_head, int chunk) const {
    const std::size_t hd8 = static_cast<std::size_t>(hd8_);
    const int first = chunk * kFastChunkTokens;
    const int count = std::min(kFastChunkTokens, p_.visible - first);
    const float scale = p_.shape.scale;
    // Scores of every head for the chunk, K widened once per 16-row sub-block.
    for (int b = 0; b < count; b += kFastSubBlockTokens) {
      const int n = std::min(kFastSubBlockTokens, count - b);
      prefetch_rows(kv_head, first + b, n, false);
      widen_rows(tl, kv_head, first + b, n, true);
      for (int h = 0; h < heads4_; h += kHeadTile)
        for (int i = 0; i < n; i += kTokenTile)
          score_tile(tl.q.data() + h * hd8, tl.rows.data() + i * hd8, hd8_, scale,
                     tl.scores.data() + static_cast<std::size_t>(h) * kFastChunkTokens, b + i);
    }
    // One fold per head (softmax.hpp): chunk max, rescale, weights, running sum.
    const int padded = round_up(count, kVec);
    for (int h = 0; h < hpk_; ++h) {
      float* s = tl.scores.data() + static_cast<std::size_t>(h) * kFastChunkTokens;
      float chunk_max = s[0];
      for (int i = 1; i < count; ++i) chunk_max = score_max(chunk_max, s[i]);
      SoftmaxStats& st = tl.stats[static_cast<std::size_t>(h)];
      const float corr = fold_block_max(st, chunk_max);
      if (corr != 1.0f) scale_row(tl.o.data() + h * hd8, corr, hd8_);
      st.s += weights_in_place(s, count, padded, st.m);
    }
    // Padding heads (h >= hpk) keep zero weights, so their o stays zero.
    for (int h = hpk_; h < heads4_; ++h)
      std::fill(tl.scores.data() + static_cast<std::size_t>(h) * kFastChunkTokens,
                tl.scores.data() + static_cast<std::size_t>(h + 1) * kFastChunkTokens, 0.0f);
    // o += w . V, V widened once per 16-row sub-block and applied to every head.
    for (int b = 0; b < count; b += kFastSubBlockTokens) {
      const int n = std::min(kFastSubBlockTokens, count - b);
      prefetch_rows(kv_head, first + kFastChunkTokens + b, n, true);
      widen_rows(tl, kv_head, first + b, n, false);
      for (int h = 0; h < heads4_; h += kHeadTile)
        accumulate_tile(tl.o.data() + h * hd8, tl.scores.data() + static_cast<std::size_t>(h) * kFastChunkTokens + b,
                        tl.rows.data(), n, hd8_);
    }
  }

  void write_partials(const Tiles& tl, int kv_head, int split) const {
    const std::size_t stride = static_cast<std::size_t>(partial_stride(hd_));
    for (int h = 0; h < hpk_; ++h) {
      const int head = kv_head * hpk_ + h;
      float* part = p_.partials + (static_cast<std::size_t>(head) * sched_.splits + split) * stride;
      part[0] = tl.stats[static_cast<std::size_t>(h)].m;
      part[1] = tl.stats[static_cast<std::size_t>(h)].s;
      std::memcpy(part + 2, tl.o.data() + static_cast<std::size_t>(h) * hd8_, sizeof(float) * hd_);
    }
  }

  const ProducerParams& p_;
  int hd_;
  int hd8_;
  int hpk_;
  int heads4_;
  FastSchedule sched_;
};

}  // namespace

Status produce_fast(const ProducerParams& p) {
  if (p.visible <= 0 || p.q == nullptr || p.partials == nullptr) return {};
  const FastProducer prod(p);
  return detail::parallel_for(prod.tasks(), [&](int task) { prod.run_task(task); });
}

}  // namespace ladder::cpu
