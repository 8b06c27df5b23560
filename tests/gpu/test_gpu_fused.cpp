// The fused kernel (one launch per layer for splitk and vec: store + tensor-core producer + "the
// last CTA to finish merges" reduce, src/cuda/fused_tc.cuh) and the store-fused producer with
// the reducer behind it (GpuFusion::store_fused) against the separate kernels they replace:
//  * the same output bits and the same stored plane row, over GQA ratios (one and two 16-head
//    tiles per KV head), wrap states, ragged lengths and depths where the schedule has nsg 1, 2
//    and 4 (both merge levels run), and within the tensor-core bound of the f64 reference;
//  * bits independent of the order in which CTAs arrive (CTAs delayed on purpose through the
//    kernel's test hook: reversed, shuffled, one slot last);
//  * arrival counters back at zero after every launch (graph replay needs no reset pass).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "cpu/cpu_twin_helpers.hpp"
#include "gpu/gpu_delays.hpp"
#include "gpu/gpu_route_run.hpp"
#include "gpu/gpu_test_support.hpp"
#include "ladder/cuda/cuda_backend.hpp"
#include "ladder/cuda_engine.hpp"
#include "ladder/engine.hpp"

namespace ladder::test {
namespace {

constexpr int kHeadDim = 128;
// The tensor-core producer is held to kTcMaxRelErr (gpu_test_support.hpp; measured here on the
// H100, docs/bench/h100-2026-12-06-change54/suite.txt: f16 6.13e-07, bf16 2.98e-06).

cuda::LaunchTuning tensor(cuda::GpuFusion fusion) {
  cuda::LaunchTuning t;
  t.producer = cuda::GpuProducer::tensor_core;
  t.fusion = fusion;
  return t;
}
cuda::LaunchTuning tensor(bool fused) { return tensor(fused ? cuda::GpuFusion::fused : cuda::GpuFusion::separate); }

GpuRun run_splitk(const HostPlane& before, int position, const HeadShape& shape, const Token& tok,
                  const cuda::LaunchTuning& tuning) {
  return run_gpu_on_copy(Route::splitk, before, position, shape, tok, tuning);
}

struct Case {
  const char* name;
  PlaneConfig cfg;
  int position;
};

std::vector<Case> cases(int n_kv) {
  std::vector<Case> out = {
      {"ring64 first token", ring_config(n_kv, kHeadDim, 64, 64, 32768), 0},
      {"ring64 ragged", ring_config(n_kv, kHeadDim, 64, 64, 32768), 38},
      {"ring64 wrapped", ring_config(n_kv, kHeadDim, 64, 64, 32768), 200},
      {"ring40+13 partially wrapped", ring_config(n_kv, kHeadDim, 40, 53, 32768), 60},
      {"ring20", ring_config(n_kv, kHeadDim, 20, 20, 32768), 33},
      // Pinned: nwg 32 with nsg 1 (2,048), 2 (3,000) and 4 (12,288 wrapped: 3 blocks per slot);
      // the tensor-core partition with 2 KV heads: the same, but nsg 2 at 12,288 (6 blocks per
      // slot), and with 8 KV heads coarser still (tc_schedule).
      {"ring2048 wrapped", ring_config(n_kv, kHeadDim, 2048, 2048, 32768), 2500},
      {"ring3000 ragged", ring_config(n_kv, kHeadDim, 3000, 3000, 32768), 2999},
      {"ring12288 wrapped", ring_config(n_kv, kHeadDim, 12288, 12288, 32768), 17000},
      // vec's head-major planes: a ragged tail (read in place by the fused kernel, padded by the
      // separate kernels) and a deep one.
      {"grow32 ragged", growing_config(n_kv, kHeadDim, 32, 32768), 70},
      {"grow-deep ragged", growing_config(n_kv, kHeadDim, 256, 32768), 12000},
  };
  if (small_sweep()) out.erase(out.begin() + 1, out.begin() + 5);
  return out;
}

void fused_equals_separate(KvDtype dt) {
  std::mt19937 rng(9);
  int compared = 0;
  double worst_rel = 0.0;
  const bool small = small_sweep() || dt == KvDtype::bf16;  // bf16: the reduced sweep (time)
  const std::vector<std::pair<int, int>> gqas = small
                                                   ? std::vector<std::pair<int, int>>{{32, 2}, {64, 2}}
                                                   : std::vector<std::pair<int, int>>{{32, 2}, {8, 8}, {6, 2}, {64, 2}};
  for (const auto& [nh, nkv] : gqas) {
    const HeadShape shape = make_shape(nh, nkv, kHeadDim);
    for (Case c : cases(nkv)) {
      c.cfg.kv_dtype = dt;
      SCOPED_TRACE(testing::Message() << c.name << " " << nh << ":" << nkv << " position " << c.position);
      const HostPlane before = build_plane(c.cfg, c.position, rng);
      const Token tok = random_token(shape, rng);
      for (Route r : {Route::splitk, Route::vec}) {
        SCOPED_TRACE(route_name(r));
        const GpuRun separate = run_gpu_on_copy(r, before, c.position, shape, tok, tensor(false));
        for (const cuda::GpuFusion form : {cuda::GpuFusion::fused, cuda::GpuFusion::store_fused, cuda::GpuFusion::grid}) {
          SCOPED_TRACE(form == cuda::GpuFusion::fused         ? "one kernel, the last CTA merging"
                       : form == cuda::GpuFusion::store_fused ? "store-fused producer + reducer"
                                                              : "one kernel, merged after a grid barrier");
          const GpuRun fused = run_gpu_on_copy(r, before, c.position, shape, tok, tensor(form));
          // Fail-closed alike: vec is refused on the same planes either way (and splitk never).
          ASSERT_EQ(fused.status.ok(), separate.status.ok()) << fused.status.to_string();
          if (!fused.status.ok()) {
            EXPECT_EQ(r, Route::vec) << fused.status.to_string();
            continue;
          }
          EXPECT_TRUE(all_finite(fused.out));
          EXPECT_TRUE(same_bits(fused.out, separate.out)) << "max ulp " << max_ulp(fused.out, separate.out);
          EXPECT_TRUE(same_plane(fused.plane, separate.plane)) << "the stored row differs";
          const std::vector<double> ref =
              reference_from(shape, tok.q, fused.plane.state().len, logical_rows(fused.plane, c.position, nullptr));
          const double rel = relative_error(fused.out.data(), ref.data(), ref.size());
          worst_rel = std::max(worst_rel, rel);
          EXPECT_LT(rel, kTcMaxRelErr);
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 0);
  std::printf(
      "[ fused and store-fused splitk/vec, %s ] %d runs bit-identical to store + producer + reducer, max rel err "
      "%.3g\n",
              kv_dtype_name(dt), compared, worst_rel);
}

TEST(GpuFused, OneKernelEqualsSeparateKernelsBitForBit) {
  LADDER_REQUIRE_GPU();
  fused_equals_separate(KvDtype::f16);
}

TEST(GpuFused, OneKernelEqualsSeparateKernelsBitForBitBf16) {
  LADDER_REQUIRE_GPU();
  fused_equals_separate(KvDtype::bf16);
}

TEST(GpuFused, ArrivalOrderNeverChangesBits) {
  LADDER_REQUIRE_GPU();
  std::mt19937 rng(23);
  const HeadShape shape = make_shape(32, 2, kHeadDim);
  Delays delays;
  // A delay step far above the time a CTA takes (a few microseconds), so the order is forced.
  constexpr unsigned kStepNs = 20000;
  struct Depth {
    int window, position;
  };
  // nsg 1 (32 slots: one merge level), nsg 4 (128 slots: both levels).
  for (const Depth d : {Depth{2048, 2100}, Depth{12288, 13000}}) {
    SCOPED_TRACE(testing::Message() << "window " << d.window);
    const PlaneConfig cfg = ring_config(2, kHeadDim, d.window, d.window, 32768);
    const HostPlane before = build_plane(cfg, d.position, rng);
    const Token tok = random_token(shape, rng);
    const GpuRun base = run_splitk(before, d.position, shape, tok, tensor(true));
    const GpuRun separate = run_splitk(before, d.position, shape, tok, tensor(false));
    ASSERT_TRUE(base.status.ok() && separate.status.ok());
    ASSERT_TRUE(same_bits(base.out, separate.out));
    std::vector<unsigned> order(kMaxSlots);
    std::iota(order.begin(), order.end(), 0u);
    std::vector<std::pair<const char*, std::vector<unsigned>>> patterns;
    std::vector<unsigned> reversed(kMaxSlots), shuffled(kMaxSlots), first_last(kMaxSlots, 0u);
    for (int f = 0; f < kMaxSlots; ++f) reversed[f] = static_cast<unsigned>(kMaxSlots - 1 - f) * kStepNs / 8;
    std::shuffle(order.begin(), order.end(), rng);
    for (int f = 0; f < kMaxSlots; ++f) shuffled[f] = order[f] * kStepNs / 8;
    first_last[0] = 20 * kStepNs;  // slot 0 arrives last: it merges workgroup 0 and everything
    patterns = {{"reversed", reversed}, {"shuffled", shuffled}, {"slot 0 last", first_last}};
    for (const auto& [name, ns] : patterns) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(delays.set(ns));
      cuda::LaunchTuning t = tensor(true);
      t.debug_arrival_delay_ns = delays.get();
      const GpuRun perturbed = run_splitk(before, d.position, shape, tok, t);
      ASSERT_TRUE(perturbed.status.ok()) << perturbed.status.to_string();
      EXPECT_TRUE(same_bits(perturbed.out, base.out)) << "max ulp " << max_ulp(perturbed.out, base.out);
    }
  }
}

// One layer's plane and activations on the device, freed on scope exit: for run_route with a
// workspace the test owns (counters and partials it can read or poison between launches).
class DeviceLayer {
 public:
  DeviceLayer(const HostPlane& plane, const Token& tok) : elems_(plane.elements()), q_elems_(tok.q.size()) {
    ok_ = grab(&k_, elems_ * sizeof(KvWord), plane.k()) && grab(&v_, elems_ * sizeof(KvWord), plane.v()) &&
          grab(&q_, tok.q.size() * 4, tok.q.data()) && grab(&ck_, tok.k.size() * 4, tok.k.data()) &&
          grab(&cv_, tok.v.size() * 4, tok.v.data()) && grab(&out_, q_elems_ * 4, nullptr);
  }
  ~DeviceLayer() {
    for (void* p : {static_cast<void*>(k_), static_cast<void*>(v_), static_cast<void*>(q_), static_cast<void*>(ck_),
                    static_cast<void*>(cv_), static_cast<void*>(out_)})
      cudaFree(p);
  }
  DeviceLayer(const DeviceLayer&) = delete;
  DeviceLayer& operator=(const DeviceLayer&) = delete;
  bool ok() const { return ok_; }
  cuda::DevicePlane plane(const HostPlane& host) const { return {host.config(), host.state(), k_, v_, 0}; }
  cuda::DeviceLayerIO io() const { return {q_, ck_, cv_, out_}; }
  // out poisoned with NaN before a launch, read back after it.
  bool poison_out() { return cudaMemset(out_, 0xff, q_elems_ * 4) == cudaSuccess; }
  std::vector<float> out() const {
    std::vector<float> host(q_elems_);
    if (cudaMemcpy(host.data(), out_, q_elems_ * 4, cudaMemcpyDeviceToHost) != cudaSuccess) host.clear();
    return host;
  }

 private:
  template <class T>
  static bool grab(T** p, std::size_t bytes, const void* from) {
    if (cudaMalloc(p, bytes) != cudaSuccess) return false;
    return from == nullptr || cudaMemcpy(*p, from, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
  }
  std::size_t elems_, q_elems_;
  KvWord *k_ = nullptr, *v_ = nullptr;
  float *q_ = nullptr, *ck_ = nullptr, *cv_ = nullptr, *out_ = nullptr;
  bool ok_ = false;
};

// run_route on device buffers with one workspace, launched repeatedly: the counters are zero
// after each launch and the bits repeat (what graph replay relies on).
TEST(GpuFused, ArrivalCountersResetThemselves) {
  LADDER_REQUIRE_GPU();
  std::mt19937 rng(5);
  const HeadShape shape = make_shape(32, 2, kHeadDim);
  const PlaneConfig cfg = ring_config(2, kHeadDim, 8192, 8192, 32768);
  HostPlane plane = build_plane(cfg, 9000, rng);
  const Token tok = random_token(shape, rng);
  const int slot = plane.append(9000).value();
  DeviceLayer dl(plane, tok);
  ASSERT_TRUE(dl.ok());
  Geometry g;
  g.n_heads = shape.n_heads;
  g.n_kv_heads = shape.n_kv_heads;
  g.head_dim = shape.head_dim;
  Result<cuda::DeviceWorkspace> ws = cuda::allocate_workspace(scratch_needs(Route::splitk, g, 8192));
  ASSERT_TRUE(ws.ok()) << ws.status().to_string();
  ASSERT_GT(ws->arrival_count(), 0);
  std::vector<float> first;
  for (int rep = 0; rep < 4; ++rep) {
    ASSERT_TRUE(dl.poison_out());
    ASSERT_TRUE(cuda::run_route(Route::splitk, dl.plane(plane), 9000, slot, shape, dl.io(), *ws, nullptr, tensor(true)).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<unsigned> counters(static_cast<std::size_t>(ws->arrival_count()), 1u);
    ASSERT_EQ(cudaMemcpy(counters.data(), ws->arrivals(), counters.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_TRUE(std::all_of(counters.begin(), counters.end(), [](unsigned c) { return c == 0u; }))
        << "a counter was left non-zero after launch " << rep;
    const std::vector<float> out = dl.out();
    EXPECT_TRUE(all_finite(out));
    if (rep == 0)
      first = out;
    else
      EXPECT_TRUE(same_bits(out, first)) << "launch " << rep << " differs";
  }
}

// The store-fused form's reducer is launched with PDL and allowed to start once every producer
// CTA has folded its last slot, before any partial is written (kernels.hpp, reduce_programmatic).
// Chosen CTAs sleep in that window, and the partials are poisoned (NaN) before every launch: the
// reducer must still merge only what this launch's producers wrote, so the bits are the
// undelayed launch's. A reducer that read a partial before its griddepcontrol.wait would return
// NaN or the stale partials of the other token run in between.
TEST(GpuFused, StoreFusedReducerWaitsForItsProducers) {
  LADDER_REQUIRE_GPU();
  std::mt19937 rng(31);
  const HeadShape shape = make_shape(32, 2, kHeadDim);
  constexpr unsigned kStepNs = 20000;  // far above a CTA's few microseconds: the order is forced
  Delays delays;
  struct Depth {
    int window, position;
  };
  // nsg 1 (32 slots) and a coarser partition with more slots per workgroup.
  for (const Depth d : {Depth{2048, 2100}, Depth{12288, 13000}}) {
    SCOPED_TRACE(testing::Message() << "window " << d.window);
    const PlaneConfig cfg = ring_config(2, kHeadDim, d.window, d.window, 32768);
    HostPlane plane = build_plane(cfg, d.position, rng);
    const Token tok = random_token(shape, rng);
    const Token other = random_token(shape, rng);
    const int slot = plane.append(d.position).value();
    DeviceLayer dl(plane, tok), dl_other(plane, other);
    ASSERT_TRUE(dl.ok() && dl_other.ok());
    Geometry g;
    g.n_heads = shape.n_heads;
    g.n_kv_heads = shape.n_kv_heads;
    g.head_dim = shape.head_dim;
    Result<cuda::DeviceWorkspace> ws = cuda::allocate_workspace(scratch_needs(Route::splitk, g, d.window));
    ASSERT_TRUE(ws.ok()) << ws.status().to_string();
    const std::size_t partial_bytes = static_cast<std::size_t>(ws->partial_floats()) * sizeof(float);
    const auto launch = [&](DeviceLayer& layer, const cuda::LaunchTuning& t) {
      EXPECT_EQ(cudaMemset(ws->partials(), 0xff, partial_bytes), cudaSuccess);  // NaN poison
      EXPECT_TRUE(layer.poison_out());
      const Status st = cuda::run_route(Route::splitk, layer.plane(plane), d.position, slot, shape, layer.io(), *ws,
                                        nullptr, t);
      EXPECT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      return layer.out();
    };
    const std::vector<float> base = launch(dl, tensor(cuda::GpuFusion::store_fused));
    ASSERT_TRUE(all_finite(base));
    std::vector<unsigned> reversed(kMaxSlots), slot0_last(kMaxSlots, 0u);
    for (int f = 0; f < kMaxSlots; ++f) reversed[f] = static_cast<unsigned>(kMaxSlots - 1 - f) * kStepNs / 8;
    slot0_last[0] = 20 * kStepNs;
    for (const auto& [name, ns] : {std::pair{"reversed", reversed}, std::pair{"slot 0 last", slot0_last}}) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(delays.set(ns));
      (void)launch(dl_other, tensor(cuda::GpuFusion::store_fused));  // other partials in between
      cuda::LaunchTuning t = tensor(cuda::GpuFusion::store_fused);
      t.debug_arrival_delay_ns = delays.get();
      const std::vector<float> delayed = launch(dl, t);
      EXPECT_TRUE(same_bits(delayed, base)) << "max ulp " << max_ulp(delayed, base);
    }
  }
}

// The engine's one-sequence calls launch their batched reducer with PDL too
// (kBatchedReducerPdlUpToBatch): it may start once every producer CTA has folded its last slot,
// before any partial is written. Chosen CTAs sleep in that window; the scratch then holds the
// previous layer's and the previous token's partials, and the reducer must still merge only
// what this layer's producers wrote: the bits are those of an engine whose reducer is launched
// plainly behind separate kernels (the same bits, GpuFused.OneKernelEqualsSeparateKernelsBitForBit).
// Two partitions: the ring layers' 2,048 rows (32 slots) and the NoPE layer's 2,100 (64 slots).
TEST(GpuFused, BatchOneEngineReducerWaitsForItsProducers) {
  LADDER_REQUIRE_GPU();
  constexpr unsigned kStepNs = 20000;  // far above a CTA's few microseconds: the order is forced
  constexpr int kFilled = 2100;        // tokens stored before the timed ones
  constexpr int kDecoded = 3;          // tokens decoded by every engine
  Geometry g;
  g.name = "reducer-waits";
  g.n_layers = 3;
  g.n_heads = 32;
  g.n_kv_heads = 2;
  g.head_dim = kHeadDim;
  g.window = 2048;
  g.ring_slack = 0;
  g.max_context = 4096;
  g.nope_period = 3;
  g.nope_phase = 2;
  ASSERT_TRUE(g.validate().ok());
  const std::size_t nq = static_cast<std::size_t>(g.n_layers) * g.n_heads * g.head_dim;
  const std::size_t nkv = static_cast<std::size_t>(g.n_layers) * g.n_kv_heads * g.head_dim;
  // Token p's activations: a function of p alone, so every engine is given the same ones.
  struct Acts {
    std::vector<float> q, k, v;
  };
  const auto acts = [&](int p) {
    std::mt19937 rng(static_cast<unsigned>(p) + 1u);
    std::normal_distribution<float> n(0.0f, 1.0f);
    Acts a{std::vector<float>(nq), std::vector<float>(nkv), std::vector<float>(nkv)};
    for (auto* xs : {&a.q, &a.k, &a.v})
      for (float& x : *xs) x = n(rng);
    return a;
  };
  Delays delays;
  std::vector<unsigned> reversed(kMaxSlots), slot0_last(kMaxSlots, 0u);
  for (int f = 0; f < kMaxSlots; ++f) reversed[f] = static_cast<unsigned>(kMaxSlots - 1 - f) * kStepNs / 8;
  slot0_last[0] = 20 * kStepNs;
  // The outputs of kDecoded tokens after kFilled stored ones, from an engine built with `copt`.
  const auto decode = [&](const cuda::CudaEngineOptions& copt) {
    EngineOptions opt;
    opt.device = Device::cuda;
    Result<std::unique_ptr<Engine>> made = cuda::create_engine(g, opt, copt);
    EXPECT_TRUE(made.ok()) << made.status().to_string();
    std::vector<float> outs;
    if (!made.ok()) return outs;
    Engine& e = **made;
    for (int p = 0; p < kFilled + kDecoded; ++p) {
      const Acts a = acts(p);
      std::vector<float> out(nq, std::nanf(""));
      const TokenIO io{a.q.data(), a.k.data(), a.v.data(), out.data()};
      const Status st = p < kFilled ? e.fill_token(p, io) : e.encode_token(p, io);
      EXPECT_TRUE(st.ok()) << st.to_string();
      if (p >= kFilled) outs.insert(outs.end(), out.begin(), out.end());
    }
    return outs;
  };
  cuda::CudaEngineOptions plain = cuda::default_engine_options();
  plain.tuning.fusion = cuda::GpuFusion::separate;
  const std::vector<float> base = decode(plain);
  ASSERT_EQ(base.size(), nq * kDecoded);
  ASSERT_TRUE(all_finite(base));
  for (const auto& [name, ns] : {std::pair{"reversed", reversed}, std::pair{"slot 0 last", slot0_last}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(delays.set(ns));
    cuda::CudaEngineOptions delayed = cuda::default_engine_options();
    delayed.tuning.fusion = cuda::GpuFusion::store_fused;
    delayed.tuning.debug_arrival_delay_ns = delays.get();
    const std::vector<float> got = decode(delayed);
    ASSERT_EQ(got.size(), base.size());
    EXPECT_TRUE(same_bits(got, base)) << "max ulp " << max_ulp(got, base);
  }
}

}  // namespace
}  // namespace ladder::test
