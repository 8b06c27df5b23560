// First per-route timings on the card (B1, a first cut). Runs only with LADDER_GPU_PERF=1 so the
// correctness suite and the sanitizer runs stay fast. Single-layer routes are timed as graph
// replays over planes rotating through >= 4x L2, CUDA events, medians; bandwidth ceilings are
// measured in the same process.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cpu/cpu_twin_helpers.hpp"
#include "gpu/gpu_test_support.hpp"
#include "ladder/cuda/cuda_backend.hpp"
#include "ladder/cuda_engine.hpp"

namespace ladder::test {
namespace {

constexpr int kHeadDim = 128;
constexpr int kReplays = 15;
constexpr int kWarmups = 3;
constexpr std::int64_t kProbeBytes = std::int64_t{2} << 30;  // 2 GiB: far past the 60 MB L2
constexpr int kProbeReps = 20;
constexpr int kL2Multiple = 4;  // rotate among buffers totalling >= 4x L2
// Producers to compare: the tensor-core default and the exact DAG at its measured best (4 sibling
// heads per warp).
struct ProducerCase {
  const char* label;
  cuda::GpuProducer producer;
  int heads_per_warp;
};
constexpr ProducerCase kProducers[] = {{"tc", cuda::GpuProducer::tensor_core, 0},
                                       {"dag4", cuda::GpuProducer::exact_dag, 4}};

bool perf_enabled() {
  const char* v = std::getenv("LADDER_GPU_PERF");
  return v != nullptr && v[0] == '1';
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct RouteCase {
  const char* label;
  Route route;
  PlaneKind kind;
};

TEST(GpuPerf, FirstMeasurements) {
  LADDER_REQUIRE_GPU();
  if (!perf_enabled()) GTEST_SKIP() << "set LADDER_GPU_PERF=1 to time the routes";
  const cuda::DeviceInfo info = cuda::device_info().value();
  const cuda::BandwidthSample copy = cuda::measure_device_copy_bandwidth(kProbeBytes, kProbeReps).value();
  const cuda::BandwidthSample read = cuda::measure_device_read_bandwidth(kProbeBytes, kProbeReps).value();
  const double ceiling = std::max(copy.gb_per_s, read.gb_per_s);
  std::printf("card: %s, %d SMs, L2 %.0f MB\n", info.name.c_str(), info.sm_count, info.l2_bytes / 1e6);
  std::printf("ceiling: copy %.0f GB/s (read+write), read-only stream %.0f GB/s -> %.0f GB/s\n", copy.gb_per_s,
              read.gb_per_s, ceiling);

  const HeadShape shape = make_shape(32, 2, kHeadDim);
  const std::vector<RouteCase> routes = {
      {"splitk (ring)", Route::splitk, PlaneKind::ring},
      {"vec (ring, token-major)", Route::vec, PlaneKind::ring},
      {"staged (ring)", Route::staged, PlaneKind::ring},
      {"vec (growing, head-major)", Route::vec, PlaneKind::growing},
      {"interleaved (growing)", Route::interleaved, PlaneKind::growing},
  };
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::mt19937 rng(5);
  std::printf("%-28s %5s %8s %8s %10s %9s %9s\n", "route", "prod", "depth", "planes", "median_us", "GB/s",
              "of_ceil");
  // LADDER_GPU_PERF_DEPTH=N times one depth only (for a profiler run).
  std::vector<int> depths = {2048, 8192, 32768, 131072};
  if (const char* d = std::getenv("LADDER_GPU_PERF_DEPTH")) depths = {std::atoi(d)};
  for (int depth : depths) {
    const std::int64_t plane_bytes = std::int64_t{depth} * shape.n_kv_heads * kHeadDim * 2 * 2;
    const int planes = static_cast<int>(std::max<std::int64_t>(2, (kL2Multiple * info.l2_bytes) / plane_bytes + 1));
    const std::size_t elems = static_cast<std::size_t>(depth) * shape.n_kv_heads * kHeadDim;
    std::vector<KvWord> host(elems);
    for (auto& h : host) h = f32_to_f16(random_value(rng));
    std::vector<KvWord*> ks(planes), vs(planes);
    for (int i = 0; i < planes; ++i) {
      ASSERT_EQ(cudaMalloc(&ks[i], elems * 2), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&vs[i], elems * 2), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(ks[i], host.data(), elems * 2, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(vs[i], host.data(), elems * 2, cudaMemcpyHostToDevice), cudaSuccess);
    }
    const std::vector<float> q = random_values(static_cast<std::size_t>(shape.n_heads) * kHeadDim, rng);
    const std::vector<float> kv = random_values(static_cast<std::size_t>(shape.n_kv_heads) * kHeadDim, rng);
    float *dq = nullptr, *dk = nullptr, *dout = nullptr;
    ASSERT_EQ(cudaMalloc(&dq, q.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dk, kv.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dout, q.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dq, q.data(), q.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dk, kv.data(), kv.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    Geometry g;
    g.n_heads = shape.n_heads;
    g.n_kv_heads = shape.n_kv_heads;
    g.head_dim = kHeadDim;
    ScratchNeeds need;
    for (Route r : {Route::vec, Route::splitk, Route::staged, Route::interleaved}) {
      const ScratchNeeds n = scratch_needs(r, g, depth);
      need.partial_floats = std::max(need.partial_floats, n.partial_floats);
      need.pad_halfs = std::max(need.pad_halfs, n.pad_halfs);
      need.stage_halfs = std::max(need.stage_halfs, n.stage_halfs);
    }
    cuda::DeviceWorkspace ws = cuda::allocate_workspace(need).value();
    for (const RouteCase& rc : routes)
    for (const ProducerCase& pc : kProducers) {
      PlaneConfig cfg;
      cfg.kind = rc.kind;
      cfg.n_kv_heads = shape.n_kv_heads;
      cfg.head_dim = kHeadDim;
      cfg.window = rc.kind == PlaneKind::ring ? depth : 0;
      cfg.capacity = depth;
      cfg.max_context = 1 << 20;
      PlaneState st;
      st.capacity = depth;
      st.len = depth;
      st.next_position = depth;
      const cuda::DeviceLayerIO io{dq, dk, dk, dout};
      cudaGraph_t graph = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      for (int i = 0; i < planes; ++i) {
        const cuda::DevicePlane plane{cfg, st, ks[i], vs[i], depth};
        cuda::LaunchTuning tune;
        tune.producer = pc.producer;
        tune.heads_per_warp = pc.heads_per_warp;
        const Status s = cuda::run_route(rc.route, plane, depth - 1, depth - 1, shape, io, ws, stream, tune);
        ASSERT_TRUE(s.ok()) << s.to_string();
      }
      ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
      cudaGraphExec_t exec = nullptr;
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      cudaEvent_t a, b;
      cudaEventCreate(&a);
      cudaEventCreate(&b);
      std::vector<double> us;
      for (int rep = 0; rep < kWarmups + kReplays; ++rep) {
        cudaEventRecord(a, stream);
        cudaGraphLaunch(exec, stream);
        cudaEventRecord(b, stream);
        ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        if (rep >= kWarmups) us.push_back(ms * 1e3 / planes);
      }
      const double med = median(us);
      const double gbs = static_cast<double>(plane_bytes) / (med * 1e-6) / 1e9;
      std::printf("%-28s %5s %8d %8d %10.2f %9.0f %9.3f\n", rc.label, pc.label, depth, planes, med, gbs,
                  gbs / ceiling);
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
    for (int i = 0; i < planes; ++i) {
      cudaFree(ks[i]);
      cudaFree(vs[i]);
    }
    cudaFree(dq);
    cudaFree(dk);
    cudaFree(dout);
  }
  cudaStreamDestroy(stream);
}

// The 52-layer step through the GPU engine (graph replay), wall time per encode_token including
// its host->device activation copy and the output copy back: an upper bound on the step.
TEST(GpuPerf, EngineStepWallTime) {
  LADDER_REQUIRE_GPU();
  if (!perf_enabled()) GTEST_SKIP() << "set LADDER_GPU_PERF=1 to time the engine";
  const Geometry g = Geometry::muse_glimmer();
  EngineOptions opt;
  opt.device = Device::cuda;
  std::unique_ptr<Engine> e = std::move(Engine::create(g, opt).value());
  std::mt19937 rng(8);
  const std::size_t q_n = static_cast<std::size_t>(g.n_layers) * g.n_heads * g.head_dim;
  const std::size_t kv_n = static_cast<std::size_t>(g.n_layers) * g.n_kv_heads * g.head_dim;
  const std::vector<float> q = random_values(q_n, rng), k = random_values(kv_n, rng), v = random_values(kv_n, rng);
  std::vector<float> out(q_n);
  const TokenIO io{q.data(), k.data(), v.data(), out.data()};
  int pos = 0;
  for (int depth : {2048, 32768}) {
    for (; pos < depth - 1; ++pos) ASSERT_TRUE(e->fill_token(pos, io).ok());
    std::vector<double> us;
    constexpr int kTokens = 20;
    for (int i = 0; i < kTokens; ++i, ++pos) {
      const auto t0 = std::chrono::steady_clock::now();
      ASSERT_TRUE(e->encode_token(pos, io).ok());
      const auto t1 = std::chrono::steady_clock::now();
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    std::printf("engine step (52 layers, graph replay, incl. transfers) at depth %d: median %.1f us (%s)\n", depth,
                median(us), e->device_description().c_str());
  }
  const cuda::GraphStats st = cuda::graph_stats(*e);
  std::printf("graph captures %d, replays %d\n", st.captures, st.replays);
}

}  // namespace
}  // namespace ladder::test
