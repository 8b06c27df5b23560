// Shared helpers for the CPU-twin suites: random activations, plane construction, the f64
// reference fed from a plane, and a literal, unoptimised transcription of THE PRODUCER DAG
// (kernel_params.hpp) that the vectorised twins must match bit for bit.
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/reference.hpp"
#include "ladder/softmax.hpp"

namespace ladder::test {

// Activation magnitudes are drawn from [kMinMagnitude, kMaxMagnitude] with a random sign: never
// zero (a zero input hides addressing bugs), and wide enough that scores spread the softmax.
inline constexpr float kMinMagnitude = 0.05f;
inline constexpr float kMaxMagnitude = 1.5f;

inline float random_value(std::mt19937& rng) {
  std::uniform_real_distribution<float> mag(kMinMagnitude, kMaxMagnitude);
  std::bernoulli_distribution neg(0.5);
  const float m = mag(rng);
  return neg(rng) ? -m : m;
}

inline std::vector<float> random_values(std::size_t n, std::mt19937& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = random_value(rng);
  return v;
}

inline HeadShape make_shape(int n_heads, int n_kv_heads, int head_dim) {
  HeadShape s;
  s.n_heads = n_heads;
  s.n_kv_heads = n_kv_heads;
  s.head_dim = head_dim;
  s.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  return s;
}

inline PlaneConfig ring_config(int n_kv_heads, int head_dim, int window, int capacity, int max_context,
                               KvDtype dtype = KvDtype::f16) {
  PlaneConfig c;
  c.kv_dtype = dtype;
  c.kind = PlaneKind::ring;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = head_dim;
  c.window = window;
  c.capacity = capacity;
  c.max_context = max_context;
  return c;
}

inline PlaneConfig growing_config(int n_kv_heads, int head_dim, int capacity, int max_context,
                                  KvDtype dtype = KvDtype::f16) {
  PlaneConfig c;
  c.kv_dtype = dtype;
  c.kind = PlaneKind::growing;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = head_dim;
  c.capacity = capacity;
  c.max_context = max_context;
  return c;
}

// One token's activations: q [n_heads][head_dim], k and v [n_kv_heads][head_dim].
struct Token {
  std::vector<float> q, k, v;
};

inline Token random_token(const HeadShape& s, std::mt19937& rng) {
  Token t;
  t.q = random_values(static_cast<std::size_t>(s.n_heads) * s.head_dim, rng);
  t.k = random_values(static_cast<std::size_t>(s.n_kv_heads) * s.head_dim, rng);
  t.v = random_values(static_cast<std::size_t>(s.n_kv_heads) * s.head_dim, rng);
  return t;
}

inline std::vector<float> nan_filled(std::size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline bool same_plane(const HostPlane& a, const HostPlane& b) {
  return a.state() == b.state() && a.elements() == b.elements() &&
         std::memcmp(a.k(), b.k(), a.elements() * sizeof(KvWord)) == 0 &&
         std::memcmp(a.v(), b.v(), a.elements() * sizeof(KvWord)) == 0;
}

// Appends positions [0, count) with random rows (the history before the token under test).
inline HostPlane build_plane(const PlaneConfig& cfg, int count, std::mt19937& rng) {
  HostPlane p = HostPlane::create(cfg).value();
  const std::size_t row = static_cast<std::size_t>(cfg.n_kv_heads) * cfg.head_dim;
  for (int pos = 0; pos < count; ++pos) {
    const std::vector<float> k = random_values(row, rng), v = random_values(row, rng);
    if (!p.append_row(pos, k.data(), v.data()).ok()) ADD_FAILURE() << "history append failed at " << pos;
  }
  return p;
}

// A plane's per-position history kept, so the same logical tokens can be written again into a
// differently shaped plane.
struct History {
  std::vector<std::vector<float>> k, v;
};

// Appends positions [0, count) with random rows, kept in `h`.
inline HostPlane build_with_history(const PlaneConfig& cfg, int count, std::mt19937& rng, History& h) {
  HostPlane p = HostPlane::create(cfg).value();
  const std::size_t row = static_cast<std::size_t>(cfg.n_kv_heads) * cfg.head_dim;
  for (int pos = 0; pos < count; ++pos) {
    h.k.push_back(random_values(row, rng));
    h.v.push_back(random_values(row, rng));
    if (!p.append_row(pos, h.k.back().data(), h.v.back().data()).ok()) ADD_FAILURE() << "history append failed";
  }
  return p;
}

// The logical tokens [first, first + count) of `h` appended to a fresh plane as positions
// 0..count-2, ready for the last one to be attended at position count-1.
inline HostPlane unwrapped_copy(const PlaneConfig& cfg, const History& h, int first, int count) {
  HostPlane p = HostPlane::create(cfg).value();
  for (int i = 0; i + 1 < count; ++i)
    if (!p.append_row(i, h.k[first + i].data(), h.v[first + i].data()).ok()) ADD_FAILURE() << "copy append failed";
  return p;
}

// A ring holding exactly one window (window = capacity) is full once it has wrapped, every slot
// in-window. The position whose window starts at physical slot `origin`: (position + 1) %
// capacity == origin, the ring gone round at least once (origin 0: twice).
inline int full_ring_position(int capacity, int origin) {
  return (origin == 0 ? 2 * capacity : capacity + origin) - 1;
}

// A head-major plane whose rows hold the window tokens [first, first + count) of `h` (the newest
// one `newest`'s k and v) as positions 0..count-1 of a full plane wrapped at physical slot
// `origin`, with the state that says so. No plane of the engine is like that (a growing plane
// never wraps): it lets the suites read a wrapped window through head-major strides, a ragged
// tail included. cfg: a growing config of capacity >= count.
struct WrappedRows {
  HostPlane rows;
  PlaneState state;
};
inline WrappedRows head_major_wrapped(const PlaneConfig& cfg, const History& h, int first, int count, int origin,
                                      const Token& newest) {
  WrappedRows w{HostPlane::create(cfg).value(), PlaneState{}};
  w.state.capacity = count;
  w.state.len = count;
  w.state.origin_logical = 0;
  w.state.origin_physical = origin;
  w.state.next_position = count;
  for (int t = 0; t < count; ++t) {
    const bool last = t == count - 1;
    w.rows.write_row(w.state.physical(t), last ? newest.k.data() : h.k[first + t].data(),
                     last ? newest.v.data() : h.v[first + t].data());
  }
  return w;
}

// The result of running one route on a copy of `before` with this token appended at `position`.
// Selects a CPU producer for a scope and restores the default (fast) after it, so a failing
// assertion cannot leave a later test on the wrong producer.
class ProducerScope {
 public:
  explicit ProducerScope(cpu::CpuProducer p) { cpu::set_producer(p); }
  ~ProducerScope() { cpu::set_producer(cpu::CpuProducer::fast); }
  ProducerScope(const ProducerScope&) = delete;
  ProducerScope& operator=(const ProducerScope&) = delete;
};
inline constexpr KvDtype kAllDtypes[] = {KvDtype::f16, KvDtype::bf16};
inline constexpr cpu::CpuProducer kAllProducers[] = {cpu::CpuProducer::fast, cpu::CpuProducer::exact};

struct RouteRun {
  Status status;
  std::vector<float> out;
  HostPlane plane;
  int slot = -1;
};

inline RouteRun run_on_copy(Route r, const HostPlane& before, int position, const HeadShape& shape,
                            const Token& tok) {
  RouteRun run{Status{}, nan_filled(tok.q.size()), before, -1};
  Result<int> slot = run.plane.append(position);
  if (!slot.ok()) {
    run.status = slot.status();
    return run;
  }
  run.slot = *slot;
  cpu::Workspace ws;
  const LayerIO io{tok.q.data(), tok.k.data(), tok.v.data(), run.out.data()};
  run.status = cpu::run_route(r, run.plane, position, run.slot, shape, io, ws);
  return run;
}

// A row of one token (all KV heads) as f32, in the order a route visits it.
using RowFetch = std::function<void(int t, float* k_row, float* v_row)>;

inline void plane_row(const HostPlane& p, int physical, float* k_row, float* v_row) {
  const PlaneStrides s = p.strides();
  const int hd = p.config().head_dim;
  for (int h = 0; h < p.config().n_kv_heads; ++h)
    for (int d = 0; d < hd; ++d) {
      const std::int64_t at = s.offset(physical, h) + d;
      k_row[h * hd + d] = kv_decode(p.k()[at], p.config().kv_dtype);
      v_row[h * hd + d] = kv_decode(p.v()[at], p.config().kv_dtype);
    }
}

// Rows in logical order (the visible window), with the last token optionally replaced by the
// unrounded f32 activations (the interleaved route's current-token bypass).
inline RowFetch logical_rows(const HostPlane& p, int position, const Token* bypass) {
  const int start = logical_start(position, p.config().window);
  return [&p, start, position, bypass](int t, float* k, float* v) {
    if (bypass != nullptr && start + t == position) {
      std::memcpy(k, bypass->k.data(), bypass->k.size() * sizeof(float));
      std::memcpy(v, bypass->v.data(), bypass->v.size() * sizeof(float));
      return;
    }
    plane_row(p, p.state().physical(start + t), k, v);
  };
}

// f64 reference over the rows `fetch` yields (any order: softmax is permutation-invariant).
inline std::vector<double> reference_from(const HeadShape& s, const std::vector<float>& q, int visible,
                                          const RowFetch& fetch) {
  const std::size_t row = static_cast<std::size_t>(s.n_kv_heads) * s.head_dim;
  std::vector<double> kd(row * visible), vd(row * visible), qd(q.begin(), q.end());
  std::vector<float> k(row), v(row);
  for (int t = 0; t < visible; ++t) {
    fetch(t, k.data(), v.data());
    for (std::size_t i = 0; i < row; ++i) {
      kd[t * row + i] = k[i];
      vd[t * row + i] = v[i];
    }
  }
  std::vector<double> out(q.size());
  reference_attention(s, qd.data(), kd.data(), vd.data(), visible, out.data());
  return out;
}

// THE PRODUCER DAG, written the plainest way: one head, one warp, one token at a time.
inline std::vector<float> dag_oracle(const HeadShape& s, const std::vector<float>& q, int visible,
                                     const RowFetch& fetch) {
  constexpr int kLanes = 32;
  constexpr int kChunk = 4;
  const int hd = s.head_dim;
  const std::size_t row = static_cast<std::size_t>(s.n_kv_heads) * hd;
  std::vector<float> keys(row * visible), values(row * visible);
  for (int t = 0; t < visible; ++t) fetch(t, keys.data() + t * row, values.data() + t * row);

  const Schedule sch = pinned_schedule(visible);
  std::vector<float> out(q.size());
  for (int h = 0; h < s.n_heads; ++h) {
    const float* qh = q.data() + static_cast<std::size_t>(h) * hd;
    const int kvh = s.kv_head_of(h);
    std::vector<SoftmaxState> workgroups;
    for (int w = 0; w < sch.nwg; ++w) {
      std::vector<SoftmaxState> warps;
      for (int g = 0; g < sch.nsg; ++g) {
        SoftmaxState st(hd);
        for (int b = w * sch.nsg + g; b < sch.blocks; b += sch.nwg * sch.nsg) {
          const int count = std::min(kBlockTokens, visible - kBlockTokens * b);
          std::vector<float> scores(static_cast<std::size_t>(count));
          for (int i = 0; i < count; ++i) {
            const float* k = keys.data() + (kBlockTokens * b + i) * row + kvh * hd;
            float acc[kLanes] = {};
            for (int d = 0; d < hd; ++d) acc[(d / kChunk) % kLanes] = fmaf(qh[d], k[d], acc[(d / kChunk) % kLanes]);
            for (int off = kLanes / 2; off >= 1; off /= 2) {
              float next[kLanes];
              for (int l = 0; l < kLanes; ++l) next[l] = acc[l] + acc[l ^ off];
              std::memcpy(acc, next, sizeof acc);
            }
            scores[i] = acc[0] * s.scale;
          }
          float block_max = scores[0];
          for (int i = 1; i < count; ++i) block_max = score_max(block_max, scores[i]);
          const float corr = fold_block_max(st.st, block_max);
          for (float& o : st.o) o *= corr;
          for (int i = 0; i < count; ++i) {
            const float* v = values.data() + (kBlockTokens * b + i) * row + kvh * hd;
            const float wgt = score_weight(st.st, scores[i]);
            st.st.s += wgt;
            for (int d = 0; d < hd; ++d) st.o[d] = fmaf(wgt, v[d], st.o[d]);
          }
        }
        warps.push_back(std::move(st));
      }
      workgroups.push_back(SoftmaxState::merge(warps.data(), sch.nsg));
    }
    SoftmaxState::merge(workgroups.data(), sch.nwg).normalize(out.data() + static_cast<std::size_t>(h) * hd);
  }
  return out;
}

}  // namespace ladder::test
