// P1 and E4 on both CPU producers (fast and the exact twin): bits that do not depend on runs or
// thread counts, the interleaved route's only difference, the tiny-capacity case, and errors as
// values that leave every buffer untouched. Wrapped rings (P2, P6, P7): test_wrapped_parity.cpp.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_twin_helpers.hpp"
#include "ladder/attention.hpp"
#include "ladder/engine.hpp"

namespace ladder {
namespace {

using test::Token;

constexpr double kSpecTolerance = 2e-3;  // P3
constexpr int kMuseHeads = 32;
constexpr int kMuseKvHeads = 2;
constexpr int kMuseHeadDim = 128;

class ThreadCountGuard : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(cpu::set_threads(0).ok()); }
};

struct DeterminismCase {
  const char* name;
  PlaneConfig cfg;
  int position;
  std::vector<Route> routes;
};

// P1: the same call gives the same bits run after run and for any worker count.
using Determinism = ThreadCountGuard;
TEST_F(Determinism, BitIdenticalAcrossRunsAndThreadCounts) {
  constexpr int kThreadCounts[] = {1, 2, 3, 8};
  constexpr int kRepeats = 3;
  const DeterminismCase cases[] = {
      {"growing ragged (pad)", test::growing_config(kMuseKvHeads, kMuseHeadDim, 1024, 8192), 700,
       {Route::vec, Route::interleaved, Route::splitk}},
      {"growing nsg 4", test::growing_config(kMuseKvHeads, kMuseHeadDim, 8192, 8192), 4500,
       {Route::vec, Route::interleaved, Route::splitk}},
      {"ring partially wrapped", test::ring_config(kMuseKvHeads, kMuseHeadDim, 512, 552, 8192), 600,
       {Route::splitk, Route::staged}},
      {"ring full wrapped", test::ring_config(kMuseKvHeads, kMuseHeadDim, 512, 512, 8192), 700,
       {Route::vec, Route::splitk, Route::staged}},
      // bf16 planes: the fast producer's 16-bit-shift widening and the exact twin's.
      {"bf16 growing ragged (pad)", test::growing_config(kMuseKvHeads, kMuseHeadDim, 1024, 8192, KvDtype::bf16), 700,
       {Route::vec, Route::interleaved, Route::splitk}},
      {"bf16 ring partially wrapped", test::ring_config(kMuseKvHeads, kMuseHeadDim, 512, 552, 8192, KvDtype::bf16),
       600, {Route::splitk, Route::staged}},
  };
  const HeadShape shape = test::make_shape(kMuseHeads, kMuseKvHeads, kMuseHeadDim);
  std::mt19937 rng(11);
  for (const DeterminismCase& c : cases) {
    const HostPlane plane = test::build_plane(c.cfg, c.position, rng);
    const Token tok = test::random_token(shape, rng);
    for (cpu::CpuProducer producer : test::kAllProducers) {
      for (Route r : c.routes) {
        SCOPED_TRACE(fmt::format("{} / {} / producer {}", c.name, route_name(r), cpu::cpu_producer_name(producer)));
        const test::ProducerScope scope(producer);
        ASSERT_TRUE(cpu::set_threads(1).ok());
        const test::RouteRun first = test::run_on_copy(r, plane, c.position, shape, tok);
        ASSERT_TRUE(first.status.ok()) << first.status.to_string();
        for (int threads : kThreadCounts) {
          ASSERT_TRUE(cpu::set_threads(threads).ok());
          ASSERT_EQ(cpu::threads(), threads);
          for (int rep = 0; rep < kRepeats; ++rep) {
            const test::RouteRun again = test::run_on_copy(r, plane, c.position, shape, tok);
            ASSERT_TRUE(again.status.ok());
            EXPECT_TRUE(test::same_bits(again.out, first.out)) << threads << " threads, repeat " << rep;
            EXPECT_TRUE(test::same_plane(again.plane, first.plane));
          }
        }
      }
    }
  }
}

// The interleaved route differs from vec only by reading the current token in f32. When that
// token is exactly representable in the plane's dtype nothing differs, so the bits must agree.
TEST(InterleavedParity, MatchesVecWhenTheCurrentTokenIsExactInThePlaneDtype) {
  const HeadShape shape = test::make_shape(kMuseHeads, kMuseKvHeads, kMuseHeadDim);
  std::mt19937 rng(31);
  for (KvDtype dt : test::kAllDtypes)
  for (int position : {0, 31, 32, 100, 2050}) {
    SCOPED_TRACE(fmt::format("position {} {}", position, kv_dtype_name(dt)));
    const HostPlane plane =
        test::build_plane(test::growing_config(kMuseKvHeads, kMuseHeadDim, 64, 4096, dt), position, rng);
    Token tok = test::random_token(shape, rng);
    for (float& x : tok.k) x = kv_decode(kv_encode(x, dt), dt);
    for (float& x : tok.v) x = kv_decode(kv_encode(x, dt), dt);
    for (cpu::CpuProducer producer : test::kAllProducers) {
      SCOPED_TRACE(fmt::format("producer {}", cpu::cpu_producer_name(producer)));
      const test::ProducerScope scope(producer);
      const test::RouteRun inter = test::run_on_copy(Route::interleaved, plane, position, shape, tok);
      const test::RouteRun vec = test::run_on_copy(Route::vec, plane, position, shape, tok);
      ASSERT_TRUE(inter.status.ok() && vec.status.ok());
      EXPECT_TRUE(test::same_bits(inter.out, vec.out));
      EXPECT_TRUE(test::same_plane(inter.plane, vec.plane)) << "the fused store must write what store_rows writes";
    }
  }
}

// E4, the chapter's tiny-capacity NaN case: a plane under 32 rows never takes vec through the
// ladder, gets a finite, correct answer from its fallback, and a direct vec request is refused.
TEST(TinyCapacity, NeverVecAndFiniteThroughTheLadder) {
  const HeadShape shape = test::make_shape(8, 2, 64);
  std::mt19937 rng(41);
  const PlaneConfig configs[] = {test::growing_config(2, 64, 4, 30), test::ring_config(2, 64, 16, 16, 200),
                                 test::ring_config(2, 64, 20, 31, 200)};
  for (const PlaneConfig& cfg : configs) {
    SCOPED_TRACE(fmt::format("{} capacity {}", plane_kind_name(cfg.kind), cfg.capacity));
    const LayerClass cls = cfg.kind == PlaneKind::ring ? LayerClass::swa : LayerClass::nope;
    HostPlane plane = HostPlane::create(cfg).value();
    for (int pos = 0; pos < std::min(cfg.max_context, 80); ++pos) {
      const Token tok = test::random_token(shape, rng);
      HostPlane next = plane;
      ASSERT_TRUE(next.append(pos).ok());
      ASSERT_LT(next.state().capacity, kBlockTokens);
      Switches strict;
      strict.strict = true;
      for (Switches sw : {Switches{}, strict}) {
        const RouteDecision d = choose_route(cls, next.state(), Capabilities{}, sw);
        ASSERT_NE(d.route, Route::vec) << "position " << pos;
        ASSERT_FALSE(d.pred.vec_rows);
        const test::RouteRun run = test::run_on_copy(d.route, plane, pos, shape, tok);
        ASSERT_TRUE(run.status.ok()) << run.status.to_string();
        ASSERT_TRUE(std::all_of(run.out.begin(), run.out.end(), [](float x) { return std::isfinite(x); }));
        const test::RowFetch rows =
            test::logical_rows(run.plane, pos, d.route == Route::interleaved ? &tok : nullptr);
        const std::vector<double> ref = test::reference_from(shape, tok.q, run.plane.state().len, rows);
        EXPECT_LT(relative_error(run.out.data(), ref.data(), ref.size()), kSpecTolerance);
      }
      const test::RouteRun vec = test::run_on_copy(Route::vec, plane, pos, shape, tok);
      EXPECT_EQ(vec.status.code(), ErrorCode::invalid_argument);
      EXPECT_NE(vec.status.message().find("32"), std::string::npos) << vec.status.message();
      EXPECT_TRUE(test::same_plane(vec.plane, next));
      ASSERT_TRUE(plane.append_row(pos, tok.k.data(), tok.v.data()).ok());
    }
  }
}

// Errors are values: each bad call is refused with invalid_argument and a message, and leaves
// the plane (state and bytes) and the output exactly as they were.
TEST(RunRouteErrors, BadInputsAreRefusedAndTouchNothing) {
  const HeadShape shape = test::make_shape(8, 2, 64);
  std::mt19937 rng(53);
  const PlaneConfig growing = test::growing_config(2, 64, 64, 500);
  const PlaneConfig wrapped_ring = test::ring_config(2, 64, 64, 80, 500);
  HostPlane g_plane = test::build_plane(growing, 100, rng);
  HostPlane r_plane = test::build_plane(wrapped_ring, 100, rng);
  const int g_slot = g_plane.append(100).value();
  const int r_slot = r_plane.append(100).value();
  ASSERT_TRUE(r_plane.state().partially_wrapped());
  Token tok = test::random_token(shape, rng);
  std::vector<float> out = test::nan_filled(tok.q.size());
  const LayerIO io{tok.q.data(), tok.k.data(), tok.v.data(), out.data()};

  struct Bad {
    const char* why;
    Route route;
    HostPlane* plane;
    int position;
    int slot;
    HeadShape shape;
    LayerIO io;
  };
  HeadShape wrong_kv = shape;
  wrong_kv.n_kv_heads = 1;
  wrong_kv.n_heads = 8;
  HeadShape not_gqa = shape;
  not_gqa.n_heads = 7;
  HeadShape wrong_dim = test::make_shape(8, 2, 128);
  HeadShape ragged_dim = shape;
  ragged_dim.head_dim = 62;
  HeadShape nan_scale = shape;
  nan_scale.scale = std::nanf("");
  LayerIO no_q = io, no_k = io, no_v = io, no_out = io;
  no_q.q = nullptr;
  no_k.k = nullptr;
  no_v.v = nullptr;
  no_out.out = nullptr;
  const Bad bads[] = {
      {"null q", Route::vec, &g_plane, 100, g_slot, shape, no_q},
      {"null k", Route::splitk, &g_plane, 100, g_slot, shape, no_k},
      {"null v", Route::interleaved, &g_plane, 100, g_slot, shape, no_v},
      {"null out", Route::staged, &r_plane, 100, r_slot, shape, no_out},
      {"KV heads differ from the plane", Route::splitk, &g_plane, 100, g_slot, wrong_kv, io},
      {"not GQA", Route::splitk, &g_plane, 100, g_slot, not_gqa, io},
      {"head_dim differs from the plane", Route::splitk, &g_plane, 100, g_slot, wrong_dim, io},
      {"head_dim not a multiple of 4", Route::splitk, &g_plane, 100, g_slot, ragged_dim, io},
      {"NaN scale", Route::splitk, &g_plane, 100, g_slot, nan_scale, io},
      {"position not appended yet", Route::splitk, &g_plane, 101, g_slot, shape, io},
      {"stale position", Route::splitk, &g_plane, 99, g_slot, shape, io},
      {"negative position", Route::splitk, &g_plane, -1, g_slot, shape, io},
      {"wrong slot", Route::splitk, &g_plane, 100, g_slot + 1, shape, io},
      {"slot out of range", Route::splitk, &r_plane, 100, 1 << 20, shape, io},
      {"vec on a partially wrapped ring", Route::vec, &r_plane, 100, r_slot, shape, io},
      {"interleaved on a ring", Route::interleaved, &r_plane, 100, r_slot, shape, io},
      {"staged on a growing plane", Route::staged, &g_plane, 100, g_slot, shape, io},
      {"unknown route", static_cast<Route>(kRouteCount + 3), &g_plane, 100, g_slot, shape, io},
  };
  for (const Bad& b : bads) {
    SCOPED_TRACE(b.why);
    const HostPlane before = *b.plane;
    cpu::Workspace ws;
    const Status s = cpu::run_route(b.route, *b.plane, b.position, b.slot, b.shape, b.io, ws);
    EXPECT_EQ(s.code(), ErrorCode::invalid_argument) << s.to_string();
    EXPECT_FALSE(s.message().empty());
    EXPECT_TRUE(test::same_plane(*b.plane, before));
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return std::isnan(x); }));
  }
  // A fresh plane that took no append has nothing to attend to.
  HostPlane empty = HostPlane::create(growing).value();
  cpu::Workspace ws;
  EXPECT_EQ(cpu::run_route(Route::splitk, empty, 0, 0, shape, io, ws).code(), ErrorCode::invalid_argument);
  // And the good call still works on the very planes the bad ones were given.
  EXPECT_TRUE(cpu::run_route(Route::vec, g_plane, 100, g_slot, shape, io, ws).ok());
  EXPECT_TRUE(cpu::run_route(Route::splitk, r_plane, 100, r_slot, shape, io, ws).ok());
}

// attend_layer is the device-neutral door: on the CPU it is run_route, bit for bit.
TEST(AttendLayer, CpuIsRunRouteAndCudaAnswersWithoutADevice) {
  const HeadShape shape = test::make_shape(16, 2, 128);
  std::mt19937 rng(61);
  const HostPlane plane = test::build_plane(test::ring_config(2, 128, 96, 110, 1000), 300, rng);
  const Token tok = test::random_token(shape, rng);
  for (Route r : {Route::splitk, Route::staged}) {
    const test::RouteRun direct = test::run_on_copy(r, plane, 300, shape, tok);
    ASSERT_TRUE(direct.status.ok());
    HostPlane p = plane;
    const int slot = p.append(300).value();
    std::vector<float> out = test::nan_filled(tok.q.size());
    const LayerIO io{tok.q.data(), tok.k.data(), tok.v.data(), out.data()};
    ASSERT_TRUE(attend_layer(Device::cpu, r, p, 300, slot, shape, io).ok());
    EXPECT_TRUE(test::same_bits(out, direct.out));
    EXPECT_TRUE(test::same_plane(p, direct.plane));
    if (!cuda_available()) {
      EXPECT_EQ(attend_layer(Device::cuda, r, p, 300, slot, shape, io).code(), ErrorCode::no_device);
    }
  }
}

// G3/G5 scratch contract: both copies hold the window's tokens in logical order, read from a
// wrapped ring through its origins (the staged window straddles the physical end; the pad holds
// the last visible % 32 logical tokens, not the rows after physical row 32), and rows past the
// data are zero-filled, never left as stale bytes.
TEST(CopyKernels, PadAndStageZeroFillTheirPadding) {
  constexpr int kKv = 2, kHd = 8, kVisible = 37;
  std::mt19937 rng(71);
  const HostPlane plane = test::build_plane(test::ring_config(kKv, kHd, 40, 50, 500), 120, rng);
  RowSource src;
  src.k = plane.k();
  src.v = plane.v();
  src.strides = plane.strides();
  src.order = RowOrder::ring_logical;
  src.state = plane.state();
  src.logical_start = logical_start(119, 40);
  const int padded = 2 * kBlockTokens;
  const KvWord kStale = 0x1234;
  const HeadShape shape = test::make_shape(4, kKv, kHd);
  std::vector<KvWord> sk(static_cast<std::size_t>(padded) * kKv * kHd, kStale), sv = sk;
  std::vector<KvWord> pk(static_cast<std::size_t>(kBlockTokens) * kKv * kHd, kStale), pv = pk;
  const RowCopyParams stage = stage_copy(src, src.logical_start, kVisible, padded, shape, sk.data(), sv.data());
  const RowCopyParams pad = pad_copy(src, PlaneKind::growing, kVisible, shape, pk.data(), pv.data());
  ASSERT_EQ(pad.first, kBlockTokens);
  ASSERT_EQ(pad.count, kVisible - kBlockTokens);
  ASSERT_EQ(pad.rows, kBlockTokens);
  for (const RowCopyParams& c : {stage, pad}) {
    ASSERT_TRUE(cpu::copy_rows(c).ok());
    for (int t = 0; t < c.rows; ++t)
      for (int h = 0; h < kKv; ++h)
        for (int d = 0; d < kHd; ++d) {
          const std::int64_t at = c.dst_strides.offset(t, h) + d;
          const bool data = t < c.count;
          const int slot = plane.state().physical(src.logical_start + c.first + t);
          const std::int64_t from = data ? plane.strides().offset(slot, h) + d : 0;
          ASSERT_EQ(c.dst_k[at], data ? plane.k()[from] : 0) << t;
          ASSERT_EQ(c.dst_v[at], data ? plane.v()[from] : 0) << t;
        }
  }
  // A token-major span, or one without a ragged tail, has nothing to pad.
  EXPECT_EQ(pad_copy(src, PlaneKind::ring, kVisible, shape, pk.data(), pv.data()).rows, 0);
  EXPECT_EQ(pad_copy(src, PlaneKind::growing, 2 * kBlockTokens, shape, pk.data(), pv.data()).rows, 0);
}

}  // namespace
}  // namespace ladder
