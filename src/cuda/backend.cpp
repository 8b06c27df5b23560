// The CUDA device behind the engine (device_api.hpp): per-sequence planes in device memory, and
// each sequence's per-token step captured once per route mix as a CUDA graph.
//
// Step state: every kernel of a captured step reads its parameter struct from the sequence's
// `d_steps_` (one RouteLaunch per layer, device memory). Each token the host fills the pinned
// mirror `h_steps_` (positions, origins, slot, visible, schedule — everything that varies) and
// the graph's first node copies it to the device; grids are sized for the worst case and idle
// blocks exit. So a cached graph serves every token whose per-layer routes are the same; a new
// route mix is captured once and cached (SWA layers switch between splitk and vec as the ring
// fills, so a handful of graphs covers a whole run). The sequences of a call run on their own
// streams: all are enqueued, then all are awaited.
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
#include "ladder/cuda/cuda_backend.hpp"

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

// What every sequence of one device shares: the geometry, the head shape and the launch choices.
struct DeviceContext {
  Geometry g;
  HeadShape shape;
  CudaEngineOptions copt;
  cuda_detail::ProducerChoice producer;
  DeviceStats* stats = nullptr;
};

class CudaSequence final : public DeviceSequence {
 public:
  explicit CudaSequence(const DeviceContext& ctx) : ctx_(ctx) {}

  ~CudaSequence() override {
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    free_workspace(ws_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status init(const std::vector<PlaneConfig>& cfgs) {
    const Geometry& g = ctx_.g;
    LADDER_TRY(cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream"));
    cfgs_ = cfgs;
    const std::size_t n = cfgs_.size();
    rows_.resize(n);
    k_.resize(n);
    v_.resize(n);
    for (std::size_t l = 0; l < n; ++l) {
      // Growing planes get max_context rows up front: no device copy when their state grows.
      rows_[l] = cfgs_[l].kind == PlaneKind::growing ? cfgs_[l].max_context : cfgs_[l].capacity;
      const std::size_t elems = static_cast<std::size_t>(rows_[l]) * g.n_kv_heads * g.head_dim;
      LADDER_TRY(k_[l].allocate(elems, "a plane's K rows"));
      LADDER_TRY(v_[l].allocate(elems, "a plane's V rows"));
      cuda_detail::clear_stale_error();
      LADDER_TRY(cuda_status(cuda_detail::launch_poison_halfs(k_[l].get(), static_cast<std::int64_t>(elems), stream_),
                             "poisoning a plane"));
      LADDER_TRY(cuda_status(cuda_detail::launch_poison_halfs(v_[l].get(), static_cast<std::int64_t>(elems), stream_),
                             "poisoning a plane"));
    }
    q_elems_ = static_cast<std::size_t>(g.n_heads) * g.head_dim;
    kv_elems_ = static_cast<std::size_t>(g.n_kv_heads) * g.head_dim;
    LADDER_TRY(dq_.allocate(n * q_elems_, "q"));
    LADDER_TRY(dk_.allocate(n * kv_elems_, "k"));
    LADDER_TRY(dv_.allocate(n * kv_elems_, "v"));
    LADDER_TRY(dout_.allocate(n * q_elems_, "out"));
    LADDER_TRY(hq_.allocate(n * q_elems_, "q"));
    LADDER_TRY(hk_.allocate(n * kv_elems_, "k"));
    LADDER_TRY(hv_.allocate(n * kv_elems_, "v"));
    LADDER_TRY(hout_.allocate(n * q_elems_, "out"));
    LADDER_TRY(h_steps_.allocate(n, "step state"));
    LADDER_TRY(d_steps_.allocate(n, "step state"));
    Result<DeviceWorkspace> ws = allocate_workspace(max_scratch_needs(g));
    if (!ws) return ws.status();
    ws_ = *ws;
    return cuda_status(cudaStreamSynchronize(stream_), "initialising a sequence's planes");
  }

  // Nothing to allocate (growing planes hold max_context rows); the plan must fit the rows.
  Status reserve(const SequenceStep& step) override {
    for (std::size_t l = 0; l < cfgs_.size(); ++l)
      if (step.layers[l].next.capacity > rows_[l])
        return make_error(ErrorCode::internal, fmt::format("layer {}: a growing plane outgrew its device rows", l));
    return {};
  }
  void release() override {}

  // Enqueues the step on this sequence's stream (the outputs land in pinned memory).
  Status enqueue(const SequenceStep& step) {
    take_inputs(step.io);
    if (!step.attend) return enqueue_fill(step);
    const std::size_t n = cfgs_.size();
    std::vector<Route> routes(n);
    for (std::size_t l = 0; l < n; ++l) {
      const LayerStep& ls = step.layers[l];
      routes[l] = ls.route;
      DevicePlane plane{cfgs_[l], ls.next, k_[l].get(), v_[l].get(), rows_[l]};
      DeviceLayerIO lio{dq_.get() + l * q_elems_, dk_.get() + l * kv_elems_, dv_.get() + l * kv_elems_,
                        dout_.get() + l * q_elems_};
      const Status planned = cuda_detail::plan_route(ls.route, plane, step.position, ls.slot, ctx_.shape, lio, ws_,
                                                     ctx_.producer, h_steps_.get()[l]);
      if (!planned.ok()) return make_error(planned.code(), fmt::format("layer {}: {}", l, planned.message()));
    }
    if (ctx_.copt.use_graph) {
      cudaGraphExec_t exec = nullptr;
      LADDER_TRY(graph_for(routes, exec));
      return cuda_status(cudaGraphLaunch(exec, stream_), "replaying the step graph");
    }
    return enqueue_step(nullptr);
  }

  // Waits for the step and hands its outputs over.
  Status finish(const SequenceStep& step) {
    LADDER_TRY(cuda_status(cudaStreamSynchronize(stream_), step.attend ? "running the step" : "storing the rows"));
    if (step.attend) std::memcpy(step.io.out, hout_.get(), cfgs_.size() * q_elems_ * sizeof(float));
    return {};
  }

 private:
  Status enqueue_fill(const SequenceStep& step) {
    LADDER_TRY(upload_kv());
    cuda_detail::clear_stale_error();
    for (std::size_t l = 0; l < cfgs_.size(); ++l) {
      StoreParams sp;
      sp.n_kv_heads = ctx_.g.n_kv_heads;
      sp.head_dim = ctx_.g.head_dim;
      sp.k = dk_.get() + l * kv_elems_;
      sp.v = dv_.get() + l * kv_elems_;
      sp.plane_k = k_[l].get();
      sp.plane_v = v_[l].get();
      sp.strides = plane_strides(cfgs_[l].kind, rows_[l], ctx_.g.n_kv_heads, ctx_.g.head_dim);
      sp.slot = step.layers[l].slot;
      LADDER_TRY(cuda_status(cuda_detail::launch_store(sp, nullptr, stream_), "launching a store"));
    }
    return {};
  }

  // Copies the token's activations into the pinned staging buffers (q only when given: a fill
  // has none). Every layer's rows, layer-major.
  void take_inputs(const TokenIO& io) {
    const std::size_t n = cfgs_.size();
    if (io.q != nullptr) std::memcpy(hq_.get(), io.q, n * q_elems_ * sizeof(float));
    std::memcpy(hk_.get(), io.k, n * kv_elems_ * sizeof(float));
    std::memcpy(hv_.get(), io.v, n * kv_elems_ * sizeof(float));
  }

  Status upload_kv() {
    const std::size_t kv = cfgs_.size() * kv_elems_ * sizeof(float);
    LADDER_TRY(cuda_status(cudaMemcpyAsync(dk_.get(), hk_.get(), kv, cudaMemcpyHostToDevice, stream_), "copying k"));
    return cuda_status(cudaMemcpyAsync(dv_.get(), hv_.get(), kv, cudaMemcpyHostToDevice, stream_), "copying v");
  }

  // The whole step on stream_: inputs in, every layer's route, outputs out. Indirect (graph)
  // form when `dev` is the device step array.
  Status enqueue_step(const RouteLaunch* dev) {
    const std::size_t n = cfgs_.size();
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
      LADDER_TRY(cuda_detail::enqueue_route(h_steps_.get()[l], dev != nullptr ? dev + l : nullptr, ctx_.producer,
                                            max_padded, stream_));
    }
    return cuda_status(
        cudaMemcpyAsync(hout_.get(), dout_.get(), n * q_elems_ * sizeof(float), cudaMemcpyDeviceToHost, stream_),
        "copying the outputs");
  }

  Status graph_for(const std::vector<Route>& routes, cudaGraphExec_t& exec) {
    auto it = graphs_.find(routes);
    if (it != graphs_.end()) {
      ++ctx_.stats->replays;
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
    ++ctx_.stats->captures;
    return {};
  }

  const DeviceContext& ctx_;
  cudaStream_t stream_ = nullptr;
  std::vector<PlaneConfig> cfgs_;
  std::vector<int> rows_;
  std::vector<DeviceArray<std::uint16_t>> k_, v_;
  std::size_t q_elems_ = 0, kv_elems_ = 0;
  DeviceArray<float> dq_, dk_, dv_, dout_;
  PinnedArray<float> hq_, hk_, hv_, hout_;
  PinnedArray<RouteLaunch> h_steps_;
  DeviceArray<RouteLaunch> d_steps_;
  DeviceWorkspace ws_;
  std::map<std::vector<Route>, cudaGraphExec_t> graphs_;
};

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend(const Geometry& g, const CudaEngineOptions& copt) {
    ctx_.g = g;
    ctx_.copt = copt;
    ctx_.stats = &stats_;
  }

  Status init() {
    LADDER_TRY(cuda_detail::require_device());
    HeadShape& shape = ctx_.shape;
    shape.n_heads = ctx_.g.n_heads;
    shape.n_kv_heads = ctx_.g.n_kv_heads;
    shape.head_dim = ctx_.g.head_dim;
    shape.scale = ctx_.g.scale();
    LADDER_TRY(check_head_shape(shape));
    ctx_.producer = cuda_detail::resolve_producer_choice(shape, ctx_.copt.tuning);
    Result<DeviceInfo> info = device_info();
    if (!info) return info.status();
    info_ = *info;
    return {};
  }

  Device device() const override { return Device::cuda; }
  std::string description() const override {
    return fmt::format("CUDA device {}: {} ({} SMs, {:.0f} MB L2, sm_{}{}), {}, {} producer", info_.ordinal,
                       info_.name, info_.sm_count, static_cast<double>(info_.l2_bytes) / 1e6, info_.cc_major,
                       info_.cc_minor, ctx_.copt.use_graph ? "graph replay" : "eager launches",
                       ctx_.producer.tensor_core ? "tensor-core" : "exact-DAG");
  }
  DeviceStats stats() const override { return stats_; }

  Result<std::unique_ptr<DeviceSequence>> create_sequence(const std::vector<PlaneConfig>& cfgs) override {
    auto s = std::make_unique<CudaSequence>(ctx_);
    LADDER_TRY(s->init(cfgs));
    return std::unique_ptr<DeviceSequence>(std::move(s));
  }

  Status run(std::span<DeviceSequence* const> seqs, std::span<const SequenceStep> steps) override {
    Status first;
    std::size_t enqueued = 0;
    for (; enqueued < seqs.size(); ++enqueued) {
      first = static_cast<CudaSequence&>(*seqs[enqueued]).enqueue(steps[enqueued]);
      if (!first.ok()) break;
    }
    // Every enqueued step is awaited, even after a failure, so no work outlives the call.
    for (std::size_t i = 0; i < enqueued; ++i) {
      const Status done = static_cast<CudaSequence&>(*seqs[i]).finish(steps[i]);
      if (first.ok() && !done.ok()) first = done;
    }
    return first;
  }

 private:
  DeviceContext ctx_;
  DeviceInfo info_;
  DeviceStats stats_;
};

bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "0") == 0;
}

}  // namespace

CudaEngineOptions default_engine_options() {
  CudaEngineOptions copt;
  copt.use_graph = !env_off("LADDER_CUDA_GRAPH");
  return copt;
}

Result<std::unique_ptr<DeviceBackend>> create_backend(const Geometry& g, const CudaEngineOptions& copt) {
  LADDER_TRY(g.validate());
  auto b = std::make_unique<CudaBackend>(g, copt);
  LADDER_TRY(b->init());
  return std::unique_ptr<DeviceBackend>(std::move(b));
}

}  // namespace cuda
}  // namespace ladder
