// The N1 sweep shared by the CPU suite (test_nonfinite.cpp) and its GPU twin
// (tests/gpu/test_gpu_nonfinite.cpp): one poisoned value (NaN, +-Inf, or a finite +-7e4 beyond
// the f16 range) in q, in the current token's K or V row, or in an older K or V row that is
// visible, or that has left the window, on every route that applies, over wrap states and GQA
// ratios. Each run is checked three ways:
//  * element by element, which outputs are NaN against the policy's own prediction
//    (docs/nonfinite.md: a NaN in q or a K row makes every head reading it NaN in every
//    dimension; a NaN in a V row makes dimension d of every head of its KV group NaN; a row that
//    has left the window changes nothing; a saturated value is finite) AND against the f64
//    reference of the ruled inputs, which must agree with the prediction; no output is ever Inf;
//  * the finite outputs of every head against the f64 reference, within P3's bound;
//  * the range counters (RangeStats) of the plane, when the runner goes through attend_layer.
#pragma once

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu_twin_helpers.hpp"
#include "ladder/attention.hpp"
#include "ladder/engine.hpp"
#include "ladder/nonfinite.hpp"

namespace ladder::test {

// P3's bound (f16 KV). It holds for poisoned runs too: a saturated K value gives scores in the
// thousands, where f32's relative 6e-8 becomes an absolute 5e-4 in an exponent, still 4x below.
inline constexpr double kNonfiniteTolerance = 2e-3;
// Finite in f32 and beyond f16's 65504: the store saturates it.
inline constexpr float kBeyondHalf = 7.0e4f;

enum class Site { q, cur_k, cur_v, old_k, old_v };
inline constexpr Site kSites[] = {Site::q, Site::cur_k, Site::cur_v, Site::old_k, Site::old_v};
inline const char* site_name(Site s) {
  switch (s) {
    case Site::q: return "q";
    case Site::cur_k: return "current K";
    case Site::cur_v: return "current V";
    case Site::old_k: return "old K";
    case Site::old_v: return "old V";
  }
  return "?";
}
inline bool site_is_key(Site s) { return s == Site::cur_k || s == Site::old_k; }
inline bool site_is_old(Site s) { return s == Site::old_k || s == Site::old_v; }

inline std::vector<float> poison_values() {
  return {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity(), kBeyondHalf, -kBeyondHalf};
}

struct NonfiniteCase {
  std::string name;
  PlaneConfig cfg;
  int n_heads = 0;
  std::vector<int> positions;  // increasing; every applicable route runs at each
  int old_position = 0;        // where the old-row sites put their poison
  bool gpu = true;             // head_dim 128 only: the CUDA kernels' one head_dim
};

inline void PrintTo(const NonfiniteCase& c, std::ostream* os) { *os << c.name; }

// Rings with slack keep a row that has left the window in the plane until it is overwritten:
// ring A's old row (position 40) has left at 104 and still sits in slot 40 until position 120.
inline std::vector<NonfiniteCase> nonfinite_cases() {
  return {
      // window 64, capacity 80: growing (20), full and contiguous (63: vec applies), partially
      // wrapped (70), the old row left but still stored (104), contiguous again (143).
      {"ring_w64_slack16_gqa4", ring_config(2, 128, 64, 80, 1000), 8, {20, 63, 70, 104, 143}, 40, true},
      // window 100 = capacity (no slack, fully wrapped once full; ragged: vec never applies).
      {"ring_w100_gqa4_one_kv", ring_config(1, 128, 100, 100, 1000), 4, {50, 99, 120, 135}, 30, true},
      // above 2048 visible rows: several warps per workgroup (nsg 2), whose merge sees the NaN.
      {"ring_w2080_slack40_gqa8", ring_config(1, 128, 2080, 2120, 4000), 8, {2079, 2100}, 2000, true},
      // growing from 16 rows (vec refused below 32 rows; a ragged tail padded at 40).
      {"growing_cap16_gqa8", growing_config(2, 128, 16, 4096), 16, {10, 40, 63, 300}, 25, true},
      {"growing_gqa16_nsg2", growing_config(2, 128, 64, 4096), 32, {2100}, 1000, true},
      {"growing_hd64_gqa1", growing_config(4, 64, 32, 1024), 4, {33, 100}, 20, false},
  };
}

// Runs route r on `plane`, which already took this token's append at `slot`.
using LayerRunner = std::function<Status(Route, HostPlane&, int position, int slot, const HeadShape&,
                                         const LayerIO&)>;

inline bool route_applies_to(Route r, const PlaneConfig& cfg, const PlaneState& st) {
  switch (r) {
    case Route::vec:
      return st.capacity >= kBlockTokens && (st.origin_physical == 0 || st.len == st.capacity) &&
             (cfg.kind == PlaneKind::growing || st.len % kBlockTokens == 0);
    case Route::splitk: return true;
    case Route::interleaved: return cfg.kind == PlaneKind::growing;
    case Route::staged: return cfg.kind == PlaneKind::ring;
  }
  return false;
}

inline Token ruled(const Token& t, KvDtype d) {
  Token r = t;
  for (std::vector<float>* x : {&r.q, &r.k, &r.v})
    for (float& e : *x) e = kv_range(e, kv_range_max(d));
  return r;
}

// Where a poison goes in a token: element `index` of q, k or v.
struct Poison {
  Site site = Site::q;
  float value = 0.0f;
  int index = 0;  // q: head * head_dim + d; k, v: kv_head * head_dim + d
};

inline void place(const Poison& p, Token& t) {
  std::vector<float>& x = p.site == Site::q ? t.q : site_is_key(p.site) ? t.k : t.v;
  x[static_cast<std::size_t>(p.index)] = p.value;
}

// The policy's prediction for output element (head, d): NaN or not.
inline bool predicted_nan(const Poison& p, bool poison_read, const HeadShape& s, int head, int d) {
  // The rule maps a value to NaN the same way under every dtype's bound (NaN and +-Inf only).
  if (!poison_read || !std::isnan(kv_range(p.value, kKvRangeMax))) return false;
  const int hd = s.head_dim;
  switch (p.site) {
    case Site::q: return head == p.index / hd;
    case Site::cur_k:
    case Site::old_k: return s.kv_head_of(head) == p.index / hd;
    case Site::cur_v:
    case Site::old_v: return s.kv_head_of(head) == p.index / hd && d == p.index % hd;
  }
  return false;
}

struct SweepTally {
  int runs = 0;
  int nan_runs = 0;            // runs whose output had a NaN
  int finite_runs = 0;         // runs whose output was all finite
  // runs where the old poison had left the window (the plane sweep: and still sat in the plane)
  int left_runs = 0;
};

// Checks one output against the prediction and the reference; returns whether any was NaN.
inline bool check_output(const std::vector<float>& out, const std::vector<double>& ref, const Poison& p,
                         bool poison_read, const HeadShape& s, const std::string& where) {
  bool any_nan = false;
  const int hd = s.head_dim;
  for (int h = 0; h < s.n_heads; ++h) {
    double num = 0.0, den = 0.0;
    for (int d = 0; d < hd; ++d) {
      const std::size_t i = static_cast<std::size_t>(h) * hd + d;
      const bool want = predicted_nan(p, poison_read, s, h, d);
      EXPECT_FALSE(std::isinf(ref[i])) << where << ": reference Inf at head " << h << " dim " << d;
      EXPECT_EQ(std::isnan(ref[i]), want) << where << ": reference NaN pattern at head " << h << " dim " << d;
      EXPECT_FALSE(std::isinf(out[i])) << where << ": output Inf at head " << h << " dim " << d;
      if (std::isnan(out[i]) != want) {
        ADD_FAILURE() << where << ": output " << out[i] << " at head " << h << " dim " << d << ", policy says "
                      << (want ? "NaN" : "finite");
        return true;
      }
      any_nan = any_nan || want;
      if (!want) {
        const double e = static_cast<double>(out[i]) - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
      }
    }
    if (den > 0.0) {
      EXPECT_LT(std::sqrt(num / den), kNonfiniteTolerance) << where << ": head " << h;
    }
  }
  return any_nan;
}

// The whole sweep of one case for one runner. `counts`: the runner goes through attend_layer,
// whose range counters are checked. `values`: the poisons (default: all of poison_values()).
inline SweepTally run_nonfinite_sweep(const NonfiniteCase& c, const LayerRunner& run, bool counts,
                                      const std::vector<float>& values = poison_values()) {
  SweepTally tally;
  const HeadShape shape = make_shape(c.n_heads, c.cfg.n_kv_heads, c.cfg.head_dim);
  for (Site site : kSites) {
    for (std::size_t vi = 0; vi < values.size(); ++vi) {
      std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>{}(c.name) + 31 * static_cast<unsigned>(site) +
                                             static_cast<unsigned>(vi)));
      Poison poison;
      poison.site = site;
      poison.value = values[vi];
      const int span = site == Site::q ? c.n_heads * c.cfg.head_dim : c.cfg.n_kv_heads * c.cfg.head_dim;
      poison.index = std::uniform_int_distribution<int>(0, span - 1)(rng);
      const RangeStats one = [&] {
        RangeStats r;
        count_range(&poison.value, 1, r, c.cfg.kv_dtype);
        return r;
      }();

      HostPlane plane = HostPlane::create(c.cfg).value();
      std::size_t next_test = 0;
      for (int pos = 0; pos <= c.positions.back(); ++pos) {
        Token tok = random_token(shape, rng);
        const bool poison_now = site_is_old(site) ? pos == c.old_position : false;
        if (poison_now) place(poison, tok);
        if (pos == c.positions[next_test]) {
          ++next_test;
          Token cur = tok;
          if (!site_is_old(site)) place(poison, cur);
          const Token cur_ruled = ruled(cur, c.cfg.kv_dtype);
          const int start = logical_start(pos, c.cfg.window);
          const bool old_in_plane = site_is_old(site) && c.old_position < pos;
          const bool old_visible = old_in_plane && c.old_position >= start;
          const bool poison_read = site_is_old(site) ? old_visible : true;
          for (Route r : {Route::vec, Route::splitk, Route::interleaved, Route::staged}) {
            HostPlane copy = plane;
            const int slot = copy.append(pos).value();
            if (!route_applies_to(r, c.cfg, copy.state())) continue;
            const std::string where =
                fmt::format("{} pos {} route {} poison {} in {}[{}]", c.name, pos, route_name(r), poison.value,
                            site_name(site), poison.index);
            if (old_in_plane && !old_visible) {
              // Left the window: is the row still physically there (so a wrong read would show)?
              const int hd = c.cfg.head_dim;
              const std::int64_t at = copy.strides().offset(c.old_position % copy.state().capacity,
                                                            poison.index / hd) + poison.index % hd;
              const KvWord held = site_is_key(site) ? copy.k()[at] : copy.v()[at];
              if (held == kv_encode(poison.value, c.cfg.kv_dtype) && copy.state().physical(pos) != c.old_position % copy.state().capacity)
                ++tally.left_runs;
            }
            std::vector<float> out = nan_filled(cur.q.size());
            const RangeStats before = copy.range_stats();
            const LayerIO io{cur.q.data(), cur.k.data(), cur.v.data(), out.data()};
            const Status st = run(r, copy, pos, slot, shape, io);
            EXPECT_TRUE(st.ok()) << where << ": " << st.to_string();
            if (!st.ok()) continue;
            if (counts) {
              RangeStats call = copy.range_stats();
              call.saturated -= before.saturated;
              call.nonfinite -= before.nonfinite;
              EXPECT_EQ(call, site_is_old(site) ? RangeStats{} : one) << where << ": the call's range counters";
              // The history's counters: the old poison, once appended.
              EXPECT_EQ(before, site_is_old(site) && c.old_position < pos ? one : RangeStats{})
                  << where << ": the plane's range counters";
            }
            const std::vector<double> ref =
                reference_from(shape, cur_ruled.q, copy.state().len,
                               logical_rows(copy, pos, r == Route::interleaved ? &cur_ruled : nullptr));
            const bool any_nan = check_output(out, ref, poison, poison_read, shape, where);
            ++tally.runs;
            ++(any_nan ? tally.nan_runs : tally.finite_runs);
          }
        }
        // History keeps the token as appended; a current-row poison stays in the run's copy only.
        EXPECT_TRUE(plane.append_row(pos, tok.k.data(), tok.v.data()).ok());
      }
    }
  }
  return tally;
}

// ---- through the Engine --------------------------------------------------------------------

// Three SWA layers (window 32, slack 8) and one NoPE layer, GQA 4, head_dim 128.
inline Geometry nonfinite_engine_geometry() {
  Geometry g;
  g.name = "nonfinite";
  g.n_layers = 4;
  g.n_heads = 8;
  g.n_kv_heads = 2;
  g.head_dim = 128;
  g.window = 32;
  g.ring_slack = 8;
  g.max_context = 512;
  g.nope_period = 4;
  g.nope_phase = 3;
  return g;
}

// Raw activations of every token, kept so the reference can rebuild any layer's window.
struct EngineHistory {
  Geometry g;
  std::size_t qn, kvn;
  std::vector<std::vector<float>> q, k, v;  // [position][layer * qn or kvn + i]
  explicit EngineHistory(const Geometry& geo)
      : g(geo),
        qn(static_cast<std::size_t>(geo.n_heads) * geo.head_dim),
        kvn(static_cast<std::size_t>(geo.n_kv_heads) * geo.head_dim) {}
  void add(std::mt19937& rng) {
    q.push_back(random_values(g.n_layers * qn, rng));
    k.push_back(random_values(g.n_layers * kvn, rng));
    v.push_back(random_values(g.n_layers * kvn, rng));
  }
  // The f64 reference of one layer's output at `position`, over the values the kernels read:
  // the range rule, then rounding to the geometry's dtype for plane rows (not for the interleaved
  // current token).
  std::vector<double> reference(int position, int layer, Route route) const {
    const int visible = g.visible(g.layer_class(layer), position);
    const int first = position + 1 - visible;
    const std::size_t l = static_cast<std::size_t>(layer);
    const float range = kv_range_max(g.kv_dtype);
    std::vector<double> kr(visible * kvn), vr(visible * kvn), qd(qn), out(qn);
    for (int t = 0; t < visible; ++t) {
      const int p = first + t;
      const bool bypass = route == Route::interleaved && p == position;
      for (std::size_t e = 0; e < kvn; ++e) {
        const float kf = k[p][l * kvn + e], vf = v[p][l * kvn + e];
        kr[t * kvn + e] = bypass ? kv_range(kf, range) : kv_decode(kv_encode(kf, g.kv_dtype), g.kv_dtype);
        vr[t * kvn + e] = bypass ? kv_range(vf, range) : kv_decode(kv_encode(vf, g.kv_dtype), g.kv_dtype);
      }
    }
    for (std::size_t e = 0; e < qn; ++e) qd[e] = kv_range(q[position][l * qn + e], range);
    const HeadShape shape = make_shape(g.n_heads, g.n_kv_heads, g.head_dim);
    reference_attention(shape, qd.data(), kr.data(), vr.data(), visible, out.data());
    return out;
  }
};

// Teacher-forces 80 tokens through an engine with one poisoned value in layer `layer`'s q, k
// or v at position 20: every layer's output against the prediction and the reference, and the
// engine's range counters. SWA layers drop a poisoned K/V row once it leaves the window (at 52);
// the NoPE layer keeps it.
inline SweepTally run_engine_nonfinite(Device device, Site site, float value, int layer,
                                       KvDtype dtype = KvDtype::f16) {
  constexpr int kTokens = 80;
  constexpr int kPoisonAt = 20;
  SweepTally tally;
  Geometry g = nonfinite_engine_geometry();
  g.kv_dtype = dtype;
  EngineOptions opt;
  opt.device = device;
  opt.record_trace = true;
  Result<std::unique_ptr<Engine>> made = Engine::create(g, opt);
  EXPECT_TRUE(made.ok()) << made.status().to_string();
  if (!made) return tally;
  Engine& engine = **made;
  const HeadShape shape = make_shape(g.n_heads, g.n_kv_heads, g.head_dim);
  EngineHistory h(g);
  std::mt19937 rng(static_cast<unsigned>(1000 * layer + 7 * static_cast<int>(site)));
  Poison poison;
  poison.site = site;
  poison.value = value;
  const int span = static_cast<int>(site == Site::q ? h.qn : h.kvn);
  poison.index = std::uniform_int_distribution<int>(0, span - 1)(rng);
  RangeStats expected;
  for (int pos = 0; pos < kTokens; ++pos) {
    h.add(rng);
    if (pos == kPoisonAt) {
      std::vector<float>& x = site == Site::q ? h.q[pos] : site_is_key(site) ? h.k[pos] : h.v[pos];
      x[static_cast<std::size_t>(layer) * span + poison.index] = value;
      count_range(&value, 1, expected, dtype);
    }
    std::vector<float> out = nan_filled(g.n_layers * h.qn);
    engine.clear_trace();
    const Status st = engine.encode_token(pos, TokenIO{h.q[pos].data(), h.k[pos].data(), h.v[pos].data(), out.data()});
    EXPECT_TRUE(st.ok()) << "position " << pos << ": " << st.to_string();
    if (!st.ok()) return tally;
    for (int l = 0; l < g.n_layers; ++l) {
      const Route route = engine.trace().at(static_cast<std::size_t>(l)).decision.route;
      const int start = pos + 1 - g.visible(g.layer_class(l), pos);
      const bool read = l == layer && (site == Site::q ? pos == kPoisonAt : kPoisonAt <= pos && kPoisonAt >= start);
      const std::vector<float> lo(out.begin() + l * h.qn, out.begin() + (l + 1) * h.qn);
      const std::string where = fmt::format("{} engine pos {} layer {} route {} poison {} in {}", device_name(device),
                                            pos, l, route_name(route), value, site_name(site));
      const bool any_nan = check_output(lo, h.reference(pos, l, route), poison, read, shape, where);
      ++tally.runs;
      ++(any_nan ? tally.nan_runs : tally.finite_runs);
      if (l == layer && site != Site::q && kPoisonAt < start) ++tally.left_runs;  // left the window
    }
  }
  EXPECT_EQ(engine.range_stats(), expected) << "the engine's range counters";
  return tally;
}

}  // namespace ladder::test
