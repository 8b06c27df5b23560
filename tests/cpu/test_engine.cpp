// E1 on the CPU: the engine teacher-forced over many positions on small geometries, every
// layer's output against the f64 reference, the route per layer as the predicates say, the
// trace, refusals that leave every plane untouched, and fill_token as a pure KV append.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <random>

#include "ladder/engine.hpp"
#include "ladder/reference.hpp"

namespace ladder {
namespace {

constexpr double kRelTol = 2e-3;  // SPEC P3

struct GeoSpec {
  const char* name;
  int layers, heads, kv_heads, head_dim, window, slack, max_context, nope_period, nope_phase;
  int initial_growing_capacity;
};

Geometry make_geometry(const GeoSpec& s) {
  Geometry g;
  g.name = s.name;
  g.n_layers = s.layers;
  g.n_heads = s.heads;
  g.n_kv_heads = s.kv_heads;
  g.head_dim = s.head_dim;
  g.window = s.window;
  g.ring_slack = s.slack;
  g.max_context = s.max_context;
  g.nope_period = s.nope_period;
  g.nope_phase = s.nope_phase;
  return g;
}

// Activations for a whole teacher-forced run, kept so the reference can rebuild any window.
struct History {
  const Geometry& g;
  int qn, kvn;
  std::vector<std::vector<float>> q, k, v;  // [position] -> [layer][...]
  std::mt19937 rng;
  explicit History(const Geometry& geo, unsigned seed)
      : g(geo), qn(geo.n_heads * geo.head_dim), kvn(geo.n_kv_heads * geo.head_dim), rng(seed) {}
  void add() {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const auto draw = [&](std::size_t n) {
      std::vector<float> x(n);
      for (float& e : x) e = u(rng);
      return x;
    };
    q.push_back(draw(static_cast<std::size_t>(g.n_layers) * qn));
    k.push_back(draw(static_cast<std::size_t>(g.n_layers) * kvn));
    v.push_back(draw(static_cast<std::size_t>(g.n_layers) * kvn));
  }
  double error(int position, int layer, Route route, const float* out) const {
    const LayerClass cls = g.layer_class(layer);
    const int visible = g.visible(cls, position);
    const int first = position + 1 - visible;
    std::vector<double> kr(static_cast<std::size_t>(visible) * kvn), vr(kr.size()), ref(qn);
    for (int t = 0; t < visible; ++t) {
      const int p = first + t;
      const bool raw = route == Route::interleaved && p == position;  // the f32 bypass
      for (int e = 0; e < kvn; ++e) {
        const float kf = k[p][static_cast<std::size_t>(layer) * kvn + e];
        const float vf = v[p][static_cast<std::size_t>(layer) * kvn + e];
        // The elements the plane holds: rounded once to the geometry's dtype.
        kr[static_cast<std::size_t>(t) * kvn + e] = raw ? kf : kv_decode(kv_encode(kf, g.kv_dtype), g.kv_dtype);
        vr[static_cast<std::size_t>(t) * kvn + e] = raw ? vf : kv_decode(kv_encode(vf, g.kv_dtype), g.kv_dtype);
      }
    }
    const float* qp = q[position].data() + static_cast<std::size_t>(layer) * qn;
    std::vector<double> qd(qp, qp + qn);
    const HeadShape shape{g.n_heads, g.n_kv_heads, g.head_dim, g.scale()};
    reference_attention(shape, qd.data(), kr.data(), vr.data(), visible, ref.data());
    return relative_error(out + static_cast<std::size_t>(layer) * qn, ref.data(), static_cast<std::size_t>(qn));
  }
  TokenIO io(int position, std::vector<float>& out) {
    out.assign(q[position].size(), std::numeric_limits<float>::quiet_NaN());  // poisoned
    return {q[position].data(), k[position].data(), v[position].data(), out.data()};
  }
};

std::unique_ptr<Engine> make_engine(const Geometry& g, EngineOptions opt) {
  opt.device = Device::cpu;
  Result<std::unique_ptr<Engine>> e = Engine::create(g, opt);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e ? std::move(e).value() : nullptr;
}

struct Case {
  GeoSpec geo;
  int positions;
  bool disable_vec, stage;
  const char* routes;  // the routes this case must take, and no others
  KvDtype dtype = KvDtype::f16;
};

// What the SPEC says a layer's trace holds after position p's append, evaluated here from the
// SPEC's text alone (K1-K3, R1-R2, G6), never through the library's functions, so that a wrong
// state, visible count, schedule or route in the engine shows up as a mismatch.
constexpr int kSpecBlockTokens = 32;       // G6 / R1: 32-row blocks
constexpr int kSpecMaxWorkgroups = 32;     // G6: nwg = min(blocks, 32)
constexpr int kSpecMaxWarps = 4;           // G6: nsg in 1, 2, 4
struct SpecStep {
  LayerClass cls;
  PlaneState state;
  int visible, blocks, nwg, nsg;
  bool vec_rows, swa_vec;
  Route route;
};

SpecStep spec_step(const Case& c, int layer, int p) {
  const GeoSpec& s = c.geo;
  SpecStep x{};
  x.cls = s.nope_period > 0 && layer % s.nope_period == s.nope_phase ? LayerClass::nope : LayerClass::swa;
  const bool swa = x.cls == LayerClass::swa;
  const int appended = p + 1;
  // K3: visible = min(position + 1, window), window 0 meaning position + 1 (NoPE: position + 1).
  x.visible = swa && s.window > 0 ? std::min(appended, s.window) : appended;
  // K1: a ring of window + slack rows (max_context + slack for window 0); len grows to the
  // window, then each append evicts the oldest row, advancing both origins by one.
  // K2: a growing plane never wraps; it doubles (capped at max_context) when an append finds it
  // full, starting from the engine's initial capacity.
  PlaneState& st = x.state;
  st.next_position = appended;
  if (swa) {
    // A window at or past max_context keeps max_context rows (geometry.hpp).
    const int keep = s.window > 0 && s.window < s.max_context ? s.window : s.max_context;
    st.capacity = keep + s.slack;
    st.len = std::min(appended, keep);
    st.origin_logical = appended - st.len;
    st.origin_physical = st.origin_logical % st.capacity;
  } else {
    int cap = std::min(s.initial_growing_capacity > 0 ? s.initial_growing_capacity : kDefaultGrowingCapacity,
                       s.max_context);
    while (cap < appended) cap = std::min(2 * cap, s.max_context);
    st.capacity = cap;
    st.len = appended;
  }
  // G6: blocks = ceil(visible / 32); nwg = min(blocks, 32); nsg doubles from 1 while
  // 2 * nwg * nsg * 32 < visible and nsg < 4, i.e. the first of 1, 2, 4 with 64 * nwg * nsg >= visible.
  x.blocks = (x.visible + kSpecBlockTokens - 1) / kSpecBlockTokens;
  x.nwg = std::min(x.blocks, kSpecMaxWorkgroups);
  x.nsg = 1;
  while (x.nsg < kSpecMaxWarps && 2 * kSpecBlockTokens * x.nwg * x.nsg < x.visible) x.nsg *= 2;
  // R1 with has_vec = !disable_vec and strict off; R2 (and the staging switch for wrapped rings).
  const bool has_vec = !c.disable_vec;
  x.vec_rows = has_vec && st.len > 0 && st.capacity >= kSpecBlockTokens && (st.origin_physical == 0 || st.len == st.capacity);
  x.swa_vec = x.vec_rows && st.len % kSpecBlockTokens == 0;
  const bool stage = swa && c.stage && has_vec && st.len > 0 && st.capacity >= kSpecBlockTokens && st.origin_physical != 0;
  if (swa) {
    x.route = stage ? Route::staged : (x.swa_vec ? Route::vec : Route::splitk);
  } else {
    x.route = x.vec_rows ? Route::vec : Route::interleaved;
  }
  return x;
}

class EngineTeacherForced : public ::testing::TestWithParam<Case> {};

TEST_P(EngineTeacherForced, EveryLayerMatchesTheReferenceAndTheLadder) {
  const Case& c = GetParam();
  Geometry g = make_geometry(c.geo);
  g.kv_dtype = c.dtype;
  ASSERT_TRUE(g.validate().ok()) << g.validate().to_string();
  EngineOptions opt;
  opt.record_trace = true;
  opt.switches.disable_vec = c.disable_vec;
  opt.switches.stage_wrapped_swa = c.stage;
  opt.initial_growing_capacity = c.geo.initial_growing_capacity;
  auto engine = make_engine(g, opt);
  ASSERT_NE(engine, nullptr);
  History h(g, 1234u + static_cast<unsigned>(c.positions));
  std::array<int, kRouteCount> mix{};
  std::vector<float> out;
  for (int p = 0; p < c.positions; ++p) {
    h.add();
    engine->clear_trace();
    ASSERT_TRUE(engine->encode_token(p, h.io(p, out)).ok()) << "position " << p;
    const std::vector<TraceEntry>& tr = engine->trace();
    ASSERT_EQ(static_cast<int>(tr.size()), g.n_layers);
    for (int layer = 0; layer < g.n_layers; ++layer) {
      const TraceEntry& e = tr[static_cast<std::size_t>(layer)];
      const SpecStep x = spec_step(c, layer, p);
      // The trace against the SPEC's rules evaluated independently (spec_step below).
      EXPECT_EQ(e.position, p);
      EXPECT_EQ(e.layer, layer);
      EXPECT_EQ(e.cls, x.cls);
      EXPECT_EQ(e.state, x.state) << "position " << p << " layer " << layer;
      EXPECT_EQ(engine->plane_state(layer), x.state);
      EXPECT_EQ(e.visible, x.visible);
      EXPECT_EQ(e.schedule.blocks, x.blocks);
      EXPECT_EQ(e.schedule.nwg, x.nwg);
      EXPECT_EQ(e.schedule.nsg, x.nsg);
      EXPECT_EQ(e.decision.pred.vec_rows, x.vec_rows);
      EXPECT_EQ(e.decision.pred.swa_vec, x.swa_vec);
      const Route r = e.decision.route;
      EXPECT_EQ(r, x.route) << "position " << p << " layer " << layer << ": " << route_name(r) << " vs "
                            << route_name(x.route);
      ++mix[static_cast<std::size_t>(r)];
      const double err = h.error(p, layer, r, out.data());
      EXPECT_LT(err, kRelTol) << "position " << p << " layer " << layer << " route " << route_name(r);
    }
  }
  // Each case is built to reach a known set of routes: exactly those occur.
  for (int r = 0; r < kRouteCount; ++r) {
    const bool expected = std::string(c.routes).find(route_name(static_cast<Route>(r))) != std::string::npos;
    EXPECT_EQ(mix[static_cast<std::size_t>(r)] > 0, expected) << route_name(static_cast<Route>(r));
  }
}

// Name, layers, heads, kv_heads, head_dim, window, slack, max_context, nope period, phase,
// initial growing capacity.
INSTANTIATE_TEST_SUITE_P(
    Sweep, EngineTeacherForced,
    ::testing::Values(
        // A full ring once wrapped: SWA vec whenever len % 32 == 0, NoPE vec from the start.
        Case{{"full-ring", 4, 4, 2, 32, 64, 0, 512, 4, 3, 0}, 150, false, false, "vec splitk"},
        // Slack: partially wrapped rings (splitk); a growing plane that starts under 32 rows
        // takes interleaved until it grows.
        Case{{"slack", 4, 4, 2, 32, 48, 8, 512, 4, 3, 8}, 130, false, false, "vec splitk interleaved"},
        // Capacity under 32 never takes vec; GQA 8:1; odd head_dim multiple of 4.
        Case{{"tiny-ring", 3, 8, 1, 12, 20, 0, 256, 3, 1, 0}, 70, false, false, "vec splitk"},
        // The fallbacks, with the vec family switched off.
        Case{{"no-vec", 4, 6, 3, 24, 40, 3, 512, 2, 1, 0}, 100, true, false, "splitk interleaved"},
        // Serving-graph staging of wrapped rings; GQA 6:2.
        Case{{"staged", 4, 6, 2, 16, 33, 5, 512, 4, 0, 0}, 110, false, true, "vec splitk staged"},
        // No NoPE layers; window 0 (unbounded ring).
        Case{{"unbounded", 2, 2, 2, 8, 0, 0, 96, 0, 0, 0}, 96, false, false, "vec splitk"},
        // A window past the max context: the ring holds max_context (+ slack) rows, never wraps.
        Case{{"window-past-context", 3, 4, 2, 16, 500, 2, 100, 3, 2, 0}, 100, false, false, "vec splitk"},
        // bf16 planes through the same engine: every route, against the reference of the
        // stored bf16 elements.
        Case{{"slack-bf16", 4, 4, 2, 32, 48, 8, 512, 4, 3, 8}, 130, false, false, "vec splitk interleaved",
             KvDtype::bf16},
        Case{{"staged-bf16", 4, 6, 2, 16, 33, 5, 512, 4, 0, 0}, 110, false, true, "vec splitk staged", KvDtype::bf16}),
    [](const ::testing::TestParamInfo<Case>& i) {
      std::string n = i.param.geo.name;
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

// Schedules past one warp per workgroup, states and routes at depth 2048-4097, against a table
// worked out by hand from the SPEC (G6: 2 * nwg * nsg * 32 < visible doubles nsg). One SWA
// layer with an unbounded window (a ring of max_context rows) and one NoPE layer whose growing
// plane starts at 4096 rows (kDefaultGrowingCapacity) and grows to the 4200-row max context.
TEST(Engine, TraceMatchesAHandDerivedTable) {
  const Geometry g = make_geometry({"deep", 2, 2, 1, 8, 0, 0, 4200, 2, 1, 0});
  EngineOptions opt;
  opt.record_trace = true;
  auto engine = make_engine(g, opt);
  ASSERT_NE(engine, nullptr);
  struct Row {
    int position, layer;
    const char* route;
    int capacity, len, visible, blocks, nwg, nsg;
  };
  const Row table[] = {
      // visible 2048 = 64 blocks: 2*32*1*32 = 2048 is not < 2048, so nsg stays 1.
      {2047, 0, "vec", 4200, 2048, 2048, 64, 32, 1},
      {2047, 1, "vec", 4096, 2048, 2048, 64, 32, 1},
      // visible 2049: 65 blocks, 2048 < 2049 -> nsg 2; the ring's len 2049 is ragged -> splitk.
      {2048, 0, "splitk", 4200, 2049, 2049, 65, 32, 2},
      {2048, 1, "vec", 4096, 2049, 2049, 65, 32, 2},
      // visible 4096: 128 blocks, 2*32*2*32 = 4096 is not < 4096 -> nsg 2; the growing plane is full.
      {4095, 0, "vec", 4200, 4096, 4096, 128, 32, 2},
      {4095, 1, "vec", 4096, 4096, 4096, 128, 32, 2},
      // visible 4097: 129 blocks, nsg 4; the growing plane doubled, capped at 4200.
      {4096, 0, "splitk", 4200, 4097, 4097, 129, 32, 4},
      {4096, 1, "vec", 4200, 4097, 4097, 129, 32, 4},
  };
  History h(g, 21u);
  std::vector<float> out;
  for (int p = 0; p <= table[std::size(table) - 1].position; ++p) {
    h.add();
    const bool decode = std::any_of(std::begin(table), std::end(table), [&](const Row& r) { return r.position == p; });
    if (!decode) {
      ASSERT_TRUE(engine->fill_token(p, {nullptr, h.k[p].data(), h.v[p].data(), nullptr}).ok()) << p;
      continue;
    }
    engine->clear_trace();
    ASSERT_TRUE(engine->encode_token(p, h.io(p, out)).ok()) << p;
    for (const Row& r : table) {
      if (r.position != p) continue;
      const TraceEntry& e = engine->trace()[static_cast<std::size_t>(r.layer)];
      SCOPED_TRACE(::testing::Message() << "position " << p << " layer " << r.layer);
      EXPECT_STREQ(route_name(e.decision.route), r.route);
      EXPECT_EQ(e.state.capacity, r.capacity);
      EXPECT_EQ(e.state.len, r.len);
      EXPECT_EQ(e.state.origin_logical, 0);
      EXPECT_EQ(e.state.origin_physical, 0);
      EXPECT_EQ(e.visible, r.visible);
      EXPECT_EQ(e.schedule.blocks, r.blocks);
      EXPECT_EQ(e.schedule.nwg, r.nwg);
      EXPECT_EQ(e.schedule.nsg, r.nsg);
      EXPECT_LT(h.error(p, r.layer, e.decision.route, out.data()), kRelTol);
    }
  }
}

Geometry small_geometry() {
  return make_geometry({"small", 4, 4, 2, 16, 40, 4, 64, 4, 3, 0});
}

TEST(Engine, RefusedPositionsLeaveEveryPlaneUntouched) {
  const Geometry g = small_geometry();
  auto engine = make_engine(g, EngineOptions{});
  ASSERT_NE(engine, nullptr);
  History h(g, 7u);
  std::vector<float> out;
  for (int p = 0; p < 45; ++p) {
    h.add();
    ASSERT_TRUE(engine->encode_token(p, h.io(p, out)).ok());
  }
  h.add();
  const auto states = [&] {
    std::vector<PlaneState> s;
    for (int l = 0; l < g.n_layers; ++l) s.push_back(engine->plane_state(l));
    return s;
  };
  const std::vector<PlaneState> before = states();
  for (int bad : {44, 46, 0, 100, -1}) {
    const Status st = engine->encode_token(bad, h.io(45, out));
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_EQ(states(), before) << bad;
    const Status fs = engine->fill_token(bad, h.io(45, out));
    EXPECT_FALSE(fs.ok()) << bad;
    EXPECT_EQ(states(), before) << bad;
  }
  EXPECT_EQ(engine->encode_token(44, h.io(45, out)).code(), ErrorCode::out_of_order);
  EXPECT_EQ(engine->encode_token(100, h.io(45, out)).code(), ErrorCode::out_of_range);
  EXPECT_NE(engine->encode_token(44, h.io(45, out)).message().find("layer 0"), std::string::npos);
  // Null buffers are refused before anything is appended.
  TokenIO null_q = h.io(45, out);
  null_q.q = nullptr;
  EXPECT_EQ(engine->encode_token(45, null_q).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(states(), before);
  // The next valid position still decodes correctly after the refusals.
  ASSERT_TRUE(engine->encode_token(45, h.io(45, out)).ok());
  for (int l = 0; l < g.n_layers; ++l) {
    const Route r = choose_route(g.layer_class(l), engine->plane_state(l), Capabilities{}, Switches{}).route;
    EXPECT_LT(h.error(45, l, r, out.data()), kRelTol) << l;
  }
  // Up to the max context, and not one past it.
  for (int p = 46; p < g.max_context; ++p) {
    h.add();
    ASSERT_TRUE(engine->encode_token(p, h.io(p, out)).ok()) << p;
  }
  const std::vector<PlaneState> full = states();
  h.add();
  EXPECT_EQ(engine->encode_token(g.max_context, h.io(g.max_context, out)).code(), ErrorCode::out_of_range);
  EXPECT_EQ(states(), full);
}

TEST(Engine, FillTokenIsAPureKvAppend) {
  const Geometry g = make_geometry({"fill", 4, 4, 2, 32, 64, 7, 512, 4, 3, 16});
  EngineOptions opt;
  opt.initial_growing_capacity = 16;
  opt.record_trace = true;
  auto forced = make_engine(g, opt);
  auto filled = make_engine(g, opt);
  ASSERT_NE(forced, nullptr);
  ASSERT_NE(filled, nullptr);
  History h(g, 99u);
  constexpr int kDepth = 150, kDecode = 12;
  std::vector<float> out_a, out_b;
  for (int p = 0; p < kDepth; ++p) {
    h.add();
    ASSERT_TRUE(forced->encode_token(p, h.io(p, out_a)).ok());
    TokenIO kv_only{nullptr, h.k[p].data(), h.v[p].data(), nullptr};
    ASSERT_TRUE(filled->fill_token(p, kv_only).ok());
    for (int l = 0; l < g.n_layers; ++l) ASSERT_EQ(forced->plane_state(l), filled->plane_state(l));
  }
  EXPECT_EQ(filled->trace().size(), 0u) << "fill_token records no trace";
  for (int p = kDepth; p < kDepth + kDecode; ++p) {
    h.add();
    ASSERT_TRUE(forced->encode_token(p, h.io(p, out_a)).ok());
    ASSERT_TRUE(filled->encode_token(p, h.io(p, out_b)).ok());
    for (std::size_t i = 0; i < out_a.size(); ++i) ASSERT_EQ(ulp_distance(out_a[i], out_b[i]), 0) << p << " " << i;
  }
  TokenIO no_kv{};
  EXPECT_EQ(filled->fill_token(kDepth + kDecode, no_kv).code(), ErrorCode::invalid_argument);
}

TEST(Engine, RepeatedRunsAreBitIdentical) {
  const Geometry g = make_geometry({"repeat", 4, 8, 2, 32, 96, 5, 512, 4, 3, 0});
  EngineOptions opt;
  auto a = make_engine(g, opt);
  auto b = make_engine(g, opt);
  History h(g, 5u);
  std::vector<float> oa, ob;
  for (int p = 0; p < 140; ++p) {
    h.add();
    ASSERT_TRUE(a->encode_token(p, h.io(p, oa)).ok());
    ASSERT_TRUE(b->encode_token(p, h.io(p, ob)).ok());
    for (std::size_t i = 0; i < oa.size(); ++i) ASSERT_EQ(ulp_distance(oa[i], ob[i]), 0);
  }
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(Engine, EnvironmentSwitchesAreHonoured) {
  const Geometry g = make_geometry({"env", 4, 4, 2, 16, 32, 0, 256, 4, 3, 0});
  History h(g, 3u);
  std::vector<float> out;
  for (int p = 0; p < 40; ++p) h.add();
  const auto routes_with = [&](EngineOptions opt) {
    opt.record_trace = true;
    auto e = make_engine(g, opt);
    std::array<int, kRouteCount> mix{};
    for (int p = 0; p < 40; ++p) {
      EXPECT_TRUE(e->encode_token(p, h.io(p, out)).ok());
    }
    for (const TraceEntry& t : e->trace()) ++mix[static_cast<std::size_t>(t.decision.route)];
    return mix;
  };
  const auto plain = routes_with(EngineOptions{});
  EXPECT_GT(plain[static_cast<std::size_t>(Route::vec)], 0);
  {
    ScopedEnv env("LADDER_DISABLE_VEC", "1");
    const auto off = routes_with(EngineOptions{});
    EXPECT_EQ(off[static_cast<std::size_t>(Route::vec)], 0);
    EXPECT_GT(off[static_cast<std::size_t>(Route::interleaved)], 0);
  }
  // Strict takes vec rows even without the capability (the chapter's cross-vendor switch).
  EngineOptions no_cap;
  no_cap.caps.has_vec = false;
  EXPECT_EQ(routes_with(no_cap)[static_cast<std::size_t>(Route::vec)], 0);
  {
    ScopedEnv env("LADDER_STRICT_ATTENTION", "1");
    EXPECT_GT(routes_with(no_cap)[static_cast<std::size_t>(Route::vec)], 0);
  }
}

TEST(Engine, TraceIsOffUnlessAskedAndClears) {
  const Geometry g = small_geometry();
  History h(g, 11u);
  std::vector<float> out;
  h.add();
  auto quiet = make_engine(g, EngineOptions{});
  ASSERT_TRUE(quiet->encode_token(0, h.io(0, out)).ok());
  EXPECT_TRUE(quiet->trace().empty());
  EngineOptions opt;
  opt.record_trace = true;
  auto loud = make_engine(g, opt);
  ASSERT_TRUE(loud->encode_token(0, h.io(0, out)).ok());
  EXPECT_EQ(static_cast<int>(loud->trace().size()), g.n_layers);
  loud->clear_trace();
  EXPECT_TRUE(loud->trace().empty());
}

TEST(Engine, CreationErrorsAreValues) {
  Geometry bad = small_geometry();
  bad.n_kv_heads = 3;  // 4 heads do not group over 3 KV heads
  Result<std::unique_ptr<Engine>> e = Engine::create(bad, EngineOptions{});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::invalid_argument);
  EXPECT_NE(e.status().message().find("multiple"), std::string::npos);
  EngineOptions neg;
  neg.initial_growing_capacity = -1;
  EXPECT_EQ(Engine::create(small_geometry(), neg).status().code(), ErrorCode::invalid_argument);
  if (!cuda_available()) {
    EngineOptions gpu;
    gpu.device = Device::cuda;
    EXPECT_EQ(Engine::create(small_geometry(), gpu).status().code(), ErrorCode::no_device);
  }
  EngineOptions cpu;
  auto ok = Engine::create(small_geometry(), cpu);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)->device(), Device::cpu);
  EXPECT_STREQ(device_name((*ok)->device()), "cpu");
  EXPECT_NE((*ok)->device_description().find("cpu"), std::string::npos);
  EXPECT_EQ((*ok)->geometry().n_layers, 4);
}

}  // namespace
}  // namespace ladder
