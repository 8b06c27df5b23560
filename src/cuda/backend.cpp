// The CUDA device behind the engine (device_api.hpp). Each sequence owns its planes and its
// scratch; the backend owns one stream, the batch's staging buffers and the step graphs.
//
// E3, one launch per layer and kernel family for the whole call: the sequences of a call are
// slots z = 0..B-1 of a batch padded to a power-of-two bucket. The host plans every (slot,
// layer) into a pinned RouteLaunch array [bucket][n_layers] (planes, positions, routes, slot
// activations: everything that varies), and each layer's kernels run with grid z = bucket,
// slice z reading slot z's struct (kernels.hpp, BatchSpan); an entry of another route, or an
// empty slot, skips the kernel. Which kernels a layer launches depends on the routes in it
// (dispatch.hpp, LayerKernels), not on the sequences or their positions, so a step graph is
// captured once per (bucket, per-layer kernel set) and replayed for every later call with that
// shape, whatever sequences fill the slots and however deep they are: a change of batch
// composition needs no recapture. Each sequence's bits depend only on its own plane and
// visible length (P4): slots never share partials, rows or counters.
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

using cuda_detail::BatchSpan;
using cuda_detail::cuda_status;
using cuda_detail::DeviceArray;
using cuda_detail::LayerKernels;
using cuda_detail::RouteLaunch;

// Pinned host memory (the graph's copy nodes read and write it at replay time).
template <class T>
class PinnedArray {
 public:
  PinnedArray() = default;
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  ~PinnedArray() { reset(); }
  void reset() {
    if (p_ != nullptr) cudaFreeHost(p_);
    p_ = nullptr;
    n_ = 0;
  }
  Status allocate(std::size_t n, const char* what) {
    reset();
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
};

// One batch slot's activations in device memory, every layer: q and out [n_layers][n_heads][128],
// k and v [n_layers][n_kv_heads][128].
struct SlotIO {
  float* q = nullptr;
  float* k = nullptr;
  float* v = nullptr;
  float* out = nullptr;
};

class CudaSequence final : public DeviceSequence {
 public:
  ~CudaSequence() override { free_workspace(ws_); }

  Status init(const DeviceContext& ctx, const std::vector<PlaneConfig>& cfgs, cudaStream_t stream) {
    const Geometry& g = ctx.g;
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
      LADDER_TRY(cuda_status(cuda_detail::launch_poison(k_[l].get(), static_cast<std::int64_t>(elems), g.kv_dtype, stream),
                             "poisoning a plane"));
      LADDER_TRY(cuda_status(cuda_detail::launch_poison(v_[l].get(), static_cast<std::int64_t>(elems), g.kv_dtype, stream),
                             "poisoning a plane"));
    }
    Result<DeviceWorkspace> ws = allocate_workspace(max_scratch_needs(g));
    if (!ws) return ws.status();
    ws_ = *ws;
    return cuda_status(cudaStreamSynchronize(stream), "initialising a sequence's planes");
  }

  // Nothing to allocate (growing planes hold max_context rows); the plan must fit the rows.
  Status reserve(const SequenceStep& step) override {
    for (std::size_t l = 0; l < cfgs_.size(); ++l)
      if (step.layers[l].next.capacity > rows_[l])
        return make_error(ErrorCode::internal, fmt::format("layer {}: a growing plane outgrew its device rows", l));
    return {};
  }
  void release() override {}

  // Every layer's launch structs for `step` with its activations in slot `io`: out[0..n_layers).
  Status plan(const DeviceContext& ctx, const SequenceStep& step, const SlotIO& io, RouteLaunch* out) const {
    const std::size_t q_elems = static_cast<std::size_t>(ctx.g.n_heads) * ctx.g.head_dim;
    const std::size_t kv_elems = static_cast<std::size_t>(ctx.g.n_kv_heads) * ctx.g.head_dim;
    for (std::size_t l = 0; l < cfgs_.size(); ++l) {
      const LayerStep& ls = step.layers[l];
      const DevicePlane plane{cfgs_[l], ls.next, k_[l].get(), v_[l].get(), rows_[l]};
      const DeviceLayerIO lio{io.q + l * q_elems, io.k + l * kv_elems, io.v + l * kv_elems, io.out + l * q_elems};
      const Status planned =
          cuda_detail::plan_route(ls.route, plane, step.position, ls.slot, ctx.shape, lio, ws_, ctx.producer, out[l]);
      if (!planned.ok()) return make_error(planned.code(), fmt::format("layer {}: {}", l, planned.message()));
    }
    return {};
  }

  // A fill's launch structs: only the store of each layer's row.
  void plan_fill(const DeviceContext& ctx, const SequenceStep& step, const SlotIO& io, RouteLaunch* out) const {
    const std::size_t kv_elems = static_cast<std::size_t>(ctx.g.n_kv_heads) * ctx.g.head_dim;
    for (std::size_t l = 0; l < cfgs_.size(); ++l) {
      RouteLaunch e = cuda_detail::empty_launch(ctx.shape);
      StoreParams& sp = e.store;
      sp.kv_dtype = cfgs_[l].kv_dtype;
      sp.n_kv_heads = ctx.g.n_kv_heads;
      sp.head_dim = ctx.g.head_dim;
      sp.k = io.k + l * kv_elems;
      sp.v = io.v + l * kv_elems;
      sp.plane_k = k_[l].get();
      sp.plane_v = v_[l].get();
      sp.strides = plane_strides(cfgs_[l].kind, rows_[l], ctx.g.n_kv_heads, ctx.g.head_dim);
      sp.slot = step.layers[l].slot;
      out[l] = e;
    }
  }

  // The largest padded row count a staging copy of layer l may write (the capture's grid bound).
  int max_padded_rows(std::size_t l) const {
    return (cfgs_[l].capacity + kBlockTokens - 1) / kBlockTokens * kBlockTokens;
  }
  // The most rows layer l can make visible: the window (a ring) or the max context.
  int max_visible(std::size_t l) const {
    const PlaneConfig& c = cfgs_[l];
    return c.window > 0 && c.window < c.max_context ? c.window : c.max_context;
  }

 private:
  std::vector<PlaneConfig> cfgs_;
  std::vector<int> rows_;
  std::vector<DeviceArray<KvWord>> k_, v_;
  DeviceWorkspace ws_;
};

// The shape of a captured step: the bucket and each layer's kernel set.
struct StepKey {
  int bucket = 0;
  std::vector<LayerKernels> layers;
  auto operator<=>(const StepKey&) const = default;
};

// Slots a call of `n` sequences runs in: the next power of two, so a handful of buckets (and
// graphs) covers every batch size.
int bucket_for(int n) {
  int b = 1;
  while (b < n) b *= 2;
  return b;
}

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend(const Geometry& g, const CudaEngineOptions& copt) {
    ctx_.g = g;
    ctx_.copt = copt;
  }

  ~CudaBackend() override {
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
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
    q_elems_ = static_cast<std::size_t>(ctx_.g.n_layers) * ctx_.g.n_heads * ctx_.g.head_dim;
    kv_elems_ = static_cast<std::size_t>(ctx_.g.n_layers) * ctx_.g.n_kv_heads * ctx_.g.head_dim;
    return cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream");
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
    auto s = std::make_unique<CudaSequence>();
    LADDER_TRY(s->init(ctx_, cfgs, stream_));
    return std::unique_ptr<DeviceSequence>(std::move(s));
  }

  Status run(std::span<DeviceSequence* const> seqs, std::span<const SequenceStep> steps) override {
    const int n = static_cast<int>(steps.size());
    const bool attend = steps[0].attend;
    const int bucket = bucket_for(n);
    LADDER_TRY(ensure_slots(bucket));
    const std::size_t layers = static_cast<std::size_t>(ctx_.g.n_layers);
    StepKey key;
    key.bucket = bucket;
    key.layers.resize(layers);
    for (int z = 0; z < bucket; ++z) {
      RouteLaunch* entries = h_steps_.get() + static_cast<std::size_t>(z) * layers;
      if (z >= n) {
        for (std::size_t l = 0; l < layers; ++l) entries[l] = cuda_detail::empty_launch(ctx_.shape);
        continue;
      }
      const SequenceStep& st = steps[static_cast<std::size_t>(z)];
      const auto& seq = static_cast<const CudaSequence&>(*seqs[static_cast<std::size_t>(z)]);
      take_inputs(z, st.io);
      if (!attend) {
        seq.plan_fill(ctx_, st, slot_io(z), entries);
        continue;
      }
      LADDER_TRY(seq.plan(ctx_, st, slot_io(z), entries));
      for (std::size_t l = 0; l < layers; ++l) {
        LayerKernels k = cuda_detail::layer_kernels(entries[l], ctx_.producer, seq.max_padded_rows(l));
        k.max_visible = seq.max_visible(l);
        key.layers[l] = cuda_detail::merge(key.layers[l], k);
      }
    }
    if (!attend) {
      LADDER_TRY(enqueue_fill(bucket));
    } else if (ctx_.copt.use_graph) {
      cudaGraphExec_t exec = nullptr;
      LADDER_TRY(graph_for(key, exec));
      LADDER_TRY(cuda_status(cudaGraphLaunch(exec, stream_), "replaying the step graph"));
    } else {
      LADDER_TRY(enqueue_step(key));
    }
    LADDER_TRY(cuda_status(cudaStreamSynchronize(stream_), attend ? "running the step" : "storing the rows"));
    if (attend)
      for (int z = 0; z < n; ++z)
        std::memcpy(steps[static_cast<std::size_t>(z)].io.out, h_out_.get() + static_cast<std::size_t>(z) * q_elems_,
                    q_elems_ * sizeof(float));
    return {};
  }

 private:
  SlotIO slot_io(int z) const {
    const std::size_t zq = static_cast<std::size_t>(z) * q_elems_, zkv = static_cast<std::size_t>(z) * kv_elems_;
    return {d_q_.get() + zq, d_k_.get() + zkv, d_v_.get() + zkv, d_out_.get() + zq};
  }

  // Staging for `bucket` slots. Growing it moves every buffer a captured graph names, so the
  // graphs go with the old buffers.
  Status ensure_slots(int bucket) {
    if (bucket <= slots_) return {};
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    graphs_.clear();
    slots_ = 0;
    const std::size_t b = static_cast<std::size_t>(bucket);
    LADDER_TRY(h_q_.allocate(b * q_elems_, "q"));
    LADDER_TRY(h_k_.allocate(b * kv_elems_, "k"));
    LADDER_TRY(h_v_.allocate(b * kv_elems_, "v"));
    LADDER_TRY(h_out_.allocate(b * q_elems_, "out"));
    LADDER_TRY(d_q_.allocate(b * q_elems_, "q"));
    LADDER_TRY(d_k_.allocate(b * kv_elems_, "k"));
    LADDER_TRY(d_v_.allocate(b * kv_elems_, "v"));
    LADDER_TRY(d_out_.allocate(b * q_elems_, "out"));
    const std::size_t entries = b * static_cast<std::size_t>(ctx_.g.n_layers);
    LADDER_TRY(h_steps_.allocate(entries, "step state"));
    LADDER_TRY(d_steps_.allocate(entries, "step state"));
    slots_ = bucket;
    return {};
  }

  // Slot z's activations into the pinned staging (q only when given: a fill has none).
  void take_inputs(int z, const TokenIO& io) {
    const std::size_t zq = static_cast<std::size_t>(z) * q_elems_, zkv = static_cast<std::size_t>(z) * kv_elems_;
    if (io.q != nullptr) std::memcpy(h_q_.get() + zq, io.q, q_elems_ * sizeof(float));
    std::memcpy(h_k_.get() + zkv, io.k, kv_elems_ * sizeof(float));
    std::memcpy(h_v_.get() + zkv, io.v, kv_elems_ * sizeof(float));
  }

  BatchSpan span(int bucket) const {
    return BatchSpan{static_cast<std::size_t>(ctx_.g.n_layers) * sizeof(RouteLaunch), bucket};
  }

  Status copy_in(int bucket, bool with_q) {
    const std::size_t b = static_cast<std::size_t>(bucket);
    const std::size_t entries = b * static_cast<std::size_t>(ctx_.g.n_layers);
    LADDER_TRY(cuda_status(
        cudaMemcpyAsync(d_steps_.get(), h_steps_.get(), entries * sizeof(RouteLaunch), cudaMemcpyHostToDevice, stream_),
        "copying the step state"));
    if (with_q)
      LADDER_TRY(cuda_status(
          cudaMemcpyAsync(d_q_.get(), h_q_.get(), b * q_elems_ * sizeof(float), cudaMemcpyHostToDevice, stream_),
          "copying q"));
    LADDER_TRY(cuda_status(
        cudaMemcpyAsync(d_k_.get(), h_k_.get(), b * kv_elems_ * sizeof(float), cudaMemcpyHostToDevice, stream_),
        "copying k"));
    return cuda_status(
        cudaMemcpyAsync(d_v_.get(), h_v_.get(), b * kv_elems_ * sizeof(float), cudaMemcpyHostToDevice, stream_),
        "copying v");
  }

  // A fill: every slot's row stored, one store launch per layer.
  Status enqueue_fill(int bucket) {
    LADDER_TRY(copy_in(bucket, false));
    cuda_detail::clear_stale_error();
    StoreParams grid;
    grid.kv_dtype = ctx_.g.kv_dtype;
    grid.n_kv_heads = ctx_.g.n_kv_heads;
    grid.head_dim = ctx_.g.head_dim;
    for (int l = 0; l < ctx_.g.n_layers; ++l)
      LADDER_TRY(cuda_status(cuda_detail::launch_store(grid, &d_steps_.get()[l].store, stream_, span(bucket)),
                             "launching a store"));
    return {};
  }

  // The whole step on stream_: inputs in, every layer's kernels over the bucket, outputs out.
  Status enqueue_step(const StepKey& key) {
    LADDER_TRY(copy_in(key.bucket, true));
    for (std::size_t l = 0; l < key.layers.size(); ++l)
      LADDER_TRY(cuda_detail::enqueue_layer_batch(key.layers[l], ctx_.shape, d_steps_.get() + l, span(key.bucket),
                                                  ctx_.producer, stream_));
    const std::size_t b = static_cast<std::size_t>(key.bucket);
    return cuda_status(
        cudaMemcpyAsync(h_out_.get(), d_out_.get(), b * q_elems_ * sizeof(float), cudaMemcpyDeviceToHost, stream_),
        "copying the outputs");
  }

  Status graph_for(const StepKey& key, cudaGraphExec_t& exec) {
    auto it = graphs_.find(key);
    if (it != graphs_.end()) {
      ++stats_.replays;
      exec = it->second;
      return {};
    }
    cudaGraph_t graph = nullptr;
    LADDER_TRY(cuda_status(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "beginning a capture"));
    const Status enq = enqueue_step(key);
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    if (!enq.ok()) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      return enq;
    }
    LADDER_TRY(cuda_status(end, "ending the capture"));
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    LADDER_TRY(cuda_status(inst, "instantiating the step graph"));
    graphs_.emplace(key, exec);
    ++stats_.captures;
    return {};
  }

  DeviceContext ctx_;
  DeviceInfo info_;
  DeviceStats stats_;
  cudaStream_t stream_ = nullptr;
  std::size_t q_elems_ = 0, kv_elems_ = 0;  // one slot, every layer
  int slots_ = 0;
  PinnedArray<float> h_q_, h_k_, h_v_, h_out_;
  DeviceArray<float> d_q_, d_k_, d_v_, d_out_;
  PinnedArray<RouteLaunch> h_steps_;  // [slots][n_layers]
  DeviceArray<RouteLaunch> d_steps_;
  std::map<StepKey, cudaGraphExec_t> graphs_;
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
