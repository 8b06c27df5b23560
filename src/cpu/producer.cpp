// The three producer twins (splitk, vec/staged, interleaved) and the reducer. They share one
// body, because THE PRODUCER DAG (kernel_params.hpp) is one DAG: the families differ only in
// where token t's row comes from. Work is split over (KV head, workgroup) tasks; a task runs
// every sibling query head of its KV head, so each plane row is converted once and reused by all
// of them (either KV dtype: the rows are widened to f32 exactly, kv_convert.hpp). Vector instructions run across the 32 DAG lanes or across head dimensions, never
// along one lane's or one dimension's accumulation chain, so every head's arithmetic is the
// DAG's, operation for operation.
#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define LADDER_CPU_AVX2 1
#endif

#include "cpu/cache_lines.hpp"
#include "cpu/kv_convert.hpp"
#include "cpu/thread_pool.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/heuristics.hpp"
#include "ladder/softmax.hpp"

namespace ladder::cpu {
namespace {

constexpr int kLanes = 32;                      // DAG lanes (a warp)
constexpr int kChunk = 4;                       // consecutive dims a lane owns per chunk
constexpr int kRoundDims = kLanes * kChunk;     // dims covered by one pass over all lanes
constexpr int kLaneGroup = 8;                   // lanes per 256-bit register
constexpr int kLaneGroups = kLanes / kLaneGroup;
constexpr int kAccumDims = 64;                  // dims per accumulate pass: 8 register chains

// Lane-major buffers ("lanes"): for round r and chunk element j, 32 floats, one per lane.
// Within each group of 8 lanes the lanes sit in slot order (0,4,2,6,1,5,3,7). With that order
// the DAG's butterfly over a group, ((x0+x4)+(x2+x6)) + ((x1+x5)+(x3+x7)), is exactly the
// pairwise tree ((s0+s1)+(s2+s3)) + ((s4+s5)+(s6+s7)) over slots that two rounds of
// horizontal adds compute for 8 tokens at once. q and k share the layout, so it changes no
// product and no sum: only where they sit.
constexpr int kSlotOfLane[kLaneGroup] = {0, 4, 2, 6, 1, 5, 3, 7};
constexpr int lane_slot(int lane) {
  const int in_group = lane % kLaneGroup;
  return lane - in_group + kSlotOfLane[in_group];
}

int rounds_for(int head_dim) {
  const int chunks = (head_dim + kChunk - 1) / kChunk;
  return (chunks + kLanes - 1) / kLanes;
}

// natural: rounds * kRoundDims floats (dims past head_dim hold the caller's padding value).
void to_lanes(const float* natural, int rounds, float* lanes) {
  for (int r = 0; r < rounds; ++r) {
    const float* src = natural + r * kRoundDims;
    float* dst = lanes + r * kRoundDims;
#if defined(LADDER_CPU_AVX2)
    for (int g = 0; g < kLaneGroups; ++g) {
      // a..d hold lanes (8g, 8g+1), (8g+2, 8g+3), (8g+4, 8g+5), (8g+6, 8g+7) with 4 dims each.
      // Pairing a with c and b with d puts lanes (0,4,2,6) in the low half and (1,5,3,7) in the
      // high half of every output register: the slot order above.
      const float* s = src + g * kLaneGroup * kChunk;
      const __m256 a = _mm256_loadu_ps(s);
      const __m256 b = _mm256_loadu_ps(s + 8);
      const __m256 c = _mm256_loadu_ps(s + 16);
      const __m256 d = _mm256_loadu_ps(s + 24);
      const __m256 ac_lo = _mm256_unpacklo_ps(a, c);
      const __m256 ac_hi = _mm256_unpackhi_ps(a, c);
      const __m256 bd_lo = _mm256_unpacklo_ps(b, d);
      const __m256 bd_hi = _mm256_unpackhi_ps(b, d);
      float* o = dst + g * kLaneGroup;
      _mm256_storeu_ps(o + 0 * kLanes, _mm256_shuffle_ps(ac_lo, bd_lo, _MM_SHUFFLE(1, 0, 1, 0)));
      _mm256_storeu_ps(o + 1 * kLanes, _mm256_shuffle_ps(ac_lo, bd_lo, _MM_SHUFFLE(3, 2, 3, 2)));
      _mm256_storeu_ps(o + 2 * kLanes, _mm256_shuffle_ps(ac_hi, bd_hi, _MM_SHUFFLE(1, 0, 1, 0)));
      _mm256_storeu_ps(o + 3 * kLanes, _mm256_shuffle_ps(ac_hi, bd_hi, _MM_SHUFFLE(3, 2, 3, 2)));
    }
#else
    for (int lane = 0; lane < kLanes; ++lane)
      for (int j = 0; j < kChunk; ++j) dst[j * kLanes + lane_slot(lane)] = src[lane * kChunk + j];
#endif
  }
}

#if defined(LADDER_CPU_AVX2)
// DAG step 2 up to the butterfly's off = 8 stage for one (head, token): per-lane fmaf chains
// over the lane's dims in increasing d, then off 16 (group g with g+2) and off 8 (group 0 with
// 1). Returns the 8 partial sums of lanes 0..7 in slot order.
__m256 lane_partials(const float* q_lanes, const float* k_lanes, int rounds) {
  const int steps = rounds * kChunk;
  __m256 acc[kLaneGroups] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int step = 0; step < steps; ++step) {
    const float* qs = q_lanes + step * kLanes;
    const float* ks = k_lanes + step * kLanes;
    for (int g = 0; g < kLaneGroups; ++g)
      acc[g] = _mm256_fmadd_ps(_mm256_loadu_ps(qs + g * kLaneGroup), _mm256_loadu_ps(ks + g * kLaneGroup), acc[g]);
  }
  return _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
}

// The butterfly's off = 4, 2, 1 stages for 8 tokens at once: token i's result in element i.
__m256 finish_butterfly(const __m256 x[kLaneGroup]) {
  const __m256 h01 = _mm256_hadd_ps(x[0], x[1]);
  const __m256 h23 = _mm256_hadd_ps(x[2], x[3]);
  const __m256 h45 = _mm256_hadd_ps(x[4], x[5]);
  const __m256 h67 = _mm256_hadd_ps(x[6], x[7]);
  const __m256 g0 = _mm256_hadd_ps(h01, h23);  // tokens 0..3: low half slots 0-3, high half 4-7
  const __m256 g1 = _mm256_hadd_ps(h45, h67);  // tokens 4..7
  return _mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20), _mm256_permute2f128_ps(g0, g1, 0x31));
}
#else
// DAG step 2 for one (head, token): per-lane fmaf chains, then the xor butterfly; lane 0's sum.
float lane_dot(const float* q_lanes, const float* k_lanes, int rounds) {
  const int steps = rounds * kChunk;
  float acc[kLanes] = {};
  for (int step = 0; step < steps; ++step)
    for (int lane = 0; lane < kLanes; ++lane) {
      const int s = step * kLanes + lane_slot(lane);
      acc[lane] = fmaf(q_lanes[s], k_lanes[s], acc[lane]);
    }
  for (int off = kLanes / 2; off >= 1; off /= 2) {
    float next[kLanes];
    for (int lane = 0; lane < kLanes; ++lane) next[lane] = acc[lane] + acc[lane ^ off];
    std::memcpy(acc, next, sizeof acc);
  }
  return acc[0];
}
#endif

// Scaled scores of `count` tokens (k in lanes, one token per lane_floats) for one head.
void block_scores(const float* q_lanes, const float* k_lanes, int lane_floats, int rounds, int count, float scale,
                  float* scores) {
#if defined(LADDER_CPU_AVX2)
  const __m256 sc = _mm256_set1_ps(scale);
  for (int i = 0; i < count; i += kLaneGroup) {
    __m256 x[kLaneGroup];
    for (int j = 0; j < kLaneGroup; ++j)
      x[j] = i + j < count ? lane_partials(q_lanes, k_lanes + static_cast<std::size_t>(i + j) * lane_floats, rounds)
                           : _mm256_setzero_ps();
    _mm256_storeu_ps(scores + i, _mm256_mul_ps(finish_butterfly(x), sc));
  }
#else
  for (int i = 0; i < count; ++i)
    scores[i] = lane_dot(q_lanes, k_lanes + static_cast<std::size_t>(i) * lane_floats, rounds) * scale;
#endif
}

void scale_in_place(float* o, float factor, int n) {
  int d = 0;
#if defined(LADDER_CPU_AVX2)
  const __m256 f = _mm256_set1_ps(factor);
  for (; d + kLaneGroup <= n; d += kLaneGroup) _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), f));
#endif
  for (; d < n; ++d) o[d] *= factor;
}

// o[d] = fmaf(w[t], v[t][d], o[d]) for t = 0..count-1 in order, for every d. Each d is its own
// chain; kAccumDims of them run side by side so the FMA latency is hidden.
void accumulate(float* o, const float* w, const float* v, int count, int n) {
  int d = 0;
#if defined(LADDER_CPU_AVX2)
  constexpr int kRegs = kAccumDims / kLaneGroup;
  for (; d + kAccumDims <= n; d += kAccumDims) {
    __m256 a[kRegs];
    for (int r = 0; r < kRegs; ++r) a[r] = _mm256_loadu_ps(o + d + r * kLaneGroup);
    for (int t = 0; t < count; ++t) {
      const __m256 wt = _mm256_set1_ps(w[t]);
      const float* vt = v + static_cast<std::size_t>(t) * n + d;
      for (int r = 0; r < kRegs; ++r) a[r] = _mm256_fmadd_ps(wt, _mm256_loadu_ps(vt + r * kLaneGroup), a[r]);
    }
    for (int r = 0; r < kRegs; ++r) _mm256_storeu_ps(o + d + r * kLaneGroup, a[r]);
  }
  for (; d + kLaneGroup <= n; d += kLaneGroup) {
    __m256 a = _mm256_loadu_ps(o + d);
    for (int t = 0; t < count; ++t)
      a = _mm256_fmadd_ps(_mm256_set1_ps(w[t]), _mm256_loadu_ps(v + static_cast<std::size_t>(t) * n + d), a);
    _mm256_storeu_ps(o + d, a);
  }
#endif
  for (; d < n; ++d) {
    float a = o[d];
    for (int t = 0; t < count; ++t) a = fmaf(w[t], v[static_cast<std::size_t>(t) * n + d], a);
    o[d] = a;
  }
}

// out[d] = fmaf(x[d], c, out[d]): the merge rule of softmax.hpp, elementwise.
void fma_into(float* out, const float* x, float c, int n) {
  int d = 0;
#if defined(LADDER_CPU_AVX2)
  const __m256 cv = _mm256_set1_ps(c);
  for (; d + kLaneGroup <= n; d += kLaneGroup)
    _mm256_storeu_ps(out + d, _mm256_fmadd_ps(_mm256_loadu_ps(x + d), cv, _mm256_loadu_ps(out + d)));
#endif
  for (; d < n; ++d) out[d] = merge_add(out[d], x[d], c);
}

// One row of one KV head: plane elements from a plane or scratch, or f32 from the current token.
struct RowRef {
  const KvWord* stored = nullptr;
  const float* full = nullptr;
};

void load_row(const RowRef& r, float* dst, int n, KvDtype d) {
  if (r.full != nullptr) {
    detail::floats_in_range(r.full, dst, n, kv_range_max(d));  // the bypass reads what the store would keep (N1)
  } else {
    detail::widen_row(r.stored, dst, n, d);
  }
}

// Per-thread buffers, reused across tasks and calls.
struct TaskScratch {
  std::vector<float> q_lanes;   // [heads_per_kv][lane floats]
  std::vector<float> natural;   // one row, padded to whole rounds
  std::vector<float> k_lanes;   // [32][lane floats]
  std::vector<float> v_rows;    // [32][head_dim]
  std::vector<float> scores;    // [heads_per_kv][32]
  std::vector<float> weights;   // [heads_per_kv][32]
  std::vector<SoftmaxStats> stats;  // [nsg][heads_per_kv]
  std::vector<float> o;             // [nsg][heads_per_kv][head_dim]
};

template <class V>
void fit(V& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
}

enum class Family { splitk, vec, interleaved };

class Producer final : public ProducerTasks {
 public:
  Producer(const ProducerParams& p, Family f)
      : p_(p),
        hd_(p.shape.head_dim),
        hpk_(p.shape.heads_per_kv()),
        rounds_(rounds_for(p.shape.head_dim)),
        lane_floats_(rounds_ * kRoundDims),
        bypass_(f == Family::interleaved),
        use_tail_(f == Family::vec) {}

  // Task t: KV head t / nwg, workgroup t % nwg (the order of produce()).
  int tasks() const override { return p_.shape.n_kv_heads * p_.sched.nwg; }
  int kv_heads_per_task() const override { return 1; }
  int first_kv_head(int task) const override { return task / p_.sched.nwg; }
  int splits() const override { return p_.sched.nwg; }
  void run(int task) const override { run_task(task / p_.sched.nwg, task % p_.sched.nwg); }

  void run_task(int kv_head, int workgroup) const {
    thread_local TaskScratch sc;
    const Schedule& s = p_.sched;
    const std::size_t hd = static_cast<std::size_t>(hd_);
    fit(sc.q_lanes, static_cast<std::size_t>(hpk_) * lane_floats_);
    fit(sc.natural, static_cast<std::size_t>(lane_floats_));
    fit(sc.k_lanes, static_cast<std::size_t>(kBlockTokens) * lane_floats_);
    fit(sc.v_rows, static_cast<std::size_t>(kBlockTokens) * hd);
    fit(sc.scores, static_cast<std::size_t>(hpk_) * kBlockTokens);
    fit(sc.weights, static_cast<std::size_t>(hpk_) * kBlockTokens);
    fit(sc.stats, static_cast<std::size_t>(s.nsg) * hpk_);
    fit(sc.o, static_cast<std::size_t>(s.nsg) * hpk_ * hd);

    if (bypass_ && workgroup == 0) detail::store_current_row(p_, kv_head);

    // q in lanes; padding dims are -0.0 so their products are -0, an exact additive identity.
    const int head0 = kv_head * hpk_;
    for (int i = 0; i < hpk_; ++i) {
      std::fill(sc.natural.begin(), sc.natural.begin() + lane_floats_, -0.0f);
      detail::floats_in_range(p_.q + static_cast<std::size_t>(head0 + i) * hd, sc.natural.data(), hd_,
                              kv_range_max(p_.kv_dtype));
      to_lanes(sc.natural.data(), rounds_, sc.q_lanes.data() + static_cast<std::size_t>(i) * lane_floats_);
    }
    // K padding dims are +0.0 (times q's -0.0 gives -0.0); only dims < head_dim are rewritten.
    std::fill(sc.natural.begin(), sc.natural.begin() + lane_floats_, 0.0f);

    for (int warp = 0; warp < s.nsg; ++warp) {
      SoftmaxStats* stats = sc.stats.data() + static_cast<std::size_t>(warp) * hpk_;
      float* o = sc.o.data() + static_cast<std::size_t>(warp) * hpk_ * hd;
      std::fill(stats, stats + hpk_, SoftmaxStats{});
      std::fill(o, o + hpk_ * hd, 0.0f);
      for (int b = s.first_block(workgroup, warp); b < s.blocks; b += s.block_stride())
        run_block(sc, kv_head, b, stats, o);
    }
    merge_warps(sc, kv_head, workgroup);
  }

 private:
  RowRef row(int kv_head, int t, bool key) const {
    if (bypass_ && t == p_.visible - 1) {
      const float* cur = key ? p_.cur_k : p_.cur_v;
      return {nullptr, cur + static_cast<std::size_t>(kv_head) * hd_};
    }
    const bool in_tail = use_tail_ && t >= p_.tail_first;
    const RowSource& src = in_tail ? p_.tail : p_.rows;
    const int r = in_tail ? src.row(t - p_.tail_first) : src.row(t);
    const KvWord* base = key ? src.k : src.v;
    return {base + src.strides.offset(r, kv_head), nullptr};
  }


  // DAG step 3 for one 32-token block, every sibling head.
  void run_block(TaskScratch& sc, int kv_head, int block, SoftmaxStats* stats, float* o) const {
    const std::size_t hd = static_cast<std::size_t>(hd_);
    const int first = block * kBlockTokens;
    const int count = std::min(kBlockTokens, p_.visible - first);
    for (int i = 0; i < count; ++i) {
      load_row(row(kv_head, first + i, true), sc.natural.data(), hd_, p_.kv_dtype);
      to_lanes(sc.natural.data(), rounds_, sc.k_lanes.data() + static_cast<std::size_t>(i) * lane_floats_);
    }
    for (int h = 0; h < hpk_; ++h) {
      const float* ql = sc.q_lanes.data() + static_cast<std::size_t>(h) * lane_floats_;
      float* sh = sc.scores.data() + static_cast<std::size_t>(h) * kBlockTokens;
      float* wh = sc.weights.data() + static_cast<std::size_t>(h) * kBlockTokens;
      block_scores(ql, sc.k_lanes.data(), lane_floats_, rounds_, count, p_.shape.scale, sh);
      float block_max = sh[0];
      for (int i = 1; i < count; ++i) block_max = score_max(block_max, sh[i]);
      SoftmaxStats& st = stats[h];
      const float corr = fold_block_max(st, block_max);
      scale_in_place(o + h * hd, corr, hd_);
      for (int i = 0; i < count; ++i) {
        wh[i] = score_weight(st, sh[i]);
        st.s += wh[i];
      }
    }
    for (int i = 0; i < count; ++i)
      load_row(row(kv_head, first + i, false), sc.v_rows.data() + static_cast<std::size_t>(i) * hd, hd_, p_.kv_dtype);
    for (int h = 0; h < hpk_; ++h)
      accumulate(o + h * hd, sc.weights.data() + static_cast<std::size_t>(h) * kBlockTokens, sc.v_rows.data(),
                 count, hd_);
  }

  // DAG step 4: merge the warps of one workgroup in warp order and write the partials.
  void merge_warps(const TaskScratch& sc, int kv_head, int workgroup) const {
    const std::size_t hd = static_cast<std::size_t>(hd_);
    const int nsg = p_.sched.nsg;
    for (int h = 0; h < hpk_; ++h) {
      const int head = kv_head * hpk_ + h;
      float* part = p_.partials + (static_cast<std::size_t>(head) * p_.sched.nwg + workgroup) * (2 + hd);
      const auto warp = [&](int g) { return static_cast<std::size_t>(g) * hpk_ + h; };
      float* out_o = part + 2;
      std::fill(out_o, out_o + hd, 0.0f);
      const SoftmaxStats all = merge_stats(
          nsg, [&](int g) { return sc.stats[warp(g)].m; }, [&](int g) { return sc.stats[warp(g)].s; },
          [&](int g, float c) { fma_into(out_o, sc.o.data() + warp(g) * hd, c, hd_); });
      part[0] = all.m;
      part[1] = all.s;
    }
  }

  const ProducerParams& p_;
  int hd_;
  int hpk_;
  int rounds_;
  int lane_floats_;
  bool bypass_;
  bool use_tail_;
};

}  // namespace

std::unique_ptr<ProducerTasks> exact_producer_tasks(Route r, const ProducerParams& p) {
  const Family f = r == Route::splitk ? Family::splitk : r == Route::interleaved ? Family::interleaved : Family::vec;
  return std::make_unique<Producer>(p, f);
}

namespace {

// Asks for every cache line of `head`'s partials ([groups][stride] floats) into L1. The reducer
// reads a head's partials as a chain (each one's m, then its factor, then its o); by the time it
// runs, the layer's K and V rows have pushed them out of L2, and waiting for them a few lines at
// a time was most of reduce_head's samples (docs/perf.md, change 66).
void ask_for_partials(const ReduceParams& p, int head, std::size_t stride) {
  using detail::kIntoL1, detail::kPrefetchRead;
  constexpr std::size_t kLineFloats = detail::kCacheLineBytes / sizeof(float);
  const float* first = p.partials + static_cast<std::size_t>(head) * p.groups * stride;
  const std::size_t floats = static_cast<std::size_t>(p.groups) * stride;
  for (std::size_t at = 0; at < floats; at += kLineFloats) __builtin_prefetch(first + at, kPrefetchRead, kIntoL1);
  __builtin_prefetch(first + floats - 1, kPrefetchRead, kIntoL1);
}

}  // namespace

void reduce_head(const ReduceParams& p, int head) {
  const int hd = p.shape.head_dim;
  const std::size_t stride = static_cast<std::size_t>(partial_stride(hd));
  const float* parts = p.partials + static_cast<std::size_t>(head) * p.groups * stride;
  // This head's lines, and the next head's: a one-task reduce walks the heads in order, and a
  // reduce of one head per task is most often followed, on the same worker, by the next head's
  // task. The next call asks for its own lines again; asking only one merge ahead, once per head,
  // with per-head tasks asking for their own head only, left reduce_head at 4.1 % of the step
  // instead of 2.5 % (one worker; docs/perf.md, change 66).
  ask_for_partials(p, head, stride);
  if (head + 1 < p.shape.n_heads) ask_for_partials(p, head + 1, stride);
  thread_local std::vector<float> acc;
  fit(acc, static_cast<std::size_t>(hd));
  std::fill(acc.begin(), acc.begin() + hd, 0.0f);
  const SoftmaxStats all = merge_stats(
      p.groups, [&](int w) { return parts[w * stride]; }, [&](int w) { return parts[w * stride + 1]; },
      [&](int w, float c) { fma_into(acc.data(), parts + w * stride + 2, c, hd); });
  float* out = p.out + static_cast<std::size_t>(head) * hd;
  for (int d = 0; d < hd; ++d) out[d] = acc[static_cast<std::size_t>(d)] / all.s;
}

bool reduce_in_one_task(const ReduceParams& p) {
  return static_cast<std::int64_t>(p.shape.n_heads) * p.groups * partial_stride(p.shape.head_dim) < kReduceFloatsPerTask;
}

}  // namespace ladder::cpu
