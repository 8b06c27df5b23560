// N1 on the GPU: the CPU suite's sweep (tests/cpu/nonfinite_sweep.hpp) run on the CUDA device
// with both producers, through attend_layer and through the Engine; the exact-DAG producer must
// also keep its CPU twin's bits on poisoned inputs (the same NaN positions, the same finite
// values). And a device error that is not this call's: a refused huge allocation must leave no
// stale "out of memory" behind for the next valid call to report.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "cpu/nonfinite_sweep.hpp"
#include "gpu/gpu_test_support.hpp"
#include "ladder/attention.hpp"
#include "ladder/cuda/cuda_backend.hpp"

namespace ladder::test {
namespace {

cuda::LaunchTuning with_producer(cuda::GpuProducer p) {
  cuda::LaunchTuning t;
  t.producer = p;
  return t;
}

std::vector<NonfiniteCase> gpu_cases() {
  std::vector<NonfiniteCase> out;
  for (const NonfiniteCase& c : nonfinite_cases())
    if (c.gpu) out.push_back(c);
  return out;
}

// Equal planes, where any two NaNs count as equal (the CPU's F16C store and the GPU's cvt keep
// different f16 NaN payloads).
bool same_plane_up_to_nan_payload(const HostPlane& a, const HostPlane& b) {
  if (!(a.state() == b.state()) || a.elements() != b.elements()) return false;
  const KvDtype d = a.config().kv_dtype;
  for (const auto& [x, y] : {std::pair{a.k(), b.k()}, std::pair{a.v(), b.v()}})
    for (std::size_t i = 0; i < a.elements(); ++i) {
      const bool xn = std::isnan(kv_decode(x[i], d));
      const bool yn = std::isnan(kv_decode(y[i], d));
      if (xn != yn || (!xn && x[i] != y[i])) return false;
    }
  return true;
}

class GpuNonfiniteSweep : public ::testing::TestWithParam<NonfiniteCase> {};

// The default producer through attend_layer, with the range counters. LADDER_GPU_SWEEP=small
// (the compute-sanitizer runs) keeps one NaN, one Inf and one saturating value.
TEST_P(GpuNonfiniteSweep, AttendLayerFollowsThePolicy) {
  LADDER_REQUIRE_GPU();
  const LayerRunner gpu = [](Route r, HostPlane& plane, int pos, int slot, const HeadShape& shape,
                             const LayerIO& io) { return attend_layer(Device::cuda, r, plane, pos, slot, shape, io); };
  const std::vector<float> all = poison_values();
  const std::vector<float> values = small_sweep() ? std::vector<float>{all[0], all[1], all[3]} : all;
  const SweepTally t = run_nonfinite_sweep(GetParam(), gpu, true, values);
  EXPECT_GT(t.nan_runs, 0);
  EXPECT_GT(t.finite_runs, 0);
}

TEST_P(GpuNonfiniteSweep, TensorCoreProducerFollowsThePolicy) {
  LADDER_REQUIRE_GPU();
  if (small_sweep()) GTEST_SKIP() << "LADDER_GPU_SWEEP=small: the default producer's sweep covers it";
  const cuda::LaunchTuning tc = with_producer(cuda::GpuProducer::tensor_core);
  const LayerRunner gpu = [&tc](Route r, HostPlane& plane, int pos, int slot, const HeadShape& shape,
                                const LayerIO& io) { return cuda::attend_layer_host(r, plane, pos, slot, shape, io, tc); };
  const SweepTally t = run_nonfinite_sweep(GetParam(), gpu, false);
  EXPECT_GT(t.nan_runs, 0);
  EXPECT_GT(t.finite_runs, 0);
}

// Exact-DAG producer: the policy, and its CPU twin's bits (NaN where the twin has NaN, the same
// finite bits elsewhere, the same stored row).
TEST_P(GpuNonfiniteSweep, ExactDagProducerKeepsItsCpuTwinsBits) {
  LADDER_REQUIRE_GPU();
  if (small_sweep()) GTEST_SKIP() << "LADDER_GPU_SWEEP=small: the default producer's sweep covers it";
  const cuda::LaunchTuning exact = with_producer(cuda::GpuProducer::exact_dag);
  int compared = 0;
  const LayerRunner gpu = [&](Route r, HostPlane& plane, int pos, int slot, const HeadShape& shape,
                              const LayerIO& io) {
    HostPlane twin = plane;
    std::vector<float> cpu_out = nan_filled(static_cast<std::size_t>(shape.n_heads) * shape.head_dim);
    LayerIO cio = io;
    cio.out = cpu_out.data();
    const Status cs = attend_layer(Device::cpu, r, twin, pos, slot, shape, cio);
    const Status gs = cuda::attend_layer_host(r, plane, pos, slot, shape, io, exact);
    if (cs.ok() && gs.ok()) {
      ++compared;
      for (std::size_t i = 0; i < cpu_out.size(); ++i) {
        const bool cn = std::isnan(cpu_out[i]), gn = std::isnan(io.out[i]);
        EXPECT_EQ(cn, gn) << route_name(r) << " pos " << pos << " out " << i;
        if (!cn && !gn) {
          EXPECT_EQ(std::memcmp(&cpu_out[i], &io.out[i], sizeof(float)), 0)
              << route_name(r) << " pos " << pos << " out " << i << ": " << cpu_out[i] << " vs " << io.out[i];
        }
      }
      EXPECT_TRUE(same_plane_up_to_nan_payload(twin, plane)) << route_name(r) << " pos " << pos;
    }
    return gs;
  };
  const SweepTally t = run_nonfinite_sweep(GetParam(), gpu, false);
  EXPECT_EQ(compared, t.runs);
  EXPECT_GT(t.nan_runs, 0);
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuNonfiniteSweep, ::testing::ValuesIn(gpu_cases()),
                         [](const auto& info) { return info.param.name; });

// bf16 planes: a ring with slack (partially wrapped, a row left in the slack) and a growing plane
// from 16 rows (interleaved, pad), every poison and site, all three producers' checks.
std::vector<NonfiniteCase> gpu_bf16_cases() {
  std::vector<NonfiniteCase> out;
  for (NonfiniteCase c : gpu_cases())
    if (c.name == "ring_w64_slack16_gqa4" || c.name == "growing_cap16_gqa8") {
      c.cfg.kv_dtype = KvDtype::bf16;
      c.name += "_bf16";
      out.push_back(c);
    }
  return out;
}
INSTANTIATE_TEST_SUITE_P(GpuBf16, GpuNonfiniteSweep, ::testing::ValuesIn(gpu_bf16_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(GpuNonfiniteEngine, EveryLayerFollowsThePolicy) {
  LADDER_REQUIRE_GPU();
  const std::vector<float> values = poison_values();
  for (Site site : {Site::q, Site::cur_k, Site::cur_v}) {
    for (float value : values) {
      for (int layer : {1, 3}) {  // an SWA layer and the NoPE layer
        const SweepTally t = run_engine_nonfinite(Device::cuda, site, value, layer);
        EXPECT_GT(t.finite_runs, 0);
        if (std::isnan(kv_range(value, kKvRangeMax))) {
          EXPECT_GT(t.nan_runs, 0) << value;
        }
        if (small_sweep()) return;
      }
    }
  }
}

// The GPU engine on bf16 planes: a NaN and a saturating value in the current K, both layer kinds.
TEST(GpuNonfiniteEngine, Bf16PlanesFollowThePolicy) {
  LADDER_REQUIRE_GPU();
  for (float value : {std::numeric_limits<float>::quiet_NaN(), kBeyondHalf}) {
    for (int layer : {1, 3}) {
      const SweepTally t = run_engine_nonfinite(Device::cuda, Site::cur_k, value, layer, KvDtype::bf16);
      EXPECT_GT(t.finite_runs, 0);
      if (std::isnan(value)) {
        EXPECT_GT(t.nan_runs, 0);
      }
    }
  }
}

TEST(GpuNonfiniteEngine, CheckFiniteRefusesBeforeAppending) {
  LADDER_REQUIRE_GPU();
  const Geometry g = nonfinite_engine_geometry();
  EngineOptions opt;
  opt.device = Device::cuda;
  opt.check_finite = true;
  auto engine = std::move(Engine::create(g, opt)).value();
  EngineHistory h(g);
  std::mt19937 rng(13);
  h.add(rng);
  h.k[0][7] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> out = nan_filled(g.n_layers * h.qn);
  const Status s = engine->encode_token(0, TokenIO{h.q[0].data(), h.k[0].data(), h.v[0].data(), out.data()});
  EXPECT_EQ(s.code(), ErrorCode::non_finite) << s.to_string();
  for (int l = 0; l < g.n_layers; ++l) {
    EXPECT_EQ(engine->plane_state(l).len, 0);
    EXPECT_EQ(engine->plane_state(l).next_position, 0);
  }
  EXPECT_EQ(engine->range_stats(), RangeStats{});
  h.k[0][7] = 0.5f;
  EXPECT_TRUE(engine->encode_token(0, TokenIO{h.q[0].data(), h.k[0].data(), h.v[0].data(), out.data()}).ok());
}

// ---- a refused allocation leaves no stale error --------------------------------------------

// Far beyond any GPU's memory (1 PiB), small enough for size_t arithmetic.
constexpr std::size_t kHugeBytes = std::size_t{1} << 50;

// One valid single-layer call, checked against the f64 reference within P3's bound.
void expect_valid_call_succeeds(const char* after) {
  constexpr int kPosition = 40;
  const HeadShape shape = make_shape(8, 2, 128);
  std::mt19937 rng(3);
  HostPlane plane = build_plane(growing_config(2, 128, 64, 1024), kPosition, rng);
  const Token tok = random_token(shape, rng);
  const int slot = plane.append(kPosition).value();
  std::vector<float> out = nan_filled(tok.q.size());
  const Status s = attend_layer(Device::cuda, Route::splitk, plane, kPosition, slot, shape,
                                LayerIO{tok.q.data(), tok.k.data(), tok.v.data(), out.data()});
  ASSERT_TRUE(s.ok()) << "after " << after << ": " << s.to_string();
  const std::vector<double> ref =
      reference_from(shape, tok.q, plane.state().len, logical_rows(plane, kPosition, nullptr));
  EXPECT_LT(relative_error(out.data(), ref.data(), out.size()), kNonfiniteTolerance) << "after " << after;
}

TEST(GpuStaleError, ARefusedHugeWorkspaceThenAValidCall) {
  LADDER_REQUIRE_GPU();
  ScratchNeeds huge;
  huge.partial_floats = static_cast<std::int64_t>(kHugeBytes / sizeof(float));
  Result<cuda::DeviceWorkspace> ws = cuda::allocate_workspace(huge);
  ASSERT_FALSE(ws.ok());
  EXPECT_EQ(ws.status().code(), ErrorCode::out_of_memory) << ws.status().to_string();
  expect_valid_call_succeeds("a refused workspace");
}

TEST(GpuStaleError, ARefusedHugeEnginePlaneThenAValidCall) {
  LADDER_REQUIRE_GPU();
  // Growing planes are allocated at max_context rows: 64 KV heads x 128 dims x 2^24 rows x 2 B
  // = 256 GiB per K plane, more than any single GPU holds.
  Geometry g = nonfinite_engine_geometry();
  g.n_heads = 64;
  g.n_kv_heads = 64;
  g.max_context = 1 << 24;
  ASSERT_TRUE(g.validate().ok()) << g.validate().to_string();
  EngineOptions opt;
  opt.device = Device::cuda;
  Result<std::unique_ptr<Engine>> e = Engine::create(g, opt);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::out_of_memory) << e.status().to_string();
  expect_valid_call_succeeds("a refused engine plane");
}

// A caller's own refused cudaMalloc, its error left unread in the runtime's last-error slot:
// the library's next launch must not report it as its own failure.
TEST(GpuStaleError, ACallersUnreadAllocationFailureThenAValidCall) {
  LADDER_REQUIRE_GPU();
  void* p = nullptr;
  ASSERT_NE(cudaMalloc(&p, kHugeBytes), cudaSuccess);
  ASSERT_EQ(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
  expect_valid_call_succeeds("a caller's refused cudaMalloc");
}

}  // namespace
}  // namespace ladder::test
