// E1/E2 on the GPU: per-layer planes in device memory, the same ladder as the CPU per layer per
// token, and the whole per-token step captured once per route mix as a CUDA graph.
//
// Step state: every kernel of a captured step reads its parameter struct from `d_steps_` (one
// RouteLaunch per layer, device memory). Each token the host fills the pinned mirror
// `h_steps_` (positions, origins, slot, visible, schedule — everything that varies) and the
// graph's first node copies it to the device; grids are sized for the worst case and idle
// blocks exit. So a cached graph serves every token whose per-layer routes are the same; a new
// route mix is captured once and cached (SWA layers switch between splitk and vec as the ring
// fills, so a handful of graphs covers a whole run).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <vector>

#include "cuda/device_memory.hpp"
#include "cuda/dispatch.hpp"
#include "cuda/kernels.hpp"
#include "engine/backends.hpp"

namespace ladder {
namespace cuda {
namespace {

using cuda_detail::cuda_status;
using cuda_detail::DeviceArray;
using cuda_detail::RouteLaunch;

// Pinned host memory (the graph's copy nodes read and write it at replay time).
template <class T>
class PinnedArray {
 public:
  PinnedArray() = default;
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  ~PinnedArray() {
    if (p_ != nullptr) cudaFreeHost(p_);
  }
  Status allocate(std::size_t n, const char* what) {
    void* raw = nullptr;
    LADDER_TRY(cuda_status(cudaMallocHost(&raw, std::max<std::size_t>(n, 1) * sizeof(T)),
                           fmt::format("allocating pinned host memory for {}", what)));
    p_ = static_cast<T*>(raw);
    n_ = n;
    return {};
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

class CudaEngine final : public Engine {
 public:
  CudaEngine(const Geometry& g, const EngineOptions& opt, const CudaEngineOptions& copt)
      : g_(g), opt_(opt), copt_(copt) {}

  ~CudaEngine() override {
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    free_workspace(ws_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status init() {
    LADDER_TRY(cuda_detail::require_device());
    shape_.n_heads = g_.n_heads;
    shape_.n_kv_heads = g_.n_kv_heads;
    shape_.head_dim = g_.head_dim;
    shape_.scale = g_.scale();
    LADDER_TRY(check_head_shape(shape_));
    producer_ = cuda_detail::resolve_producer_choice(shape_, copt_.tuning);
    LADDER_TRY(cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream"));
    Result<DeviceInfo> info = device_info();
    if (!info) return info.status();
    info_ = *info;

    const int n = g_.n_layers;
    cfgs_.resize(static_cast<std::size_t>(n));
    states_.resize(static_cast<std::size_t>(n));
    rows_.resize(static_cast<std::size_t>(n));
    k_.resize(static_cast<std::size_t>(n));
    v_.resize(static_cast<std::size_t>(n));
    for (int l = 0; l < n; ++l) {
      const std::size_t i = static_cast<std::size_t>(l);
      cfgs_[i] = PlaneConfig::for_layer(g_, g_.layer_class(l), opt_.initial_growing_capacity);
      LADDER_TRY(cfgs_[i].validate());
      states_[i].capacity = cfgs_[i].capacity;
      // Growing planes get max_context rows up front: no device copy when their state grows.
      rows_[i] = cfgs_[i].kind == PlaneKind::growing ? cfgs_[i].max_context : cfgs_[i].capacity;
      const std::size_t elems = static_cast<std::size_t>(rows_[i]) * g_.n_kv_heads * g_.head_dim;
      LADDER_TRY(k_[i].allocate(elems, "a plane's K rows"));
      LADDER_TRY(v_[i].allocate(elems, "a plane's V rows"));
      cuda_detail::clear_stale_error();
      LADDER_TRY(cuda_status(cuda_detail::launch_poison_halfs(k_[i].get(), static_cast<std::int64_t>(elems), stream_),
                             "poisoning a plane"));
      LADDER_TRY(cuda_status(cuda_detail::launch_poison_halfs(v_[i].get(), static_cast<std::int64_t>(elems), stream_),
                             "poisoning a plane"));
    }
    q_elems_ = static_cast<std::size_t>(g_.n_heads) * g_.head_dim;
    kv_elems_ = static_cast<std::size_t>(g_.n_kv_heads) * g_.head_dim;
    const std::size_t nl = static_cast<std::size_t>(n);
    LADDER_TRY(dq_.allocate(nl * q_elems_, "q"));
    LADDER_TRY(dk_.allocate(nl * kv_elems_, "k"));
    LADDER_TRY(dv_.allocate(nl * kv_elems_, "v"));
    LADDER_TRY(dout_.allocate(nl * q_elems_, "out"));
    LADDER_TRY(hq_.allocate(nl * q_elems_, "q"));
    LADDER_TRY(hk_.allocate(nl * kv_elems_, "k"));
    LADDER_TRY(hv_.allocate(nl * kv_elems_, "v"));
    LADDER_TRY(hout_.allocate(nl * q_elems_, "out"));
    LADDER_TRY(h_steps_.allocate(nl, "step state"));
    LADDER_TRY(d_steps_.allocate(nl, "step state"));
    Result<DeviceWorkspace> ws = allocate_workspace(max_scratch_needs(g_));
    if (!ws) return ws.status();
    ws_ = *ws;
    return cuda_status(cudaStreamSynchronize(stream_), "initialising the engine");
  }

  Status encode_token(int position, const TokenIO& io) override {
    if (io.q == nullptr || io.k == nullptr || io.v == nullptr || io.out == nullptr)
      return make_error(ErrorCode::invalid_argument, "encode_token needs q, k, v and out");
    if (detail::finite_check_on(opt_)) LADDER_TRY(detail::check_token_finite(g_, io, true));
    std::vector<PlaneState> next;
    std::vector<int> slots;
    LADDER_TRY(plan_all(position, next, slots));
    const std::size_t n = static_cast<std::size_t>(g_.n_layers);
    take_inputs(io);

    std::vector<Route> routes(n);
    std::vector<TraceEntry> entries;
    for (std::size_t l = 0; l < n; ++l) {
      const LayerClass cls = g_.layer_class(static_cast<int>(l));
      const RouteDecision d = choose_route(cls, next[l], opt_.caps, opt_.switches);
      routes[l] = d.route;
      DevicePlane plane{cfgs_[l], next[l], k_[l].get(), v_[l].get(), rows_[l]};
      DeviceLayerIO lio{dq_.get() + l * q_elems_, dk_.get() + l * kv_elems_, dv_.get() + l * kv_elems_,
                        dout_.get() + l * q_elems_};
      LADDER_TRY(cuda_detail::plan_route(d.route, plane, position, slots[l], shape_, lio, ws_, producer_,
                                                 h_steps_.get()[l]));
      if (opt_.record_trace) {
        TraceEntry e;
        e.position = position;
        e.layer = static_cast<int>(l);
        e.cls = cls;
        e.decision = d;
        e.state = next[l];
        e.visible = h_steps_.get()[l].producer.visible;
        e.schedule = h_steps_.get()[l].producer.sched;
        entries.push_back(e);
      }
    }

    if (copt_.use_graph) {
      cudaGraphExec_t exec = nullptr;
      LADDER_TRY(graph_for(routes, exec));
      LADDER_TRY(cuda_status(cudaGraphLaunch(exec, stream_), "replaying the step graph"));
    } else {
      LADDER_TRY(enqueue_step(nullptr));
    }
    LADDER_TRY(cuda_status(cudaStreamSynchronize(stream_), "running the step"));
    std::memcpy(io.out, hout_.get(), n * q_elems_ * sizeof(float));
    states_ = next;
    trace_.insert(trace_.end(), entries.begin(), entries.end());
    detail::count_token_range(g_, io, true, range_);
    return {};
  }

  Status fill_token(int position, const TokenIO& io) override {
    if (io.k == nullptr || io.v == nullptr)
      return make_error(ErrorCode::invalid_argument, "fill_token needs k and v");
    if (detail::finite_check_on(opt_)) LADDER_TRY(detail::check_token_finite(g_, io, false));
    std::vector<PlaneState> next;
    std::vector<int> slots;
    LADDER_TRY(plan_all(position, next, slots));
    const std::size_t n = static_cast<std::size_t>(g_.n_layers);
    take_inputs(io);
    LADDER_TRY(upload_kv());
    cuda_detail::clear_stale_error();
    for (std::size_t l = 0; l < n; ++l) {
      StoreParams sp;
      sp.n_kv_heads = g_.n_kv_heads;
      sp.head_dim = g_.head_dim;
      sp.k = dk_.get() + l * kv_elems_;
      sp.v = dv_.get() + l * kv_elems_;
      sp.plane_k = k_[l].get();
      sp.plane_v = v_[l].get();
      sp.strides = plane_strides(cfgs_[l].kind, rows_[l], g_.n_kv_heads, g_.head_dim);
      sp.slot = slots[l];
      LADDER_TRY(cuda_status(cuda_detail::launch_store(sp, nullptr, stream_), "launching a store"));
    }
    LADDER_TRY(cuda_status(cudaStreamSynchronize(stream_), "storing the rows"));
    states_ = next;
    detail::count_token_range(g_, io, false, range_);
    return {};
  }

  const Geometry& geometry() const override { return g_; }
  Device device() const override { return Device::cuda; }
  std::string device_description() const override {
    return fmt::format("CUDA device {}: {} ({} SMs, {:.0f} MB L2, sm_{}{}), {}, {} producer", info_.ordinal,
                       info_.name, info_.sm_count, static_cast<double>(info_.l2_bytes) / 1e6, info_.cc_major,
                       info_.cc_minor, copt_.use_graph ? "graph replay" : "eager launches",
                       producer_.tensor_core ? "tensor-core" : "exact-DAG");
  }
  PlaneState plane_state(int layer) const override { return states_.at(static_cast<std::size_t>(layer)); }
  RangeStats range_stats() const override { return range_; }
  const std::vector<TraceEntry>& trace() const override { return trace_; }
  void clear_trace() override { trace_.clear(); }

  GraphStats stats() const { return stats_; }

 private:
  // Plans every layer's append; nothing is mutated, so a refusal leaves every plane untouched.
  Status plan_all(int position, std::vector<PlaneState>& next, std::vector<int>& slots) const {
    const std::size_t n = static_cast<std::size_t>(g_.n_layers);
    next.resize(n);
    slots.resize(n);
    for (std::size_t l = 0; l < n; ++l) {
      Result<AppendPlan> plan = plan_append(cfgs_[l], states_[l], position);
      if (!plan) return plan.status();
      if (plan->next.capacity > rows_[l])
        return make_error(ErrorCode::internal, "a growing plane outgrew its device rows");
      next[l] = plan->next;
      slots[l] = plan->slot;
    }
    return {};
  }

  // Copies the token's activations into the pinned staging buffers (q only when given: a fill
  // has none). Every layer's rows, layer-major.
  void take_inputs(const TokenIO& io) {
    const std::size_t n = static_cast<std::size_t>(g_.n_layers);
    if (io.q != nullptr) std::memcpy(hq_.get(), io.q, n * q_elems_ * sizeof(float));
    std::memcpy(hk_.get(), io.k, n * kv_elems_ * sizeof(float));
    std::memcpy(hv_.get(), io.v, n * kv_elems_ * sizeof(float));
  }

  Status upload_kv() {
    const std::size_t kv = static_cast<std::size_t>(g_.n_layers) * kv_elems_ * sizeof(float);
    LADDER_TRY(cuda_status(cudaMemcpyAsync(dk_.get(), hk_.get(), kv, cudaMemcpyHostToDevice, stream_), "copying k"));
    return cuda_status(cudaMemcpyAsync(dv_.get(), hv_.get(), kv, cudaMemcpyHostToDevice, stream_), "copying v");
  }

  // The whole step on stream_: inputs in, every layer's route, outputs out. Indirect (graph)
  // form when `dev` is the device step array.
  Status enqueue_step(const RouteLaunch* dev) {
    const std::size_t n = static_cast<std::size_t>(g_.n_layers);
    if (dev != nullptr)
      LADDER_TRY(cuda_status(cudaMemcpyAsync(d_steps_.get(), h_steps_.get(), n * sizeof(RouteLaunch),
                                             cudaMemcpyHostToDevice, stream_),
                             "copying the step state"));
    LADDER_TRY(cuda_status(
        cudaMemcpyAsync(dq_.get(), hq_.get(), n * q_elems_ * sizeof(float), cudaMemcpyHostToDevice, stream_),
        "copying q"));
    LADDER_TRY(upload_kv());
    for (std::size_t l = 0; l < n; ++l) {
      const int max_padded = (cfgs_[l].capacity + kBlockTokens - 1) / kBlockTokens * kBlockTokens;
      LADDER_TRY(cuda_detail::enqueue_route(h_steps_.get()[l], dev != nullptr ? dev + l : nullptr, producer_, max_padded,
                                            stream_));
    }
    return cuda_status(
        cudaMemcpyAsync(hout_.get(), dout_.get(), n * q_elems_ * sizeof(float), cudaMemcpyDeviceToHost, stream_),
        "copying the outputs");
  }

  Status graph_for(const std::vector<Route>& routes, cudaGraphExec_t& exec) {
    auto it = graphs_.find(routes);
    if (it != graphs_.end()) {
      ++stats_.replays;
      exec = it->second;
      return {};
    }
    cudaGraph_t graph = nullptr;
    LADDER_TRY(cuda_status(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "beginning a capture"));
    const Status enq = enqueue_step(d_steps_.get());
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    if (!enq.ok()) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      return enq;
    }
    LADDER_TRY(cuda_status(end, "ending the capture"));
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    LADDER_TRY(cuda_status(inst, "instantiating the step graph"));
    graphs_.emplace(routes, exec);
    ++stats_.captures;
    return {};
  }

  Geometry g_;
  EngineOptions opt_;
  CudaEngineOptions copt_;
  HeadShape shape_;
  DeviceInfo info_;
  cuda_detail::ProducerChoice producer_;
  cudaStream_t stream_ = nullptr;
  std::vector<PlaneConfig> cfgs_;
  std::vector<PlaneState> states_;
  std::vector<int> rows_;
  std::vector<DeviceArray<std::uint16_t>> k_, v_;
  std::size_t q_elems_ = 0, kv_elems_ = 0;
  DeviceArray<float> dq_, dk_, dv_, dout_;
  PinnedArray<float> hq_, hk_, hv_, hout_;
  PinnedArray<RouteLaunch> h_steps_;
  DeviceArray<RouteLaunch> d_steps_;
  DeviceWorkspace ws_;
  std::map<std::vector<Route>, cudaGraphExec_t> graphs_;
  std::vector<TraceEntry> trace_;
  GraphStats stats_;
  RangeStats range_;
};

bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "0") == 0;
}

}  // namespace

Result<std::unique_ptr<Engine>> create_engine(const Geometry& g, const EngineOptions& opt,
                                              const CudaEngineOptions& copt) {
  LADDER_TRY(g.validate());
  auto e = std::make_unique<CudaEngine>(g, opt, copt);
  LADDER_TRY(e->init());
  return std::unique_ptr<Engine>(std::move(e));
}

GraphStats graph_stats(const Engine& engine) {
  const auto* e = dynamic_cast<const CudaEngine*>(&engine);
  return e != nullptr ? e->stats() : GraphStats{};
}

}  // namespace cuda

namespace detail {

Result<std::unique_ptr<Engine>> create_cuda_engine(const Geometry& g, const EngineOptions& opt) {
  cuda::CudaEngineOptions copt;
  copt.use_graph = !cuda::env_off("LADDER_CUDA_GRAPH");
  return cuda::create_engine(g, opt, copt);
}

}  // namespace detail
}  // namespace ladder
