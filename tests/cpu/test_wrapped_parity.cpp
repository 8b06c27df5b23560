// P2, P6 and P7 on both CPU producers (fast and the exact twin) and both KV dtypes: a wrapped
// ring gives the bits of the same logical tokens read unwrapped, on every route that reads them
// from a plane row (staged, splitk, and vec on a full wrapped ring, which reads the window as two
// physical spans in logical order), and all of them meet the f64 reference.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "cpu_twin_helpers.hpp"

namespace ladder {
namespace {

using test::Token;

constexpr double kSpecTolerance = 2e-3;  // P3
// The reference reads the very stored rows the kernels read, so what is left is f32
// accumulation over at most 2048 tokens; test_cpu_routes.cpp measured 2.3e-7 over its sweep and
// holds the same 1e-5, which an addressing or ordering bug would exceed.
constexpr double kTightTolerance = 1e-5;
constexpr int kMuseHeads = 32;
constexpr int kMuseKvHeads = 2;
constexpr int kMuseHeadDim = 128;
constexpr int kMaxContext = 1 << 20;

struct WrapCase {
  const char* name;
  int window;
  int capacity;
  int position;
};

// Each case on f16 and on bf16 planes.
template <std::size_t N>
std::vector<std::pair<WrapCase, KvDtype>> wrap_runs(const WrapCase (&cases)[N]) {
  std::vector<std::pair<WrapCase, KvDtype>> runs;
  for (KvDtype dt : test::kAllDtypes)
    for (const WrapCase& c : cases) runs.emplace_back(c, dt);
  return runs;
}

// P2 and P6 (both KV dtypes): on a wrapped ring, partially or fully, staged (G5) and splitk
// (logical-order reduction) both give the bits vec gives over the same logical tokens written
// unwrapped, because all three walk the window in logical order through one DAG. Where the
// window is ragged (len % 32 != 0) a token-major ring cannot take vec, so the unwrapped twin is
// a growing (head-major, padded) plane.
TEST(WrappedParity, StagedAndSplitkMatchUnwrappedVec) {
  const WrapCase cases[] = {
      {"full wrapped, aligned", 256, 256, 1000},
      {"partially wrapped, aligned", 256, 280, 1000},
      {"partially wrapped, ragged", 100, 110, 777},
      {"full wrapped, ragged", 45, 45, 300},
      {"muse window, full wrapped", 2048, 2048, 2100},
  };
  const HeadShape shape = test::make_shape(kMuseHeads, kMuseKvHeads, kMuseHeadDim);
  std::mt19937 rng(23);
  for (const auto& [c, dt] : wrap_runs(cases)) {
    SCOPED_TRACE(fmt::format("{} / {}", c.name, kv_dtype_name(dt)));
    const PlaneConfig ring = test::ring_config(kMuseKvHeads, kMuseHeadDim, c.window, c.capacity, kMaxContext, dt);
    test::History h;
    const HostPlane plane = test::build_with_history(ring, c.position, rng, h);
    const Token tok = test::random_token(shape, rng);
    for (cpu::CpuProducer producer : test::kAllProducers) {
      SCOPED_TRACE(fmt::format("producer {}", cpu::cpu_producer_name(producer)));
      const test::ProducerScope scope(producer);
      const test::RouteRun staged = test::run_on_copy(Route::staged, plane, c.position, shape, tok);
      const test::RouteRun splitk = test::run_on_copy(Route::splitk, plane, c.position, shape, tok);
      ASSERT_TRUE(staged.status.ok()) << staged.status.to_string();
      ASSERT_TRUE(splitk.status.ok()) << splitk.status.to_string();
      ASSERT_NE(staged.plane.state().origin_physical, 0) << "the case must wrap";

      const int visible = staged.plane.state().len;
      const int first = c.position + 1 - visible;
      const bool aligned = visible % kBlockTokens == 0;
      const PlaneConfig twin_cfg = aligned ? ring
                                           : test::growing_config(kMuseKvHeads, kMuseHeadDim, visible, visible, dt);
      const HostPlane twin = test::unwrapped_copy(twin_cfg, h, first, visible);
      const test::RouteRun vec = test::run_on_copy(Route::vec, twin, visible - 1, shape, tok);
      ASSERT_TRUE(vec.status.ok()) << vec.status.to_string();
      ASSERT_EQ(vec.plane.state().origin_physical, 0);
      EXPECT_TRUE(test::same_bits(staged.out, vec.out)) << "P2: staged differs from unwrapped vec";
      EXPECT_TRUE(test::same_bits(splitk.out, vec.out)) << "P6: splitk differs from unwrapped vec";
    }
  }
}

// The NaN word of a dtype: the pad scratch is filled with it before a run, so a pad row that is
// read but not written would turn the output into NaN.
KvWord nan_word(KvDtype dt) { return kv_encode(std::numeric_limits<float>::quiet_NaN(), dt); }

// vec over a head-major plane that holds the window [first, first + visible) wrapped at physical
// slot `origin`, the newest row being `tok`'s. No plane of the engine is like that (a growing
// plane never wraps), so it is assembled at the producer's boundary with the vec route's own
// helpers (logical_window, pad_copy, copy_rows) and the run_route scratch rules: the ragged tail is
// the window's last visible % 32 logical tokens, which straddle the physical end when origin is
// near it. Output poisoned (NaN) before the run.
std::vector<float> head_major_wrapped_vec(const HeadShape& shape, KvDtype dt, const test::History& h, int first,
                                          int visible, int origin, const Token& tok, bool fast) {
  const test::WrappedRows wrapped = test::head_major_wrapped(
      test::growing_config(shape.n_kv_heads, shape.head_dim, visible, visible, dt), h, first, visible, origin, tok);
  const HostPlane& rows = wrapped.rows;
  const PlaneState& st = wrapped.state;
  cpu::Workspace ws;
  ws.reserve(cpu::route_scratch_needs(Route::vec, shape, visible, fast));
  std::fill(ws.pad.begin(), ws.pad.end(), nan_word(dt));
  std::vector<float> out = test::nan_filled(tok.q.size());

  cpu::LayerWork w;
  w.route = Route::vec;
  w.fast = fast;
  ProducerParams& p = w.params;
  p.family = KernelFamily::vec;
  p.shape = shape;
  p.kv_dtype = dt;
  p.visible = visible;
  p.sched = pinned_schedule(visible);
  p.q = tok.q.data();
  p.partials = ws.partials.data();
  p.rows = logical_window(rows.k(), rows.v(), rows.strides(), st, st.origin_logical);
  p.tail_first = visible;
  const RowCopyParams pad = pad_copy(p.rows, PlaneKind::growing, visible, shape, ws.pad.data(),
                                     ws.pad.data() + ws.pad.size() / 2);
  EXPECT_EQ(pad.rows > 0, visible % kBlockTokens != 0) << "a ragged head-major window pads, an aligned one does not";
  if (pad.rows > 0) {
    EXPECT_TRUE(cpu::copy_rows(pad).ok());
    p.tail = copied_rows(pad);
    p.tail_first = pad.first;
  }
  w.reduce.shape = shape;
  w.reduce.groups = fast ? cpu::fast_schedule(visible).splits : p.sched.nwg;
  w.reduce.partials = ws.partials.data();
  w.reduce.out = out.data();
  EXPECT_TRUE(cpu::run_layers(std::span<const cpu::LayerWork>(&w, 1)).ok());
  return out;
}

struct FullRingRun {
  const char* id;
  std::vector<float> out;
};

// P7: on a full ring wrapped at every kind of origin (0, 1, 31, 32, capacity - 1: a 32-token block
// straddling the physical end or not), vec/ring-wrapped, splitk/ring-wrapped, staged/ring-wrapped,
// vec and splitk on the same tokens unwrapped, vec on a growing (head-major) plane and vec on a
// head-major plane wrapped at the same origin give one set of bits per producer, within P3 of the
// f64 reference. Capacities 45 and 100 are not multiples of 32: a token-major ring cannot pad, so
// vec refuses the ring there (R1, kept) and the head-major planes carry the comparison, their
// ragged tail padded.
TEST(WrappedParity, FullRingEveryRouteSameBitsSweep) {
  const int capacities[] = {32, 45, 96, 100, 2048};
  const HeadShape shape = test::make_shape(kMuseHeads, kMuseKvHeads, kMuseHeadDim);
  std::mt19937 rng(29);
  int compared = 0;
  double worst = 0.0;
  for (KvDtype dt : test::kAllDtypes) {
    for (int cap : capacities) {
      std::vector<int> origins;
      for (int o : {0, 1, 31, 32, cap - 1})
        if (o < cap && std::find(origins.begin(), origins.end(), o) == origins.end()) origins.push_back(o);
      for (int origin : origins) {
        SCOPED_TRACE(fmt::format("{} capacity {} origin {}", kv_dtype_name(dt), cap, origin));
        const int position = test::full_ring_position(cap, origin);
        const PlaneConfig ring = test::ring_config(kMuseKvHeads, kMuseHeadDim, cap, cap, kMaxContext, dt);
        test::History h;
        const HostPlane plane = test::build_with_history(ring, position, rng, h);
        const Token tok = test::random_token(shape, rng);
        const int first = position + 1 - cap;
        const bool vec_ring = cap % kBlockTokens == 0;
        const HostPlane ring_twin = test::unwrapped_copy(ring, h, first, cap);
        const HostPlane growing_twin =
            test::unwrapped_copy(test::growing_config(kMuseKvHeads, kMuseHeadDim, cap, cap, dt), h, first, cap);
        for (cpu::CpuProducer producer : test::kAllProducers) {
          SCOPED_TRACE(fmt::format("producer {}", cpu::cpu_producer_name(producer)));
          const test::ProducerScope scope(producer);
          const test::RouteRun splitk = test::run_on_copy(Route::splitk, plane, position, shape, tok);
          ASSERT_TRUE(splitk.status.ok()) << splitk.status.to_string();
          const PlaneState& st = splitk.plane.state();
          ASSERT_EQ(st.len, cap);
          ASSERT_EQ(st.origin_physical, origin) << "the case must put the window's oldest token at `origin`";

          std::vector<FullRingRun> runs;
          const auto route_run = [&](const char* id, Route r, const HostPlane& before, int at) {
            test::RouteRun run = test::run_on_copy(r, before, at, shape, tok);
            EXPECT_TRUE(run.status.ok()) << id << ": " << run.status.to_string();
            if (run.status.ok()) runs.push_back({id, std::move(run.out)});
          };
          route_run("staged/ring-wrapped", Route::staged, plane, position);
          route_run("splitk/ring-unwrapped", Route::splitk, ring_twin, cap - 1);
          route_run("vec/growing", Route::vec, growing_twin, cap - 1);
          if (vec_ring) {
            route_run("vec/ring-wrapped", Route::vec, plane, position);
            route_run("vec/ring-unwrapped", Route::vec, ring_twin, cap - 1);
          } else {
            const test::RouteRun refused = test::run_on_copy(Route::vec, plane, position, shape, tok);
            EXPECT_EQ(refused.status.code(), ErrorCode::invalid_argument)
                << "R1: a ragged token-major ring is not vec's";
            EXPECT_TRUE(std::all_of(refused.out.begin(), refused.out.end(), [](float x) { return std::isnan(x); }));
          }
          runs.push_back({"vec/head-major-wrapped",
                          head_major_wrapped_vec(shape, dt, h, first, cap, origin, tok,
                                                 producer == cpu::CpuProducer::fast)});

          const std::vector<double> ref =
              test::reference_from(shape, tok.q, cap, test::logical_rows(splitk.plane, position, nullptr));
          const double err = relative_error(splitk.out.data(), ref.data(), ref.size());
          EXPECT_LT(err, kSpecTolerance);
          EXPECT_LT(err, kTightTolerance);
          worst = std::max(worst, err);
          for (const FullRingRun& r : runs) {
            EXPECT_TRUE(test::same_bits(r.out, splitk.out)) << r.id << " differs from splitk/ring-wrapped";
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 0);
  RecordProperty("worst_relative_error", fmt::format("{:.3g}", worst));
}

}  // namespace
}  // namespace ladder
