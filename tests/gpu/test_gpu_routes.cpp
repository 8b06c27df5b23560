// Every route on the GPU, both producers, over wrap states, capacities below and above 32, odd
// lengths and GQA ratios:
//  * exact-DAG producer: bit-identical to its CPU twin (both follow THE PRODUCER DAG of
//    kernel_params.hpp, with explicit fmaf, softmax_exp and contraction off);
//  * tensor-core producer (the default): within kTcMaxRelErr of the f64 reference, P1, P2, P6;
//    its ulp distance to the CPU twin is reported, not asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_twin_helpers.hpp"
#include "gpu/gpu_route_run.hpp"
#include "gpu/gpu_test_support.hpp"
#include "ladder/attention.hpp"
#include "ladder/cuda/cuda_backend.hpp"

namespace ladder::test {
namespace {

constexpr int kHeadDim = 128;
// P3: relative error bound against the f64 reference of the stored elements (either KV dtype).
constexpr double kMaxRelErr = 2e-3;
constexpr Route kAllRoutes[] = {Route::vec, Route::splitk, Route::interleaved, Route::staged};

cuda::LaunchTuning with_producer(cuda::GpuProducer p) {
  cuda::LaunchTuning t;
  t.producer = p;
  return t;
}
const cuda::LaunchTuning kExact = with_producer(cuda::GpuProducer::exact_dag);
const cuda::LaunchTuning kTensor = with_producer(cuda::GpuProducer::tensor_core);

struct Gqa {
  int n_heads, n_kv_heads;
};
// 16:1 is the reference geometry's ratio; 1:1 (no sharing), 3:1 (a ratio with no power-of-two
// factor: one head per warp) and 4:1 cover the sibling-head schedules; 32:1 needs two 16-head
// tensor-core tiles per KV head (ratios below 16 pad one tile).
std::vector<Gqa> gqa_sweep(bool small) {
  if (small) return {{32, 2}, {6, 2}};
  return {{32, 2}, {8, 8}, {6, 2}, {16, 4}, {64, 2}};
}

struct PlaneCase {
  std::string name;
  PlaneConfig cfg;
  std::vector<int> positions;  // the token under test (history is positions before it)
};

// The bf16 sweeps take the reduced positions (small): every route, plane kind and wrap state is
// still there, and the kernels differ from f16's only in the element conversions and the mma type.
std::vector<PlaneCase> plane_sweep(int n_kv, KvDtype dt, bool small) {
  std::vector<PlaneCase> out;
  // Full ring, window 64: unwrapped (odd, ragged, exact multiple of 32), just full, wrapped.
  out.push_back({"ring64", ring_config(n_kv, kHeadDim, 64, 64, 4096, dt),
                 small ? std::vector<int>{0, 31, 63, 100} : std::vector<int>{0, 6, 31, 32, 63, 64, 95, 127, 200}});
  // Slack 13: partially wrapped states occur (vec refused), and origin_physical returns to 0.
  out.push_back({"ring40+13", ring_config(n_kv, kHeadDim, 40, 53, 4096, dt),
                 small ? std::vector<int>{39, 45, 60} : std::vector<int>{17, 39, 40, 45, 52, 53, 60, 92, 93, 150}});
  // Capacity below 32: vec must be refused (the tiny-capacity NaN case), splitk still exact.
  out.push_back({"ring20", ring_config(n_kv, kHeadDim, 20, 20, 4096, dt),
                 small ? std::vector<int>{5, 33} : std::vector<int>{5, 19, 20, 33, 77}});
  // Growing planes: initial capacity 16 (below 32) and 32, both grow; ragged tails pad.
  out.push_back({"grow16", growing_config(n_kv, kHeadDim, 16, 4096, dt),
                 small ? std::vector<int>{3, 40} : std::vector<int>{0, 3, 15, 16, 40, 64, 97}});
  out.push_back({"grow32", growing_config(n_kv, kHeadDim, 32, 4096, dt),
                 small ? std::vector<int>{31, 70} : std::vector<int>{1, 31, 32, 33, 70, 255, 300}});
  // Deep enough that the pinned schedule (the exact-DAG producer's) reaches nsg 2 and 4 with
  // nwg 32, and the tensor-core partition (tc_schedule) a coarser one than pinned: at 12000
  // tokens (375 blocks) it has 64 warp slots of 5-6 blocks where pinned has 128 of 2-3 (with 2
  // or more KV heads), so both pairs of a tensor-core CTA hold blocks and their end merge runs
  // on data (the reduced sweep keeps that one).
  out.push_back({"grow-deep", growing_config(n_kv, kHeadDim, 256, 16384, dt),
                 small ? std::vector<int>{12000} : std::vector<int>{2100, 4100, 12000}});
  return out;
}

// One case of a route sweep: a plane state before the append, the token, the route.
struct RouteCase {
  const HeadShape& shape;
  const HostPlane& before;
  int position;
  const Token& tok;
  Route r;
};

// Calls check(case) for every GQA shape, plane case, position and route of the sweep (the reduced
// one where `small`), each plane and token drawn from rng, under a trace naming the case. A fatal
// failure (an ASSERT in check) ends the sweep, as it would end a loop written in the test.
template <class Check>
void for_each_route_case(bool small, KvDtype dt, std::mt19937& rng, Check&& check) {
  for (const Gqa& gqa : gqa_sweep(small)) {
    const HeadShape shape = make_shape(gqa.n_heads, gqa.n_kv_heads, kHeadDim);
    for (const PlaneCase& pc : plane_sweep(gqa.n_kv_heads, dt, small)) {
      for (int position : pc.positions) {
        const HostPlane before = build_plane(pc.cfg, position, rng);
        const Token tok = random_token(shape, rng);
        for (Route r : kAllRoutes) {
          SCOPED_TRACE(testing::Message() << pc.name << " " << gqa.n_heads << ":" << gqa.n_kv_heads << " position "
                                          << position << " route " << route_name(r));
          check(RouteCase{shape, before, position, tok, r});
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

// One sweep, either producer. exact: GPU == CPU twin bit for bit. tensor-core: reference within
// kTcMaxRelErr, ulp distance to the CPU twin reported.
void sweep_routes(const cuda::LaunchTuning& tuning, bool exact, KvDtype dt = KvDtype::f16) {
  std::mt19937 rng(20261130);
  const bool small = small_sweep() || dt == KvDtype::bf16;
  int compared = 0;
  std::int64_t worst_ulp = 0;
  double worst_rel = 0.0;
  for_each_route_case(small, dt, rng, [&](const RouteCase& c) {
    const auto& [shape, before, position, tok, r] = c;
    const RouteRun cpu_run = run_on_copy(r, before, position, shape, tok);
    const GpuRun gpu = run_gpu_on_copy(r, before, position, shape, tok, tuning);
    // Fail-closed parity: the GPU refuses exactly what the CPU twin refuses.
    ASSERT_EQ(cpu_run.status.ok(), gpu.status.ok()) << "cpu: " << cpu_run.status.to_string()
                                                    << " gpu: " << gpu.status.to_string();
    if (!gpu.status.ok()) {
      EXPECT_EQ(gpu.status.code(), ErrorCode::invalid_argument) << gpu.status.to_string();
      return;
    }
    EXPECT_TRUE(all_finite(gpu.out));
    const std::int64_t ulp = max_ulp(gpu.out, cpu_run.out);
    worst_ulp = std::max(worst_ulp, ulp);
    if (exact) {
      EXPECT_EQ(ulp, 0) << "GPU kernel and CPU twin differ";
      EXPECT_TRUE(same_bits(gpu.out, cpu_run.out));
    }
    EXPECT_TRUE(same_plane(gpu.plane, cpu_run.plane)) << "the stored row differs";
    const Token* bypass = r == Route::interleaved ? &tok : nullptr;
    const std::vector<double> ref = reference_from(
        shape, tok.q, gpu.plane.state().len, logical_rows(gpu.plane, position, bypass));
    const double rel = relative_error(gpu.out.data(), ref.data(), ref.size());
    worst_rel = std::max(worst_rel, rel);
    EXPECT_LT(rel, kMaxRelErr);
    if (!exact) {
      EXPECT_LT(rel, kTcMaxRelErr);
    }
    // P1: the same inputs again give the same bits.
    const GpuRun again = run_gpu_on_copy(r, before, position, shape, tok, tuning);
    ASSERT_TRUE(again.status.ok());
    EXPECT_TRUE(same_bits(again.out, gpu.out)) << "P1: run-to-run bits differ";
    ++compared;
  });
  EXPECT_GT(compared, 0);
  std::printf("[ producer %s, %s ] %d route runs: max ulp vs CPU twin %lld, max rel err vs f64 reference %.3g\n",
              exact ? "exact-DAG" : "tensor-core", kv_dtype_name(dt), compared, static_cast<long long>(worst_ulp),
              worst_rel);
}

TEST(GpuRoutes, ExactDagEveryRouteMatchesCpuTwinAndReference) {
  LADDER_REQUIRE_GPU();
  sweep_routes(kExact, true);
}

TEST(GpuRoutes, TensorCoreEveryRouteWithinReferenceAndRepeatable) {
  LADDER_REQUIRE_GPU();
  sweep_routes(kTensor, false);
}

// bf16 planes: the exact-DAG kernels keep the CPU twins' bits, the tensor-core ones (bf16 mma)
// stay within kTcMaxRelErr of the reference of the stored bf16 elements; the stored rows equal the
// CPU store's bits.
TEST(GpuRoutesBf16, ExactDagEveryRouteMatchesCpuTwinAndReference) {
  LADDER_REQUIRE_GPU();
  sweep_routes(kExact, true, KvDtype::bf16);
}

TEST(GpuRoutesBf16, TensorCoreEveryRouteWithinReferenceAndRepeatable) {
  LADDER_REQUIRE_GPU();
  sweep_routes(kTensor, false, KvDtype::bf16);
}

// P2 and P6: a wrapped ring staged (or walked by splitk in logical order) gives the bits of vec
// over the same rows laid out unwrapped.
void wrapped_ring_parity(const cuda::LaunchTuning& tuning, KvDtype dt = KvDtype::f16) {
  std::mt19937 rng(7);
  const HeadShape shape = make_shape(32, 2, kHeadDim);
  struct Case {
    int window, position;
  };
  // Window 64: one block per warp slot. Window 12288: 384 blocks over 128 warp slots, 3 per
  // slot, so the tensor-core producer's two pairs both fold blocks before they merge.
  for (const Case c : {Case{64, 64}, Case{64, 100}, Case{64, 127}, Case{64, 200}, Case{12288, 17000}}) {
    const int window = c.window;
    const int position = c.position;
    SCOPED_TRACE(testing::Message() << "window " << window << " position " << position);
    const PlaneConfig cfg = ring_config(2, kHeadDim, window, window, 32768, dt);
    const std::size_t row = 2 * kHeadDim;
    std::vector<std::vector<float>> ks, vs;
    HostPlane wrapped = HostPlane::create(cfg).value();
    for (int p = 0; p < position; ++p) {
      ks.push_back(random_values(row, rng));
      vs.push_back(random_values(row, rng));
      ASSERT_TRUE(wrapped.append_row(p, ks.back().data(), vs.back().data()).ok());
    }
    const Token tok = random_token(shape, rng);
    // The unwrapped plane holds the same window, logical order from row 0, current token last.
    HostPlane unwrapped = HostPlane::create(cfg).value();
    for (int t = 0; t + 1 < window; ++t) {
      const int src = position - (window - 1) + t;
      ASSERT_TRUE(unwrapped.append_row(t, ks[src].data(), vs[src].data()).ok());
    }
    const GpuRun vec = run_gpu_on_copy(Route::vec, unwrapped, window - 1, shape, tok, tuning);
    const GpuRun staged = run_gpu_on_copy(Route::staged, wrapped, position, shape, tok, tuning);
    const GpuRun splitk = run_gpu_on_copy(Route::splitk, wrapped, position, shape, tok, tuning);
    ASSERT_TRUE(vec.status.ok()) << vec.status.to_string();
    ASSERT_TRUE(staged.status.ok()) << staged.status.to_string();
    ASSERT_TRUE(splitk.status.ok()) << splitk.status.to_string();
    EXPECT_TRUE(same_bits(staged.out, vec.out)) << "P2: max ulp " << max_ulp(staged.out, vec.out);
    EXPECT_TRUE(same_bits(splitk.out, vec.out)) << "P6: max ulp " << max_ulp(splitk.out, vec.out);
  }
}

TEST(GpuRoutes, ExactDagStagedAndSplitkOnWrappedRingMatchUnwrappedVec) {
  LADDER_REQUIRE_GPU();
  wrapped_ring_parity(kExact);
}

TEST(GpuRoutes, TensorCoreStagedAndSplitkOnWrappedRingMatchUnwrappedVec) {
  LADDER_REQUIRE_GPU();
  wrapped_ring_parity(kTensor);
}

TEST(GpuRoutesBf16, StagedAndSplitkOnWrappedRingMatchUnwrappedVec) {
  LADDER_REQUIRE_GPU();
  wrapped_ring_parity(kExact, KvDtype::bf16);
  wrapped_ring_parity(kTensor, KvDtype::bf16);
}

void bypass_only(const cuda::LaunchTuning& tuning, KvDtype dt = KvDtype::f16) {
  std::mt19937 rng(11);
  const HeadShape shape = make_shape(32, 2, kHeadDim);
  const PlaneConfig cfg = growing_config(2, kHeadDim, 64, 4096, dt);
  const HostPlane before = build_plane(cfg, 95, rng);
  Token tok = random_token(shape, rng);
  // Activations exactly representable in the plane's dtype: then the bypass reads the same values
  // as the plane and the two routes must agree to the bit.
  for (float& x : tok.k) x = kv_decode(kv_encode(x, dt), dt);
  for (float& x : tok.v) x = kv_decode(kv_encode(x, dt), dt);
  const GpuRun vec = run_gpu_on_copy(Route::vec, before, 95, shape, tok, tuning);
  const GpuRun inter = run_gpu_on_copy(Route::interleaved, before, 95, shape, tok, tuning);
  ASSERT_TRUE(vec.status.ok() && inter.status.ok());
  EXPECT_TRUE(same_bits(vec.out, inter.out)) << "max ulp " << max_ulp(vec.out, inter.out);
}

TEST(GpuRoutes, InterleavedDiffersFromVecOnlyByTheCurrentTokenBypass) {
  LADDER_REQUIRE_GPU();
  bypass_only(kExact);
  bypass_only(kTensor);
  bypass_only(kExact, KvDtype::bf16);
  bypass_only(kTensor, KvDtype::bf16);
}

// The tensor-core producer's tile layouts (cuda::TcTiles) are a launch shape: swizzled tiles give
// the padded tiles' bits (outputs and stored rows) on every route, plane case and position of the
// reduced sweep, with the store fused into the producer (the default) and in separate kernels
// (whose row families read the current row from the plane). The interleaved route's split current
// row and the grown planes' deep case (both pairs of a CTA folding blocks) are among them.
void swizzled_tiles_keep_bits(KvDtype dt) {
  std::mt19937 rng(20261205);
  int compared = 0;
  for (const cuda::GpuFusion fusion : {cuda::GpuFusion::store_fused, cuda::GpuFusion::separate}) {
    cuda::LaunchTuning padded = kTensor;
    padded.fusion = fusion;
    padded.tc_tiles = cuda::TcTiles::padded;
    cuda::LaunchTuning swizzled = padded;
    swizzled.tc_tiles = cuda::TcTiles::swizzled;
    SCOPED_TRACE(testing::Message() << "fusion " << static_cast<int>(fusion));
    for_each_route_case(/*small=*/true, dt, rng, [&](const RouteCase& c) {
      const GpuRun base = run_gpu_on_copy(c.r, c.before, c.position, c.shape, c.tok, padded);
      const GpuRun other = run_gpu_on_copy(c.r, c.before, c.position, c.shape, c.tok, swizzled);
      ASSERT_EQ(base.status.ok(), other.status.ok()) << base.status.to_string() << " / " << other.status.to_string();
      if (!base.status.ok()) return;
      EXPECT_TRUE(all_finite(other.out));
      EXPECT_TRUE(same_bits(other.out, base.out)) << "max ulp " << max_ulp(other.out, base.out);
      EXPECT_TRUE(same_plane(other.plane, base.plane)) << "the stored row differs";
      ++compared;
    });
  }
  EXPECT_GT(compared, 0);
}

TEST(GpuRoutes, SwizzledTilesGiveThePaddedBits) {
  LADDER_REQUIRE_GPU();
  swizzled_tiles_keep_bits(KvDtype::f16);
}

TEST(GpuRoutesBf16, SwizzledTilesGiveThePaddedBits) {
  LADDER_REQUIRE_GPU();
  swizzled_tiles_keep_bits(KvDtype::bf16);
}

}  // namespace
}  // namespace ladder::test
