// E3 and P4, shared by the CPU suite (test_batch.cpp) and its GPU twin (tests/gpu/
// test_gpu_batch.cpp): one target sequence decoded alone and again inside calls with 1, 7 or 31
// other sequences, each filled to its own random depth first (so their planes are empty,
// filling, wrapped, grown: every plane state), every call decoding the whole batch. The target's
// outputs must be bit-identical across the runs, for each switch setting that steers the ladder
// onto a different route (all four are visited, the trace proves it), and the outputs are
// checked against the f64 reference (the target's every 7th token, every sequence's last) so
// "identical" cannot mean "identically wrong".
#pragma once

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "ladder/engine.hpp"
#include "ladder/fault_injection.hpp"
#include "ladder/hd.hpp"
#include "ladder/reference.hpp"

namespace ladder::test {

// P3's bound with f16 KV, as every engine test.
inline constexpr double kBatchRelTol = 2e-3;
// Every this many positions the target's outputs are checked against the f64 reference (the
// other sequences at their last step: their bits are not compared across runs).
inline constexpr int kBatchReferenceStride = 7;

// SWA window 64 in a 72-row ring (wraps twice in the target's 160 tokens), NoPE layers growing
// from 8 rows (interleaved below 32 rows, vec above); head_dim 128 so the GPU runs it too.
inline Geometry batch_geometry() {
  Geometry g;
  g.name = "batch-sweep";
  g.n_layers = 4;
  g.n_heads = 8;
  g.n_kv_heads = 2;
  g.head_dim = 128;
  g.window = 64;
  g.ring_slack = 8;
  g.max_context = 512;
  g.nope_period = 2;
  g.nope_phase = 1;
  return g;
}
inline constexpr int kBatchInitialGrowing = 8;

// The activations of token `position` of the sequence with key `key`: a pure function of both
// (a counter-based hash per element, so one layer's rows are cheap to rebuild for the
// reference), so a sequence gets the same inputs whichever engine or batch it is decoded in.
inline float token_value(std::uint64_t key, int position, int layer, int which, std::size_t index) {
  std::uint64_t x = key * 0x9E3779B97F4A7C15ull ^ (static_cast<std::uint64_t>(position) << 24) ^
                    (static_cast<std::uint64_t>(layer) << 12) ^ (static_cast<std::uint64_t>(which) << 8) ^
                    (static_cast<std::uint64_t>(index) << 32);
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<float>(static_cast<double>(x >> 40) / static_cast<double>(1ull << 24) * 2.0 - 1.0);
}
enum TokenPart : int { kPartQ = 0, kPartK = 1, kPartV = 2 };
inline void layer_values(const Geometry& g, std::uint64_t key, int position, int layer, int part, float* out) {
  const std::size_t n = static_cast<std::size_t>(part == kPartQ ? g.n_heads : g.n_kv_heads) * g.head_dim;
  for (std::size_t i = 0; i < n; ++i) out[i] = token_value(key, position, layer, part, i);
}
struct TokenData {
  std::vector<float> q, k, v;  // [n_layers][heads][head_dim]
};
inline TokenData token_data(const Geometry& g, std::uint64_t key, int position) {
  const std::size_t qn = static_cast<std::size_t>(g.n_heads) * g.head_dim;
  const std::size_t kvn = static_cast<std::size_t>(g.n_kv_heads) * g.head_dim;
  TokenData t;
  t.q.resize(qn * g.n_layers);
  t.k.resize(kvn * g.n_layers);
  t.v.resize(kvn * g.n_layers);
  for (int l = 0; l < g.n_layers; ++l) {
    layer_values(g, key, position, l, kPartQ, t.q.data() + l * qn);
    layer_values(g, key, position, l, kPartK, t.k.data() + l * kvn);
    layer_values(g, key, position, l, kPartV, t.v.data() + l * kvn);
  }
  return t;
}

// f64 reference of one layer's output for sequence `key` at `position` (f16-rounded K/V rows,
// the interleaved route's current row in f32).
inline double batch_reference_error(const Geometry& g, std::uint64_t key, int position, int layer, Route route,
                                    const float* out_layer) {
  const LayerClass cls = g.layer_class(layer);
  const int visible = g.visible(cls, position);
  const int first = position + 1 - visible;
  const std::size_t qn = static_cast<std::size_t>(g.n_heads) * g.head_dim;
  const std::size_t kvn = static_cast<std::size_t>(g.n_kv_heads) * g.head_dim;
  std::vector<double> kr(static_cast<std::size_t>(visible) * kvn), vr(kr.size()), ref(qn);
  std::vector<float> krow(kvn), vrow(kvn);
  for (int t = 0; t < visible; ++t) {
    layer_values(g, key, first + t, layer, kPartK, krow.data());
    layer_values(g, key, first + t, layer, kPartV, vrow.data());
    const bool raw = route == Route::interleaved && first + t == position;
    for (std::size_t e = 0; e < kvn; ++e) {
      const float kf = krow[e];
      const float vf = vrow[e];
      kr[static_cast<std::size_t>(t) * kvn + e] = raw ? kf : f16_to_f32(f32_to_f16(kf));
      vr[static_cast<std::size_t>(t) * kvn + e] = raw ? vf : f16_to_f32(f32_to_f16(vf));
    }
  }
  std::vector<float> qf(qn);
  layer_values(g, key, position, layer, kPartQ, qf.data());
  std::vector<double> qd(qf.begin(), qf.end());
  const HeadShape shape{g.n_heads, g.n_kv_heads, g.head_dim, g.scale()};
  reference_attention(shape, qd.data(), kr.data(), vr.data(), visible, ref.data());
  return relative_error(out_layer, ref.data(), qn);
}

struct BatchRun {
  std::vector<std::vector<float>> target_out;  // [step][n_layers * n_heads * head_dim]
  std::set<Route> routes;                      // every route the target's layers took
  double worst_error = 0.0;                    // every sequence, sampled positions
};

// How a run makes its engine (the GPU suite passes its own CUDA device options); empty:
// Engine::create.
using MakeEngine = std::function<Result<std::unique_ptr<Engine>>(const Geometry&, const EngineOptions&)>;
inline Result<std::unique_ptr<Engine>> make_engine(const MakeEngine& make, const Geometry& g, const EngineOptions& opt) {
  return make ? make(g, opt) : Engine::create(g, opt);
}

// The sweep's engine options on `device`: growing planes from kBatchInitialGrowing rows.
inline EngineOptions batch_options(Device device) {
  EngineOptions opt;
  opt.device = device;
  opt.initial_growing_capacity = kBatchInitialGrowing;
  return opt;
}

// Decodes `steps` tokens of the target (key 0, from position 0) in calls that also decode
// `others` sequences, each filled first to a random depth in [0, 300). Outputs poisoned before
// each call.
inline BatchRun run_batch(Device device, const Switches& sw, int others, int steps, unsigned seed,
                          const MakeEngine& make = {}) {
  const Geometry g = batch_geometry();
  EngineOptions opt = batch_options(device);
  opt.switches = sw;
  opt.record_trace = true;
  Result<std::unique_ptr<Engine>> made = make_engine(make, g, opt);
  EXPECT_TRUE(made.ok()) << made.status().to_string();
  if (!made) return {};
  Engine& e = **made;

  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> depth(0, 299);
  struct Seq {
    SequenceId id;
    std::uint64_t key;
    int next;
  };
  std::vector<Seq> seqs{{0, 0, 0}};
  for (int i = 0; i < others; ++i) {
    Result<SequenceId> id = e.add_sequence();
    EXPECT_TRUE(id.ok()) << id.status().to_string();
    if (!id) return {};
    seqs.push_back({*id, static_cast<std::uint64_t>(1000 + seed * 100 + i), 0});
  }
  // Fill the others to their depths, many sequences per call.
  std::vector<int> target_depth(seqs.size(), 0);
  for (std::size_t i = 1; i < seqs.size(); ++i) target_depth[i] = depth(rng);
  for (;;) {
    std::vector<SequenceToken> batch;
    std::vector<TokenData> data;
    data.reserve(seqs.size());
    for (std::size_t i = 1; i < seqs.size(); ++i) {
      if (seqs[i].next >= target_depth[i]) continue;
      data.push_back(token_data(g, seqs[i].key, seqs[i].next));
      batch.push_back({seqs[i].id, seqs[i].next, {nullptr, data.back().k.data(), data.back().v.data(), nullptr}});
    }
    if (batch.empty()) break;
    const Status s = e.fill(batch);
    EXPECT_TRUE(s.ok()) << s.to_string();
    if (!s.ok()) return {};
    for (std::size_t i = 1; i < seqs.size(); ++i)
      if (seqs[i].next < target_depth[i]) ++seqs[i].next;
  }

  const std::size_t out_n = static_cast<std::size_t>(g.n_layers) * g.n_heads * g.head_dim;
  const std::size_t qn = static_cast<std::size_t>(g.n_heads) * g.head_dim;
  BatchRun run;
  for (int step = 0; step < steps; ++step) {
    // The call's order is shuffled: P4 must not depend on where a sequence sits in it.
    std::vector<std::size_t> order(seqs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<TokenData> data(seqs.size());
    std::vector<std::vector<float>> outs(seqs.size(), std::vector<float>(out_n, std::nanf("")));
    std::vector<SequenceToken> batch;
    for (std::size_t i : order) {
      data[i] = token_data(g, seqs[i].key, seqs[i].next);
      batch.push_back({seqs[i].id, seqs[i].next, {data[i].q.data(), data[i].k.data(), data[i].v.data(), outs[i].data()}});
    }
    const std::size_t trace_before = e.trace().size();
    const Status s = e.encode(batch);
    EXPECT_TRUE(s.ok()) << s.to_string();
    if (!s.ok()) return {};
    std::map<std::pair<SequenceId, int>, Route> route_of;
    for (std::size_t t = trace_before; t < e.trace().size(); ++t)
      route_of[{e.trace()[t].sequence, e.trace()[t].layer}] = e.trace()[t].decision.route;
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      if (i == 0)
        for (int l = 0; l < g.n_layers; ++l) run.routes.insert(route_of.at({seqs[0].id, l}));
      const bool check = i == 0 ? seqs[i].next % kBatchReferenceStride == 0 || step == steps - 1 : step == steps - 1;
      if (check)
        for (int l = 0; l < g.n_layers; ++l)
          run.worst_error = std::max(run.worst_error,
                                     batch_reference_error(g, seqs[i].key, seqs[i].next, l, route_of.at({seqs[i].id, l}),
                                                           outs[i].data() + static_cast<std::size_t>(l) * qn));
      ++seqs[i].next;
    }
    run.target_out.push_back(std::move(outs[0]));
  }
  return run;
}

// E3's layer-by-layer form: `sequences` sequences (key i, filled first to depth 23 * i so their
// planes differ) decode `steps` tokens together, either whole (fill / encode) or one layer at a
// time (fill_layer / encode_layer for layers 0 .. n_layers - 1 of each token, each call holding
// that layer's activations only). Returns every output ([token][sequence][n_layers * n_heads *
// head_dim], poisoned before each call), the routes of each token in (sequence, layer) order,
// N1's counters and the worst error against the f64 reference.
struct LayeredRun {
  std::vector<std::vector<std::vector<float>>> out;
  std::vector<Route> routes;
  RangeStats counted;
  double worst_error = 0.0;
};
inline LayeredRun run_whole_or_layered(Device device, bool layered, int sequences, int steps,
                                       const MakeEngine& make = {}) {
  const Geometry g = batch_geometry();
  EngineOptions opt = batch_options(device);
  opt.record_trace = true;
  Result<std::unique_ptr<Engine>> made = make_engine(make, g, opt);
  EXPECT_TRUE(made.ok()) << made.status().to_string();
  LayeredRun run;
  if (!made) return run;
  Engine& e = **made;
  std::vector<SequenceId> ids{0};
  while (static_cast<int>(ids.size()) < sequences) ids.push_back(e.add_sequence().value());
  const std::size_t qn = static_cast<std::size_t>(g.n_heads) * g.head_dim;
  const std::size_t kvn = static_cast<std::size_t>(g.n_kv_heads) * g.head_dim;
  // One call (whole or per layer) over the listed sequences at their positions.
  const auto call = [&](const std::vector<int>& who, const std::vector<int>& pos, bool attend,
                        std::vector<std::vector<float>>* outs) {
    std::vector<TokenData> data;
    data.reserve(who.size());
    for (std::size_t j = 0; j < who.size(); ++j)
      data.push_back(token_data(g, static_cast<std::uint64_t>(who[j]), pos[j]));
    const int layer_calls = layered ? g.n_layers : 1;
    for (int lc = 0; lc < layer_calls; ++lc) {
      const std::size_t l = static_cast<std::size_t>(lc);
      std::vector<SequenceToken> batch;
      for (std::size_t j = 0; j < who.size(); ++j) {
        TokenIO io{data[j].q.data(), data[j].k.data(), data[j].v.data(), outs ? (*outs)[j].data() : nullptr};
        if (layered) io = TokenIO{io.q + l * qn, io.k + l * kvn, io.v + l * kvn, outs ? io.out + l * qn : nullptr};
        if (!attend) io.q = io.out = nullptr;
        batch.push_back({ids[static_cast<std::size_t>(who[j])], pos[j], io});
      }
      const Status s = !layered ? (attend ? e.encode(batch) : e.fill(batch))
                                : (attend ? e.encode_layer(lc, batch) : e.fill_layer(lc, batch));
      EXPECT_TRUE(s.ok()) << s.to_string();
      if (!s.ok()) return false;
    }
    return true;
  };
  std::vector<int> next(static_cast<std::size_t>(sequences), 0);
  for (int p = 0;; ++p) {
    std::vector<int> who, pos;
    for (int i = 0; i < sequences; ++i)
      if (p < 23 * i) {
        who.push_back(i);
        pos.push_back(p);
        ++next[static_cast<std::size_t>(i)];
      }
    if (who.empty()) break;
    if (!call(who, pos, false, nullptr)) return run;
  }
  for (int step = 0; step < steps; ++step) {
    std::vector<int> who, pos;
    for (int i = 0; i < sequences; ++i) {
      who.push_back(i);
      pos.push_back(next[static_cast<std::size_t>(i)]);
    }
    std::vector<std::vector<float>> outs(who.size(), std::vector<float>(g.n_layers * qn, std::nanf("")));
    const std::size_t trace_before = e.trace().size();
    if (!call(who, pos, true, &outs)) return run;
    std::map<std::pair<SequenceId, int>, Route> route_of;
    for (std::size_t t = trace_before; t < e.trace().size(); ++t)
      route_of[{e.trace()[t].sequence, e.trace()[t].layer}] = e.trace()[t].decision.route;
    for (const auto& [key, route] : route_of) run.routes.push_back(route);  // (sequence, layer) order
    if (step % kBatchReferenceStride == 0 || step == steps - 1)
      for (std::size_t j = 0; j < who.size(); ++j)
        for (int l = 0; l < g.n_layers; ++l)
          run.worst_error = std::max(run.worst_error, batch_reference_error(g, static_cast<std::uint64_t>(who[j]), pos[j], l,
                                                                            route_of.at({ids[j], l}),
                                                                            outs[j].data() + static_cast<std::size_t>(l) * qn));
    for (int i = 0; i < sequences; ++i) ++next[static_cast<std::size_t>(i)];
    run.out.push_back(std::move(outs));
  }
  run.counted = e.range_stats();
  return run;
}

// The first token at which two layered runs' outputs (any sequence) differ in any bit, or -1.
inline int first_difference(const LayeredRun& a, const LayeredRun& b) {
  if (a.out.size() != b.out.size()) return 0;
  for (std::size_t s = 0; s < a.out.size(); ++s) {
    if (a.out[s].size() != b.out[s].size()) return static_cast<int>(s);
    for (std::size_t j = 0; j < a.out[s].size(); ++j)
      if (std::memcmp(a.out[s][j].data(), b.out[s][j].data(), a.out[s][j].size() * sizeof(float)) != 0)
        return static_cast<int>(s);
  }
  return -1;
}

// The first step at which two runs' target outputs differ in any bit, or -1.
inline int first_difference(const BatchRun& a, const BatchRun& b) {
  if (a.target_out.size() != b.target_out.size()) return 0;
  for (std::size_t s = 0; s < a.target_out.size(); ++s)
    if (std::memcmp(a.target_out[s].data(), b.target_out[s].data(), a.target_out[s].size() * sizeof(float)) != 0)
      return static_cast<int>(s);
  return -1;
}

// The switch settings of the sweep and the routes they reach between them: the default ladder
// (vec, splitk, interleaved), serving-graph staging (staged), and vec switched off.
struct BatchSwitchCase {
  const char* name;
  Switches sw;
};
inline std::vector<BatchSwitchCase> batch_switch_cases() {
  Switches stage;
  stage.stage_wrapped_swa = true;
  Switches no_vec;
  no_vec.disable_vec = true;
  return {{"default", Switches{}}, {"staged", stage}, {"no_vec", no_vec}};
}

// Every sequence's plane state at every layer, in sequence order.
inline std::vector<std::vector<PlaneState>> all_states(const Engine& e) {
  std::vector<std::vector<PlaneState>> s;
  for (SequenceId id : e.sequences()) {
    s.emplace_back();
    for (int l = 0; l < e.geometry().n_layers; ++l) s.back().push_back(e.plane_state(id, l));
  }
  return s;
}

// A prompt's rows of one layer for one sequence, [count][n_kv_heads][head_dim] each for k and v
// (row r = token_data(key, first + r)'s layer-`layer` rows), for Engine::fill_layer_rows.
struct Prompt {
  std::vector<float> k, v;
  std::vector<int> slots;
  SequenceRows rows(SequenceId id, int count) {
    slots.assign(static_cast<std::size_t>(count), -1);
    return SequenceRows{id, count, k.data(), v.data(), Memory::host, slots.data()};
  }
};
inline Prompt prompt_rows(const Geometry& g, std::uint64_t key, int layer, int first, int count) {
  const std::size_t kvn = g.kv_floats_per_layer();
  Prompt p;
  for (int r = 0; r < count; ++r) {
    const TokenData d = token_data(g, key, first + r);
    p.k.insert(p.k.end(), d.k.begin() + static_cast<std::ptrdiff_t>(layer * kvn),
               d.k.begin() + static_cast<std::ptrdiff_t>((layer + 1) * kvn));
    p.v.insert(p.v.end(), d.v.begin() + static_cast<std::ptrdiff_t>(layer * kvn),
               d.v.begin() + static_cast<std::ptrdiff_t>((layer + 1) * kvn));
  }
  return p;
}

// Engine::fill_layer_rows against count fill_layer calls on two engines made by `make` (or
// Engine::create on `device`), prompts of 37, 0 and 100 rows (growing planes 8 -> 64 and 8 -> 128 rows,
// the ring wrapping): the same plane states, the same slots, and the same bits of the next
// decoded token of every sequence.
inline void check_prompt_rows_equal_one_call_per_row(Device device, const MakeEngine& make = {}) {
  const Geometry g = batch_geometry();
  const EngineOptions opt = batch_options(device);
  Result<std::unique_ptr<Engine>> made_a = make_engine(make, g, opt);
  Result<std::unique_ptr<Engine>> made_b = make_engine(make, g, opt);
  ASSERT_TRUE(made_a.ok() && made_b.ok()) << made_a.status().to_string() << made_b.status().to_string();
  Engine& rows_engine = **made_a;
  Engine& one_by_one = **made_b;
  const std::vector<int> counts{37, 0, 100};
  std::vector<SequenceId> ids{0};
  for (int i = 1; i < 3; ++i) {
    ids.push_back(rows_engine.add_sequence().value());
    ASSERT_EQ(one_by_one.add_sequence().value(), ids.back());
  }
  const std::size_t kvn = g.kv_floats_per_layer();
  for (int l = 0; l < g.n_layers; ++l) {
    std::vector<Prompt> prompts;
    for (std::size_t i = 0; i < ids.size(); ++i) prompts.push_back(prompt_rows(g, i, l, 0, counts[i]));
    std::vector<SequenceRows> call;
    for (std::size_t i = 0; i < ids.size(); ++i) call.push_back(prompts[i].rows(ids[i], counts[i]));
    const Status filled = rows_engine.fill_layer_rows(l, call);
    ASSERT_TRUE(filled.ok()) << "layer " << l << ": " << filled.to_string();
    for (int r = 0; r < *std::max_element(counts.begin(), counts.end()); ++r) {
      std::vector<SequenceToken> row;
      std::vector<std::size_t> in_row;
      for (std::size_t i = 0; i < ids.size(); ++i)
        if (r < counts[i]) {
          const std::size_t o = static_cast<std::size_t>(r) * kvn;
          row.push_back({ids[i], r, TokenIO{nullptr, prompts[i].k.data() + o, prompts[i].v.data() + o, nullptr}});
          in_row.push_back(i);
        }
      ASSERT_TRUE(one_by_one.fill_layer(l, row).ok()) << "layer " << l << " row " << r;
      for (std::size_t j = 0; j < in_row.size(); ++j)
        EXPECT_EQ(prompts[in_row[j]].slots[static_cast<std::size_t>(r)],
                  one_by_one.plane_state(ids[in_row[j]], l).physical(r))
            << "layer " << l << " sequence " << in_row[j] << " row " << r;
    }
  }
  EXPECT_EQ(all_states(rows_engine), all_states(one_by_one));
  // The next token of every sequence, on both engines: the same bits.
  std::vector<TokenData> data;
  std::vector<std::vector<float>> outs;
  for (std::size_t i = 0; i < 2 * ids.size(); ++i) {
    data.push_back(token_data(g, i % ids.size(), counts[i % ids.size()]));
    outs.emplace_back(static_cast<std::size_t>(g.n_layers) * g.n_heads * g.head_dim, std::nanf(""));
  }
  std::vector<SequenceToken> a, b;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const TokenData& d = data[i];
    a.push_back({ids[i], counts[i], {d.q.data(), d.k.data(), d.v.data(), outs[i].data()}});
    b.push_back({ids[i], counts[i], {d.q.data(), d.k.data(), d.v.data(), outs[ids.size() + i].data()}});
  }
  ASSERT_TRUE(rows_engine.encode(a).ok());
  ASSERT_TRUE(one_by_one.encode(b).ok());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_TRUE(std::all_of(outs[i].begin(), outs[i].end(), [](float x) { return std::isfinite(x); }));
    EXPECT_EQ(std::memcmp(outs[i].data(), outs[ids.size() + i].data(), outs[i].size() * sizeof(float)), 0)
        << "sequence " << i;
  }
}

// The all-or-nothing rule at the library's own allocation points (ladder/fault_injection.hpp) on
// `device`, engines made by `make` (or Engine::create): each point of a call armed in turn (n =
// 0, 1, ... until the call passes them all) makes the call fail with out_of_memory, leaving every
// plane state, the trace and the call's outputs (poisoned NaN) as they were; the same call then
// succeeds. Adding a sequence is tried the same way. 40 tokens of 3 sequences, every point of
// the calls at tokens 1, 8, 16 and 32 (the NoPE planes grow at 8, 16 and 32 from
// kBatchInitialGrowing rows): every token's outputs are bit for bit those of a twin engine no
// failure touched, so no failed call stored a row. Every device has at least one point in
// prepare() and one per plane of a new sequence; the trace's room is the engine's point. Where
// reserve() allocates (ReserveAllocates::yes: the CPU, which holds each step's prepared appends and
// allocates a growing plane's larger rows when it grows), a call of S sequences also has one
// point per sequence and one more per NoPE layer of each sequence that grows; the CUDA device
// allocates a growing plane's most rows when the sequence is made, so its reserve() has none.
enum class ReserveAllocates : bool { no, yes };
inline void check_allocation_points_fail_cleanly(Device device, ReserveAllocates reserve, const MakeEngine& make = {}) {
  constexpr long long kMostPoints = 1000;  // a bound on the loops, far above any call's points
  constexpr int kTokens = 40;
  const Geometry g = batch_geometry();
  EngineOptions opt = batch_options(device);
  opt.record_trace = true;
  Result<std::unique_ptr<Engine>> made_e = make_engine(make, g, opt);
  Result<std::unique_ptr<Engine>> made_t = make_engine(make, g, opt);
  ASSERT_TRUE(made_e.ok() && made_t.ok()) << made_e.status().to_string() << made_t.status().to_string();
  Engine& e = **made_e;
  Engine& twin = **made_t;
  ASSERT_TRUE(twin.add_sequence().ok());

  int add_failures = 0;
  for (long long n = 0;; ++n) {
    ASSERT_LT(n, kMostPoints);
    const std::vector<SequenceId> before = e.sequences();
    testing::fail_allocation_point(n);
    const Result<SequenceId> added = e.add_sequence();
    testing::fail_allocation_point(-1);
    if (added.ok()) {
      EXPECT_EQ(e.sequences().size(), before.size() + 1);
      break;
    }
    EXPECT_EQ(added.status().code(), ErrorCode::out_of_memory) << "point " << n << ": " << added.status().to_string();
    EXPECT_EQ(e.sequences(), before) << "a failed add leaves no sequence behind (point " << n << ")";
    ++add_failures;
  }
  EXPECT_GE(add_failures, g.n_layers) << "a point per plane of a new sequence";
  ASSERT_TRUE(e.add_sequence().ok() && twin.add_sequence().ok());
  const std::vector<SequenceId> ids = e.sequences();
  ASSERT_EQ(ids, twin.sequences());
  int nope_layers = 0;
  for (int l = 0; l < g.n_layers; ++l) nope_layers += g.layer_class(l) == LayerClass::nope;

  const std::size_t out_floats = static_cast<std::size_t>(g.n_layers) * g.n_heads * g.head_dim;
  for (int pos = 0; pos < kTokens; ++pos) {
    std::vector<TokenData> data;
    for (std::size_t i = 0; i < ids.size(); ++i) data.push_back(token_data(g, i, pos));
    std::vector<std::vector<float>> outs(ids.size(), std::vector<float>(out_floats, std::nanf(""))), twin_outs = outs;
    const auto call = [&](std::vector<std::vector<float>>& o) {
      std::vector<SequenceToken> c;
      for (std::size_t i = 0; i < ids.size(); ++i)
        c.push_back({ids[i], pos, {data[i].q.data(), data[i].k.data(), data[i].v.data(), o[i].data()}});
      return c;
    };
    const bool grows =
        pos == kBatchInitialGrowing || pos == 2 * kBatchInitialGrowing || pos == 4 * kBatchInitialGrowing;
    if (pos == 1 || grows) {
      long long failures = 0;
      for (long long n = 0;; ++n) {
        ASSERT_LT(n, kMostPoints) << "position " << pos;
        const auto states = all_states(e);
        const std::size_t trace = e.trace().size();
        std::vector<SequenceToken> c = call(outs);
        testing::fail_allocation_point(n);
        const Status s = e.encode(c);
        const long long passed = testing::allocation_points_passed();
        testing::fail_allocation_point(-1);
        if (s.ok()) {
          EXPECT_LE(passed, n) << "position " << pos << ": the call passed its armed point";
          break;
        }
        EXPECT_EQ(s.code(), ErrorCode::out_of_memory) << "position " << pos << ", point " << n << ": " << s.to_string();
        EXPECT_EQ(passed, n + 1) << "position " << pos << ": a call failed at a point it had not reached";
        EXPECT_EQ(all_states(e), states) << "position " << pos << ", point " << n;
        EXPECT_EQ(e.trace().size(), trace) << "position " << pos << ", point " << n;
        for (std::size_t i = 0; i < ids.size(); ++i)
          EXPECT_TRUE(std::all_of(outs[i].begin(), outs[i].end(), [](float x) { return std::isnan(x); }))
              << "position " << pos << ", point " << n << ": a failed call wrote sequence " << i << "'s output";
        ++failures;
      }
      const long long per_sequence = 1 + (grows ? nope_layers : 0);  // its reserve, each growing plane
      const long long least =
          2 + (reserve == ReserveAllocates::yes ? static_cast<long long>(ids.size()) * per_sequence : 0);
      EXPECT_GE(failures, least) << "position " << pos << ": fewer allocation points than the device promises";
    } else {
      std::vector<SequenceToken> c = call(outs);
      ASSERT_TRUE(e.encode(c).ok()) << "position " << pos;
    }
    std::vector<SequenceToken> tc = call(twin_outs);
    ASSERT_TRUE(twin.encode(tc).ok()) << "position " << pos;
    for (std::size_t i = 0; i < ids.size(); ++i)
      EXPECT_EQ(std::memcmp(outs[i].data(), twin_outs[i].data(), out_floats * sizeof(float)), 0)
          << "sequence " << i << " at position " << pos;
  }
  EXPECT_EQ(all_states(e), all_states(twin));
}

}  // namespace ladder::test
