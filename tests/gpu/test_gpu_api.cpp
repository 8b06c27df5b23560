// The raw-device-pointer layer (cuda_backend.hpp) used standalone, launch-shape invariance, the
// device facts and probes, and errors as values.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <random>
#include <vector>

#include "cpu/cpu_twin_helpers.hpp"
#include "cuda/dispatch.hpp"
#include "gpu/gpu_test_support.hpp"
#include "ladder/attention.hpp"
#include "ladder/cuda/cuda_backend.hpp"

namespace ladder::test {
namespace {

constexpr Route kAllRoutesForKeys[] = {Route::vec, Route::splitk, Route::interleaved, Route::staged};

constexpr int kHeadDim = 128;

template <class T>
T* to_device(const std::vector<T>& host) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> to_host(const T* dev, std::size_t n) {
  std::vector<T> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

// Sibling heads per warp is a schedule choice of the exact-DAG producer: 1, 2, 4, 8 and 16 give
// the same bits, on every route, and equal the CPU twin.
// A batched step's key (one LayerKernels per layer, merged over the step's entries) picks the
// kernels' dtype instantiation: it must carry the entries' dtype from an empty start (host only,
// no GPU needed). A key that kept its default f16 ran bf16 planes through f16 kernels.
TEST(GpuBatchKey, MergedKeyCarriesTheEntriesDtype) {
  for (Route r : kAllRoutesForKeys) {
    cuda_detail::RouteLaunch l;
    l.route = r;
    l.producer.kv_dtype = KvDtype::bf16;
    for (const GpuFusion fusion : {GpuFusion::separate, GpuFusion::store_fused, GpuFusion::fused, GpuFusion::grid}) {
      cuda_detail::ProducerChoice c;
      c.fusion = fusion;
      const cuda_detail::LayerKernels k = cuda_detail::layer_kernels(l, c, kBlockTokens);
      EXPECT_EQ(k.kv_dtype, KvDtype::bf16) << route_name(r);
      cuda_detail::LayerKernels key;  // a step's key before any entry
      key = cuda_detail::merge(key, k);
      EXPECT_EQ(key.kv_dtype, KvDtype::bf16) << route_name(r);
      EXPECT_EQ(cuda_detail::merge(key, k).kv_dtype, KvDtype::bf16) << route_name(r);
      EXPECT_EQ(cuda_detail::merge(key, k).bits, k.bits);
    }
  }
}

TEST(GpuApi, HeadsPerWarpNeverChangesBits) {
  LADDER_REQUIRE_GPU();
  std::mt19937 rng(3);
  const HeadShape shape = make_shape(32, 2, kHeadDim);
  struct Case {
    Route r;
    PlaneConfig cfg;
    int history;
  };
  const std::vector<Case> cases = {
      {Route::splitk, ring_config(2, kHeadDim, 96, 101, 4096), 250},
      {Route::vec, growing_config(2, kHeadDim, 128, 4096), 100},
      {Route::interleaved, growing_config(2, kHeadDim, 128, 4096), 100},
      {Route::staged, ring_config(2, kHeadDim, 96, 101, 4096), 250},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(route_name(c.r));
    const HostPlane before = build_plane(c.cfg, c.history, rng);
    const Token tok = random_token(shape, rng);
    const RouteRun cpu_run = run_on_copy(c.r, before, c.history, shape, tok);
    ASSERT_TRUE(cpu_run.status.ok()) << cpu_run.status.to_string();

    HostPlane after = before;
    const int slot = after.append(c.history).value();
    Result<cuda::DeviceWorkspace> ws = cuda::allocate_workspace(scratch_needs(c.r, [&] {
      Geometry g;
      g.n_heads = shape.n_heads;
      g.n_kv_heads = shape.n_kv_heads;
      g.head_dim = shape.head_dim;
      return g;
    }(), after.state().len));
    ASSERT_TRUE(ws.ok()) << ws.status().to_string();
    const std::vector<KvWord> hk(after.k(), after.k() + after.elements());
    const std::vector<KvWord> hv(after.v(), after.v() + after.elements());
    const std::vector<float> poison = nan_filled(tok.q.size());
    float* dq = to_device(tok.q);
    float* dk = to_device(tok.k);
    float* dv = to_device(tok.v);
    for (int hpw : {1, 2, 4, 8, 16}) {
      SCOPED_TRACE(testing::Message() << "heads per warp " << hpw);
      cuda::DevicePlane plane{after.config(), after.state(), to_device(hk), to_device(hv), 0};
      float* dout = to_device(poison);
      cuda::LaunchTuning tune;
      tune.producer = cuda::GpuProducer::exact_dag;
      tune.heads_per_warp = hpw;
      const cuda::DeviceLayerIO io{dq, dk, dv, dout};
      const Status s = cuda::run_route(c.r, plane, c.history, slot, shape, io, *ws, nullptr, tune);
      ASSERT_TRUE(s.ok()) << s.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> out = to_host(dout, tok.q.size());
      EXPECT_TRUE(same_bits(out, cpu_run.out)) << "max ulp " << max_ulp(out, cpu_run.out);
      cudaFree(plane.k);
      cudaFree(plane.v);
      cudaFree(dout);
    }
    cudaFree(dq);
    cudaFree(dk);
    cudaFree(dv);
  }
}

TEST(GpuApi, DeviceInfoAndBandwidthProbes) {
  LADDER_REQUIRE_GPU();
  Result<cuda::DeviceInfo> info = cuda::device_info();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_FALSE(info->name.empty());
  EXPECT_GT(info->sm_count, 0);
  EXPECT_GT(info->l2_bytes, 0);
  // A small probe: this checks the plumbing, not the card (the perf suite measures that).
  constexpr std::int64_t kProbeBytes = std::int64_t{64} << 20;
  constexpr int kProbeReps = 5;
  Result<cuda::BandwidthSample> copy = cuda::measure_device_copy_bandwidth(kProbeBytes, kProbeReps);
  Result<cuda::BandwidthSample> read = cuda::measure_device_read_bandwidth(kProbeBytes, kProbeReps);
  ASSERT_TRUE(copy.ok()) << copy.status().to_string();
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_GT(copy->gb_per_s, 0.0);
  EXPECT_GT(read->gb_per_s, 0.0);
  EXPECT_EQ(copy->bytes_moved, 2 * kProbeBytes);
}

// The workspace owns its buffers: a move hands them over and empties the source, a move over a
// workspace frees what it held, and destruction frees the rest. Whether a pointer is still an
// allocation is asked of the runtime for this process (cudaPointerGetAttributes: device memory
// while allocated, unregistered once freed); the device's free memory is not a test of it, since
// other processes (the parallel sanitizer sweep) allocate beside this one.
bool is_device_allocation(const void* p) {
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice;
}

TEST(GpuApi, WorkspaceOwnsItsBuffers) {
  LADDER_REQUIRE_GPU();
  const ScratchNeeds needs{std::int64_t{1} << 20, 4096, 8192};
  const void* partials = nullptr;
  const void* stage = nullptr;
  {
    Result<cuda::DeviceWorkspace> a = cuda::allocate_workspace(needs);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    partials = a->partials();
    stage = a->stage();
    ASSERT_TRUE(is_device_allocation(partials));
    ASSERT_TRUE(is_device_allocation(stage));
    EXPECT_EQ(a->partial_floats(), needs.partial_floats);
    EXPECT_EQ(a->pad_halfs(), needs.pad_halfs);
    EXPECT_EQ(a->stage_halfs(), needs.stage_halfs);
    EXPECT_GT(a->arrival_count(), 0);

    cuda::DeviceWorkspace b = std::move(*a);
    EXPECT_EQ(b.partials(), partials);
    EXPECT_EQ(b.partial_floats(), needs.partial_floats);
    EXPECT_EQ(a->partials(), nullptr);
    EXPECT_EQ(a->pad(), nullptr);
    EXPECT_EQ(a->stage(), nullptr);
    EXPECT_EQ(a->arrivals(), nullptr);
    EXPECT_EQ(a->partial_floats() + a->pad_halfs() + a->stage_halfs() + a->arrival_count(), 0);
    EXPECT_TRUE(is_device_allocation(partials)) << "a move must not free";

    // Moving an empty workspace over b frees b's buffers now, not at scope end.
    b = std::move(*a);
    EXPECT_EQ(b.partials(), nullptr);
    EXPECT_EQ(b.partial_floats(), 0);
    EXPECT_FALSE(is_device_allocation(partials));
    EXPECT_FALSE(is_device_allocation(stage));

    // Destruction frees: a second workspace, dropped at scope end.
    Result<cuda::DeviceWorkspace> c = cuda::allocate_workspace(needs);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    partials = c->partials();
    ASSERT_TRUE(is_device_allocation(partials));
  }
  EXPECT_FALSE(is_device_allocation(partials));
}

TEST(GpuErrors, NoDeviceIsAValueWithoutAGpu) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present: this checks the no-GPU error path";
  std::mt19937 rng(1);
  const HeadShape shape = make_shape(4, 2, kHeadDim);
  HostPlane plane = build_plane(ring_config(2, kHeadDim, 8, 8, 64), 3, rng);
  const int slot = plane.append(3).value();
  const Token tok = random_token(shape, rng);
  std::vector<float> out(tok.q.size());
  const Status s = attend_layer(Device::cuda, Route::splitk, plane, 3, slot, shape,
                                LayerIO{tok.q.data(), tok.k.data(), tok.v.data(), out.data()});
  EXPECT_EQ(s.code(), ErrorCode::no_device) << s.to_string();
  Geometry g = Geometry::muse_glimmer();
  EngineOptions opt;
  opt.device = Device::cuda;
  EXPECT_EQ(Engine::create(g, opt).status().code(), ErrorCode::no_device);
}

TEST(GpuErrors, UnsupportedHeadDimIsAClearError) {
  std::mt19937 rng(2);
  const HeadShape shape = make_shape(4, 2, 64);
  HostPlane plane = build_plane(ring_config(2, 64, 8, 8, 64), 3, rng);
  const int slot = plane.append(3).value();
  const Token tok = random_token(shape, rng);
  std::vector<float> out(tok.q.size());
  const Status s = attend_layer(Device::cuda, Route::splitk, plane, 3, slot, shape,
                                LayerIO{tok.q.data(), tok.k.data(), tok.v.data(), out.data()});
  EXPECT_EQ(s.code(), ErrorCode::unsupported) << s.to_string();
  EXPECT_NE(s.message().find("head_dim"), std::string::npos) << s.message();
  if (!cuda_available()) return;
  Geometry g = Geometry::muse_glimmer();
  g.head_dim = 64;
  EngineOptions opt;
  opt.device = Device::cuda;
  EXPECT_EQ(Engine::create(g, opt).status().code(), ErrorCode::unsupported);
}

TEST(GpuErrors, FailClosedRoutesAreRefusedNotRead) {
  LADDER_REQUIRE_GPU();
  std::mt19937 rng(4);
  const HeadShape shape = make_shape(32, 2, kHeadDim);
  // Partially wrapped ring (slack): vec would read a non-contiguous span.
  HostPlane ring = build_plane(ring_config(2, kHeadDim, 40, 53, 4096), 45, rng);
  const int slot = ring.append(45).value();
  ASSERT_TRUE(ring.state().partially_wrapped());
  const Token tok = random_token(shape, rng);
  std::vector<float> out(tok.q.size());
  const LayerIO io{tok.q.data(), tok.k.data(), tok.v.data(), out.data()};
  EXPECT_EQ(attend_layer(Device::cuda, Route::vec, ring, 45, slot, shape, io).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(attend_layer(Device::cuda, Route::interleaved, ring, 45, slot, shape, io).code(),
            ErrorCode::invalid_argument);
}

TEST(GpuErrors, OutOfDeviceMemoryIsAValue) {
  LADDER_REQUIRE_GPU();
  Geometry g = Geometry::muse_glimmer();
  // Growing planes are allocated at max_context rows: 2^30 rows x 512 B is 512 GiB per plane,
  // far past any card.
  g.max_context = 1 << 30;
  EngineOptions opt;
  opt.device = Device::cuda;
  Result<std::unique_ptr<Engine>> e = Engine::create(g, opt);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::out_of_memory) << e.status().to_string();
  // The device still works afterwards.
  Result<cuda::DeviceInfo> info = cuda::device_info();
  EXPECT_TRUE(info.ok());
}

}  // namespace
}  // namespace ladder::test
