// The CUDA device behind the engine (device_api.hpp). Each sequence owns its planes and its
// scratch; the backend owns two streams (the second for the input count's branch, below), the
// batch's staging buffers and the step graphs.
//
// E3, one launch per layer and kernel family for the whole call: the sequences of a call are
// slots z = 0..B-1 of a batch padded to a power-of-two bucket. The host plans every (slot,
// layer) of the call (every layer of a token, or the one layer of Engine::encode_layer) into a
// pinned RouteLaunch array [bucket][call layers] (planes, positions, routes, slot activations:
// everything that varies), and each layer's kernels run with grid z = bucket,
// slice z reading slot z's struct (kernels.hpp, BatchSpan); an entry of another route, or an
// empty slot, skips the kernel. Which kernels a layer launches depends on the routes in it
// (dispatch.hpp, LayerKernels), not on the sequences or their positions, so a step graph is
// captured once per (bucket, per-layer kernel set) and replayed for every later call with that
// shape, whatever sequences fill the slots and however deep they are: a change of batch
// composition needs no recapture. Each sequence's bits depend only on its own plane and
// visible length (P4): slots never share partials, rows or counters.
//
// A call's GPU work, in order: one copy of the call state in (and, for host memory, the staged
// activations), then every layer's kernels; N1's input count and its copy back run beside them
// on a branch that joins at the end, since only the host reads the counts.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <initializer_list>
#include <map>
#include <new>
#include <utility>
#include <vector>

#include "cuda/device_memory.hpp"
#include "cuda/dispatch.hpp"
#include "cuda/kernels.hpp"
#include "ladder/cuda/cuda_backend.hpp"
#include "ladder/fault_injection.hpp"

namespace ladder {
namespace cuda {
namespace {

using cuda_detail::BatchSpan;
using cuda_detail::cuda_status;
using cuda_detail::DeviceArray;
using cuda_detail::EventHandle;
using cuda_detail::GraphExecHandle;
using cuda_detail::GraphHandle;
using cuda_detail::LayerKernels;
using cuda_detail::InputCount;
using cuda_detail::kInputArrays;
using cuda_detail::RouteLaunch;
using cuda_detail::SlotInputs;
using cuda_detail::StreamHandle;

// Pinned host memory (the graph's copy nodes, the state fetch and the input count read and write
// it at replay time). HostMapping::mapped also maps it into the device's address space:
// device_view() is the pointer a kernel reads or writes it through.
enum class HostMapping { unmapped, mapped };

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
    dev_ = nullptr;
    n_ = 0;
  }
  Status allocate(std::size_t n, const char* what, HostMapping mapping = HostMapping::unmapped) {
    reset();
    void* raw = nullptr;
    const unsigned flags = mapping == HostMapping::mapped ? cudaHostAllocMapped : cudaHostAllocDefault;
    LADDER_TRY(cuda_status(cudaHostAlloc(&raw, std::max<std::size_t>(n, 1) * sizeof(T), flags),
                           fmt::format("allocating pinned host memory for {}", what)));
    p_ = static_cast<T*>(raw);
    n_ = n;
    if (mapping == HostMapping::mapped) {
      void* dev = nullptr;
      const Status mapped = cuda_status(cudaHostGetDevicePointer(&dev, raw, 0),
                                        fmt::format("mapping pinned host memory for {}", what));
      if (!mapped.ok()) {
        reset();
        return mapped;
      }
      dev_ = static_cast<T*>(dev);
    }
    return {};
  }
  T* get() const { return p_; }
  T* device_view() const { return dev_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  T* dev_ = nullptr;
  std::size_t n_ = 0;
};

// What every sequence of one device shares: the geometry, the head shape and the launch choices.
struct DeviceContext {
  Geometry g;
  HeadShape shape;
  CudaEngineOptions copt;
  cuda_detail::ProducerChoice producer;
};

// One batch slot's activations in device memory, the call's layers: q and out
// [layers][n_heads][128], k and v [layers][n_kv_heads][128]. The backend's staging for host-memory calls, the caller's
// own buffers for device-memory calls.
struct SlotIO {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
};

class CudaSequence final : public DeviceSequence {
 public:
  // Every buffer first (each one a fault-injection point, ladder/fault_injection.hpp), then the
  // poison: a failed allocation returns before anything was queued on the stream.
  Status init(const DeviceContext& ctx, const std::vector<PlaneConfig>& cfgs, cudaStream_t stream) {
    const Geometry& g = ctx.g;
    cfgs_ = cfgs;
    const std::size_t n = cfgs_.size();
    rows_.resize(n);
    k_.resize(n);
    v_.resize(n);
    std::vector<std::size_t> elems(n);
    for (std::size_t l = 0; l < n; ++l) {
      // Growing planes get the most rows they can reach up front (max_context, or a larger
      // initial capacity: PlaneConfig::max_rows): no device copy when their state grows.
      rows_[l] = cfgs_[l].max_rows();
      elems[l] = static_cast<std::size_t>(rows_[l]) * g.n_kv_heads * g.head_dim;
      if (detail::injected_allocation_failure())
        return make_error(ErrorCode::out_of_memory, fmt::format("layer {}: cannot allocate a plane's K rows", l));
      LADDER_TRY(k_[l].allocate(elems[l], "a plane's K rows"));
      if (detail::injected_allocation_failure())
        return make_error(ErrorCode::out_of_memory, fmt::format("layer {}: cannot allocate a plane's V rows", l));
      LADDER_TRY(v_[l].allocate(elems[l], "a plane's V rows"));
    }
    if (detail::injected_allocation_failure())
      return make_error(ErrorCode::out_of_memory, "cannot allocate a sequence's workspace");
    Result<DeviceWorkspace> ws = allocate_workspace(max_scratch_needs(g));
    if (!ws) return ws.status();
    ws_ = std::move(*ws);
    for (std::size_t l = 0; l < n; ++l) {
      const auto count = static_cast<std::int64_t>(elems[l]);
      cuda_detail::clear_stale_error();
      LADDER_TRY(cuda_status(cuda_detail::launch_poison(k_[l].get(), count, g.kv_dtype, stream), "poisoning a plane"));
      LADDER_TRY(cuda_status(cuda_detail::launch_poison(v_[l].get(), count, g.kv_dtype, stream), "poisoning a plane"));
    }
    return cuda_status(cudaStreamSynchronize(stream), "initialising a sequence's planes");
  }

  // Nothing to allocate (growing planes hold their max rows from init on, PlaneConfig::max_rows),
  // so no fault-injection point either; the plan must fit the rows.
  Status reserve(const SequenceStep& step) override {
    for (std::size_t i = 0; i < step.layers.size(); ++i) {
      const std::size_t l = static_cast<std::size_t>(step.first_layer) + i;
      if (step.layers[i].next.capacity > rows_[l])
        return make_error(ErrorCode::internal, fmt::format("layer {}: a growing plane outgrew its device rows", l));
    }
    return {};
  }
  void release() override {}

  Status copy_rows(int layer, const PlaneState& state, bool values, std::span<KvWord> out) const override {
    if (layer < 0 || static_cast<std::size_t>(layer) >= cfgs_.size())
      return make_error(ErrorCode::invalid_argument, fmt::format("layer {} does not exist", layer));
    const std::size_t l = static_cast<std::size_t>(layer);
    const PlaneConfig& c = cfgs_[l];
    const std::size_t d = static_cast<std::size_t>(c.head_dim), heads = static_cast<std::size_t>(c.n_kv_heads);
    const std::size_t cap = static_cast<std::size_t>(state.capacity);
    if (state.capacity <= 0 || state.capacity > rows_[l] || out.size() != cap * heads * d)
      return make_error(ErrorCode::invalid_argument,
                        fmt::format("layer {}: {} words for a plane of {} rows (device rows {})", layer, out.size(),
                                    state.capacity, rows_[l]));
    const DeviceArray<KvWord>& rows = values ? v_[l] : k_[l];
    // Token-major (a ring): the device holds exactly the plane's rows, one block. Head-major (a
    // growing plane, allocated at max_context rows): each head's first `cap` rows.
    if (c.kind == PlaneKind::ring) return rows.download(out.data(), out.size());
    for (std::size_t h = 0; h < heads; ++h)
      LADDER_TRY(rows.download_range(out.data() + h * cap * d, h * static_cast<std::size_t>(rows_[l]) * d, cap * d));
    return {};
  }

  // The launch structs of the step's layers with their activations in slot `io`: out[i] for
  // layer first_layer + i.
  Status plan(const DeviceContext& ctx, const SequenceStep& step, const SlotIO& io, RouteLaunch* out) const {
    const std::size_t q_elems = static_cast<std::size_t>(ctx.g.n_heads) * ctx.g.head_dim;
    const std::size_t kv_elems = static_cast<std::size_t>(ctx.g.n_kv_heads) * ctx.g.head_dim;
    for (std::size_t i = 0; i < step.layers.size(); ++i) {
      const std::size_t l = static_cast<std::size_t>(step.first_layer) + i;
      const LayerStep& ls = step.layers[i];
      const DevicePlane plane{cfgs_[l], ls.next, k_[l].get(), v_[l].get(), rows_[l]};
      const DeviceLayerIO lio{io.q + i * q_elems, io.k + i * kv_elems, io.v + i * kv_elems, io.out + i * q_elems};
      const Status planned =
          cuda_detail::plan_route(ls.route, plane, step.position, ls.slot, ctx.shape, lio, ws_, ctx.producer, out[i]);
      if (!planned.ok()) return make_error(planned.code(), fmt::format("layer {}: {}", l, planned.message()));
    }
    return {};
  }

  // A fill's launch structs: only the store of each of the step's layers' row.
  void plan_fill(const DeviceContext& ctx, const SequenceStep& step, const SlotIO& io, RouteLaunch* out) const {
    const std::size_t kv_elems = static_cast<std::size_t>(ctx.g.n_kv_heads) * ctx.g.head_dim;
    for (std::size_t i = 0; i < step.layers.size(); ++i) {
      const std::size_t l = static_cast<std::size_t>(step.first_layer) + i;
      RouteLaunch e = cuda_detail::empty_launch(ctx.shape);
      StoreParams& sp = e.store;
      sp.kv_dtype = cfgs_[l].kv_dtype;
      sp.n_kv_heads = ctx.g.n_kv_heads;
      sp.head_dim = ctx.g.head_dim;
      sp.k = io.k + i * kv_elems;
      sp.v = io.v + i * kv_elems;
      sp.plane_k = k_[l].get();
      sp.plane_v = v_[l].get();
      sp.strides = plane_strides(cfgs_[l].kind, rows_[l], ctx.g.n_kv_heads, ctx.g.head_dim);
      sp.slot = step.layers[i].slot;
      out[i] = e;
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

// The shape of a captured step: the bucket, where the activations live (host memory adds the
// staging copies) and each layer's kernel set.
struct StepKey {
  int bucket = 0;
  Memory memory = Memory::host;
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
    q_layer_ = static_cast<std::size_t>(ctx_.g.n_heads) * ctx_.g.head_dim;
    kv_layer_ = static_cast<std::size_t>(ctx_.g.n_kv_heads) * ctx_.g.head_dim;
    if (ctx_.copt.time_steps)
      for (EventHandle& e : timing_) LADDER_TRY(cuda_status(cudaEventCreate(e.out()), "creating a timing event"));
    for (EventHandle* e : {&fork_, &join_})
      LADDER_TRY(cuda_status(cudaEventCreateWithFlags(e->out(), cudaEventDisableTiming), "creating an event"));
    LADDER_TRY(cuda_status(cudaStreamCreateWithFlags(side_.out(), cudaStreamNonBlocking), "creating a stream"));
    LADDER_TRY(cuda_status(cudaStreamCreateWithFlags(stream_.out(), cudaStreamNonBlocking), "creating a stream"));
    LADDER_TRY(d_grid_counter_.allocate(1, "grid barrier counter"));
    LADDER_TRY(cuda_status(cudaMemsetAsync(d_grid_counter_.get(), 0, sizeof(unsigned), stream()),
                           "zeroing the grid barrier counter"));
    return cuda_status(cudaStreamSynchronize(stream()), "zeroing the grid barrier counter");
  }

  Device device() const override { return Device::cuda; }
  std::string description() const override {
    return fmt::format("CUDA device {}: {} ({} SMs, {:.0f} MB L2, sm_{}{}), {}, {} producer", info_.ordinal,
                       info_.name, info_.sm_count, static_cast<double>(info_.l2_bytes) / 1e6, info_.cc_major,
                       info_.cc_minor, ctx_.copt.use_graph ? "graph replay" : "eager launches",
                       ctx_.producer.tensor_core ? "tensor-core" : "exact-DAG");
  }
  DeviceStats stats() const override { return stats_; }
  Schedule schedule(int visible) const override { return ctx_.producer.schedule(visible, ctx_.shape); }

  Result<std::unique_ptr<DeviceSequence>> create_sequence(const std::vector<PlaneConfig>& cfgs) override {
    auto s = std::make_unique<CudaSequence>();
    LADDER_TRY(s->init(ctx_, cfgs, stream()));
    return std::unique_ptr<DeviceSequence>(std::move(s));
  }

  bool accepts(Memory) const override { return true; }
  bool counts_inputs() const override { return true; }
  RangeStats last_run_counts() const override { return last_counts_; }

  // The count kernel alone over one step's device-memory activations, then a synchronous read.
  Status check_finite_inputs(const SequenceStep& step) override {
    call_.ready = false;  // it reuses the call state a prepared call filled
    LADDER_TRY(ensure_slots(1));
    call_layers_ = step.layers.size();
    h_inputs()[0] = SlotInputs{step.attend ? step.io.q : nullptr, step.io.k, step.io.v};
    LADDER_TRY(cuda_status(cudaMemcpyAsync(d_call_.get(), h_call_.get(), sizeof(SlotInputs), cudaMemcpyHostToDevice,
                                           stream()),
                           "copying the input pointers"));
    LADDER_TRY(enqueue_counts(1, stream()));
    LADDER_TRY(cuda_status(cudaStreamSynchronize(stream()), "counting the inputs"));
    static constexpr const char* kArrayNames[kInputArrays] = {"q", "k", "v"};
    for (std::size_t i = 0; i < call_layers_; ++i)
      for (int a = 0; a < kInputArrays; ++a) {
        const InputCount c = h_counts_.get()[i * kInputArrays + static_cast<std::size_t>(a)];
        if (c.nonfinite != 0)
          return make_error(ErrorCode::non_finite,
                            fmt::format("layer {}: {} holds {} NaN or Inf value{} (the finite check is on: nothing "
                                        "was appended)",
                                        static_cast<std::size_t>(step.first_layer) + i, kArrayNames[a], c.nonfinite,
                                        c.nonfinite == 1 ? "" : "s"));
      }
    return {};
  }

  // Everything a call does before its first launch, none of it a write to a plane or a launch:
  // the call's key, the staging for its bucket (ensure_slots), the host-memory activations copied
  // into the pinned staging, every slot's launch entries and input pointers in the pinned call
  // state, and in graph replay the step graph (graph_for: a capture records the launches without
  // running them, then cudaGraphInstantiate). Its fault-injection points: one per call (the key),
  // ensure_slots' and graph_for's. A failure leaves every plane as it was, the staging and the
  // graph cache consistent, and nothing for run().
  Status prepare(std::span<DeviceSequence* const> seqs, std::span<const SequenceStep> steps) override {
    call_.ready = false;
    call_.exec = nullptr;
    const int n = static_cast<int>(steps.size());
    const bool attend = steps[0].attend;
    const Memory memory = steps[0].io.memory;
    const int bucket = bucket_for(n);
    // Every step of a call covers the same layers (the engine's one LayerSpan).
    const std::size_t layers = steps[0].layers.size();
    StepKey key;
    try {
      if (detail::injected_allocation_failure()) throw std::bad_alloc();
      key.layers.resize(layers);
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::out_of_memory, "cannot hold a call's step key");
    }
    key.bucket = bucket;
    key.memory = memory;
    LADDER_TRY(ensure_slots(bucket));
    call_layers_ = layers;
    const std::size_t first = static_cast<std::size_t>(steps[0].first_layer);
    for (int z = 0; z < bucket; ++z) {
      RouteLaunch* entries = h_steps() + static_cast<std::size_t>(z) * layers;
      if (z >= n) {
        for (std::size_t l = 0; l < layers; ++l) entries[l] = cuda_detail::empty_launch(ctx_.shape);
        h_inputs()[z] = SlotInputs{};
        continue;
      }
      const SequenceStep& st = steps[static_cast<std::size_t>(z)];
      const auto& seq = static_cast<const CudaSequence&>(*seqs[static_cast<std::size_t>(z)]);
      SlotIO io;
      if (memory == Memory::host) {
        take_inputs(z, st.io);
        io = staging_io(z);
      } else {
        io = SlotIO{st.io.q, st.io.k, st.io.v, st.io.out};
      }
      h_inputs()[z] = SlotInputs{attend ? io.q : nullptr, io.k, io.v};
      if (!attend) {
        seq.plan_fill(ctx_, st, io, entries);
        continue;
      }
      LADDER_TRY(seq.plan(ctx_, st, io, entries));
      for (std::size_t l = 0; l < layers; ++l) {
        LayerKernels k = cuda_detail::layer_kernels(entries[l], ctx_.producer, seq.max_padded_rows(first + l));
        k.max_visible = seq.max_visible(first + l);
        key.layers[l] = cuda_detail::merge(key.layers[l], k);
      }
    }
    cudaGraphExec_t exec = nullptr;
    if (attend && ctx_.copt.use_graph) LADDER_TRY(graph_for(key, exec));
    call_.n = n;
    call_.attend = attend;
    call_.key = std::move(key);
    call_.exec = exec;
    call_.ready = true;
    return {};
  }

  // The prepared call's launches (the step graph's replays, or the eager launches), then the
  // wait for them and the host-memory outputs copied out. The sequences are those prepare() was
  // given: call_ holds everything of them the launches need.
  Status run(std::span<DeviceSequence* const> /*seqs*/, std::span<const SequenceStep> steps) override {
    if (!call_.ready || call_.n != static_cast<int>(steps.size()))
      return make_error(ErrorCode::internal, "the CUDA device ran a call it had not prepared");
    call_.ready = false;
    const int n = call_.n;
    const bool attend = call_.attend;
    const Memory memory = call_.key.memory;
    const int bucket = call_.key.bucket;
    const std::size_t layers = call_layers_;
    const int replays =
        attend && ctx_.copt.use_graph && ctx_.copt.time_steps ? std::max(1, ctx_.copt.replays_per_timed_call) : 1;
    if (ctx_.copt.time_steps) LADDER_TRY(cuda_status(cudaEventRecord(timing_[0].get(), stream()), "timing a call"));
    if (!attend) {
      LADDER_TRY(enqueue_fill(bucket, memory));
    } else if (ctx_.copt.use_graph) {
      for (int r = 0; r < replays; ++r)
        LADDER_TRY(cuda_status(cudaGraphLaunch(call_.exec, stream()), "replaying the step graph"));
    } else {
      LADDER_TRY(enqueue_step(call_.key));
    }
    if (ctx_.copt.time_steps) LADDER_TRY(cuda_status(cudaEventRecord(timing_[1].get(), stream()), "timing a call"));
    LADDER_TRY(cuda_status(cudaStreamSynchronize(stream()), attend ? "running the step" : "storing the rows"));
    if (ctx_.copt.time_steps) {
      float ms = 0.0f;
      LADDER_TRY(cuda_status(cudaEventElapsedTime(&ms, timing_[0].get(), timing_[1].get()), "timing a call"));
      ++stats_.timed_calls;
      stats_.device_us += static_cast<double>(ms) * 1e3 / replays;
    }
    last_counts_ = RangeStats{};
    const InputCount* counts = h_counts_.get();
    for (std::size_t i = 0; i < static_cast<std::size_t>(n) * layers * kInputArrays; ++i) {
      last_counts_.saturated += counts[i].saturated;
      last_counts_.nonfinite += counts[i].nonfinite;
    }
    if (attend && memory == Memory::host)
      for (int z = 0; z < n; ++z)
        std::memcpy(steps[static_cast<std::size_t>(z)].io.out, h_out_.get() + static_cast<std::size_t>(z) * q_call(),
                    q_call() * sizeof(float));
    return {};
  }

 private:
  cudaStream_t stream() const { return stream_.get(); }

  // One slot's activations in this call (its layers): floats of q (and out), of k (and v).
  std::size_t q_call() const { return call_layers_ * q_layer_; }
  std::size_t kv_call() const { return call_layers_ * kv_layer_; }

  // Slot z's staging: where a host-memory call's activations are copied, slots packed by the
  // call's layer count (a whole token or one layer).
  SlotIO staging_io(int z) const {
    const std::size_t zq = static_cast<std::size_t>(z) * q_call(), zkv = static_cast<std::size_t>(z) * kv_call();
    return {d_q_.get() + zq, d_k_.get() + zkv, d_v_.get() + zkv, d_out_.get() + zq};
  }

  // Staging for `bucket` slots. Growing it moves every buffer a captured graph names, so the
  // graphs go with the old buffers. Its fault-injection point comes before anything changes; a
  // real failure part way leaves slots_ 0 (no room claimed), and the next call allocates anew.
  Status ensure_slots(int bucket) {
    if (bucket <= slots_) return {};
    if (detail::injected_allocation_failure())
      return make_error(ErrorCode::out_of_memory, fmt::format("cannot allocate the staging of {} slots", bucket));
    graphs_.clear();
    slots_ = 0;
    const std::size_t b = static_cast<std::size_t>(bucket);
    const std::size_t layers = static_cast<std::size_t>(ctx_.g.n_layers);  // room for whole tokens
    const std::size_t q_elems = layers * q_layer_, kv_elems = layers * kv_layer_;
    LADDER_TRY(h_q_.allocate(b * q_elems, "q"));
    LADDER_TRY(h_k_.allocate(b * kv_elems, "k"));
    LADDER_TRY(h_v_.allocate(b * kv_elems, "v"));
    LADDER_TRY(h_out_.allocate(b * q_elems, "out"));
    LADDER_TRY(d_q_.allocate(b * q_elems, "q"));
    LADDER_TRY(d_k_.allocate(b * kv_elems, "k"));
    LADDER_TRY(d_v_.allocate(b * kv_elems, "v"));
    LADDER_TRY(d_out_.allocate(b * q_elems, "out"));
    const std::size_t entries = b * static_cast<std::size_t>(ctx_.g.n_layers);
    steps_offset_ = (b * sizeof(SlotInputs) + kCallStateAlign - 1) / kCallStateAlign * kCallStateAlign;
    const std::size_t call_bytes = fetch_bytes(steps_offset_ + entries * sizeof(RouteLaunch));
    LADDER_TRY(h_call_.allocate(call_bytes, "step state", HostMapping::mapped));
    LADDER_TRY(d_call_.allocate(call_bytes, "step state"));
    LADDER_TRY(h_counts_.allocate(entries * kInputArrays, "input counts", HostMapping::mapped));
    // A call of fewer sequences than its bucket still copies the whole bucket's staging (the
    // captured copies are bucket-sized): the empty slots' bytes are never read by a kernel, but
    // they must be initialised bytes (compute-sanitizer initcheck), so they start at zero.
    std::memset(h_q_.get(), 0, b * q_elems * sizeof(float));
    std::memset(h_k_.get(), 0, b * kv_elems * sizeof(float));
    std::memset(h_v_.get(), 0, b * kv_elems * sizeof(float));
    LADDER_TRY(cuda_status(cudaMemset(d_out_.get(), 0, b * q_elems * sizeof(float)), "clearing the output staging"));
    slots_ = bucket;
    return {};
  }

  // Slot z's activations into the pinned staging (q only when given: a fill has none).
  void take_inputs(int z, const TokenIO& io) {
    const std::size_t zq = static_cast<std::size_t>(z) * q_call(), zkv = static_cast<std::size_t>(z) * kv_call();
    if (io.q != nullptr) std::memcpy(h_q_.get() + zq, io.q, q_call() * sizeof(float));
    std::memcpy(h_k_.get() + zkv, io.k, kv_call() * sizeof(float));
    std::memcpy(h_v_.get() + zkv, io.v, kv_call() * sizeof(float));
  }

  BatchSpan span(int bucket) const {
    return BatchSpan{call_layers_ * sizeof(RouteLaunch), bucket};
  }

  // The state fetch moves whole 16-byte words: the call state's buffers are sized up to them.
  static std::size_t fetch_bytes(std::size_t bytes) {
    constexpr std::size_t kWord = 16;
    return (bytes + kWord - 1) / kWord * kWord;
  }

  // The call state (input pointers, then the packed step state), fetched by a kernel (one node:
  // a copy node cost 8-10 us of every call, docs/perf.md change 19), and, for a host-memory
  // call, the staged activations (q only when attending).
  Status copy_in(int bucket, Memory memory, bool with_q) {
    const std::size_t b = static_cast<std::size_t>(bucket);
    const std::size_t bytes = fetch_bytes(steps_offset_ + b * call_layers_ * sizeof(RouteLaunch));
    cuda_detail::clear_stale_error();
    LADDER_TRY(cuda_status(cuda_detail::launch_fetch_state(h_call_.device_view(), d_call_.get(), bytes, stream(),
                                                           ctx_.copt.tuning.debug_fetch_delay_ns),
                           "fetching the step state"));
    if (memory == Memory::device) return {};
    if (with_q)
      LADDER_TRY(cuda_status(
          cudaMemcpyAsync(d_q_.get(), h_q_.get(), b * q_call() * sizeof(float), cudaMemcpyHostToDevice, stream()),
          "copying q"));
    LADDER_TRY(cuda_status(
        cudaMemcpyAsync(d_k_.get(), h_k_.get(), b * kv_call() * sizeof(float), cudaMemcpyHostToDevice, stream()),
        "copying k"));
    return cuda_status(
        cudaMemcpyAsync(d_v_.get(), h_v_.get(), b * kv_call() * sizeof(float), cudaMemcpyHostToDevice, stream()),
        "copying v");
  }

  // N1's counts of every slot's inputs into h_counts_ ([bucket][call layers][kInputArrays]), on
  // `stream`: the kernel writes them straight into the mapped pinned array, which the host reads
  // once the call has synchronized, so no copy node (a hand-off to the copy engine) sits in every
  // call's graph. With it gone and PDL on, a batch-1 52-layer call took 695 -> 598 us of host
  // clock at 2,048 on the H200 (docs/perf.md, change 38; the two were not measured apart).
  Status enqueue_counts(int bucket, cudaStream_t stream) {
    cuda_detail::clear_stale_error();
    return cuda_status(cuda_detail::launch_count_inputs(d_inputs(), bucket, static_cast<int>(call_layers_),
                                                        ctx_.g.n_heads * ctx_.g.head_dim,
                                                        ctx_.g.n_kv_heads * ctx_.g.head_dim,
                                                        kv_range_max(ctx_.g.kv_dtype), h_counts_.device_view(), stream),
                       "launching the input count");
  }

  // The counts on a side branch that forks from stream() after the inputs are in and joins it at
  // the end of the call: nothing of a call waits on them but the host, and in the chain they
  // cost 5-17 us per batch-16 layer call (docs/perf.md, change 13).
  // Under capture the fork and join become graph edges; eagerly they are two streams.
  // `work` enqueues the rest of the call on stream(); the branch is joined whatever it returns,
  // so a failed enqueue never leaves the side stream forked (under capture, an unjoined branch
  // would turn the error into an invalid capture). The branch is captured first: captured after
  // the layers it was no faster once the count wrote to host memory itself (docs/perf.md,
  // change 38).
  template <class Work>
  Status with_counts_beside(int bucket, Work&& work) {
    LADDER_TRY(cuda_status(cudaEventRecord(fork_.get(), stream()), "forking the input count"));
    LADDER_TRY(cuda_status(cudaStreamWaitEvent(side_.get(), fork_.get(), 0), "forking the input count"));
    const Status counted = enqueue_counts(bucket, side_.get());
    const Status rest = counted.ok() ? work() : counted;
    const Status recorded = cuda_status(cudaEventRecord(join_.get(), side_.get()), "joining the input count");
    const Status joined = cuda_status(cudaStreamWaitEvent(stream(), join_.get(), 0), "joining the input count");
    for (const Status* st : {&rest, &recorded, &joined})
      if (!st->ok()) return *st;
    return {};
  }

  // A fill: every slot's row stored, one store launch per layer.
  Status enqueue_fill(int bucket, Memory memory) {
    LADDER_TRY(copy_in(bucket, memory, false));
    return with_counts_beside(bucket, [&]() -> Status {
      cuda_detail::clear_stale_error();
      StoreParams grid;
      grid.kv_dtype = ctx_.g.kv_dtype;
      grid.n_kv_heads = ctx_.g.n_kv_heads;
      grid.head_dim = ctx_.g.head_dim;
      for (std::size_t l = 0; l < call_layers_; ++l)
        LADDER_TRY(cuda_status(cuda_detail::launch_store(grid, &d_steps()[l].store, stream(), span(bucket)),
                               "launching a store"));
      return {};
    });
  }

  // The whole step on stream(): inputs in, every layer's kernels over the bucket, outputs out.
  Status enqueue_step(const StepKey& key) {
    LADDER_TRY(copy_in(key.bucket, key.memory, true));
    return with_counts_beside(key.bucket, [&]() -> Status {
      for (std::size_t l = 0; l < key.layers.size(); ++l) {
        BatchSpan layer_span = span(key.bucket);
        // With activations in device memory the fetch is the kernel right before layer 0 (in host
        // memory the activations' copies come between).
        if (l == 0 && key.memory == Memory::device) layer_span.entries = cuda_detail::EntriesFrom::fetch_just_before;
        LADDER_TRY(cuda_detail::enqueue_layer_batch(key.layers[l], ctx_.shape, d_steps() + l, layer_span,
                                                    ctx_.producer, d_grid_counter_.get(), stream()));
      }
      if (key.memory == Memory::device) return {};
      const std::size_t b = static_cast<std::size_t>(key.bucket);
      return cuda_status(
          cudaMemcpyAsync(h_out_.get(), d_out_.get(), b * q_call() * sizeof(float), cudaMemcpyDeviceToHost, stream()),
          "copying the outputs");
    });
  }

  Status graph_for(const StepKey& key, cudaGraphExec_t& exec) {
    auto it = graphs_.find(key);
    if (it != graphs_.end()) {
      ++stats_.replays;
      exec = it->second.get();
      return {};
    }
    GraphHandle graph;
    LADDER_TRY(cuda_status(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal), "beginning a capture"));
    const Status enq = enqueue_step(key);
    const cudaError_t end = cudaStreamEndCapture(stream(), graph.out());
    LADDER_TRY(enq);
    LADDER_TRY(cuda_status(end, "ending the capture"));
    // A failed instantiation caches nothing: the captured graph goes with `graph`.
    GraphExecHandle made;
    if (detail::injected_allocation_failure())
      return make_error(ErrorCode::out_of_memory, "cannot instantiate the step graph");
    LADDER_TRY(cuda_status(cudaGraphInstantiate(made.out(), graph.get(), 0), "instantiating the step graph"));
    exec = made.get();
    graphs_.emplace(key, std::move(made));
    ++stats_.captures;
    return {};
  }

  DeviceContext ctx_;
  DeviceInfo info_;
  DeviceStats stats_;
  // Destroyed in reverse order of declaration: the graphs (declared last) before the events and
  // streams they were captured on.
  StreamHandle stream_;
  EventHandle timing_[2];          // time_steps: recorded before and after a call's work
  std::size_t q_layer_ = 0, kv_layer_ = 0;  // floats of one layer's q (out), k (v)
  std::size_t call_layers_ = 0;             // layers of the call being run (a whole token, or one)
  int slots_ = 0;
  PinnedArray<float> h_q_, h_k_, h_v_, h_out_;
  DeviceArray<float> d_q_, d_k_, d_v_, d_out_;
  // The call state, one copy in: [slots] SlotInputs (what the count kernel reads), then from
  // steps_offset_ the RouteLaunch array [slots][call layers], packed per call.
  static constexpr std::size_t kCallStateAlign = 256;
  SlotInputs* h_inputs() const { return reinterpret_cast<SlotInputs*>(h_call_.get()); }
  const SlotInputs* d_inputs() const { return reinterpret_cast<const SlotInputs*>(d_call_.get()); }
  RouteLaunch* h_steps() const { return reinterpret_cast<RouteLaunch*>(h_call_.get() + steps_offset_); }
  const RouteLaunch* d_steps() const { return reinterpret_cast<const RouteLaunch*>(d_call_.get() + steps_offset_); }
  PinnedArray<std::byte> h_call_;
  DeviceArray<std::byte> d_call_;
  std::size_t steps_offset_ = 0;
  StreamHandle side_;  // the count's branch (with_counts_beside)
  EventHandle fork_, join_;
  PinnedArray<InputCount> h_counts_;  // [slots][n_layers][kInputArrays], written by the count kernel
  RangeStats last_counts_;
  // The grid form's barrier word (GpuFusion::grid): one for the stream, whose launches are
  // ordered; zero once, never reset (producer_tc.cuh, grid_barrier).
  DeviceArray<unsigned> d_grid_counter_;
  std::map<StepKey, GraphExecHandle> graphs_;
  // What prepare() settled for the run() that follows it (with call_layers_ and the call state).
  struct PreparedCall {
    bool ready = false;  // prepare() succeeded and run() has not yet consumed it
    int n = 0;           // sequences of the call
    bool attend = false;
    StepKey key;                     // bucket, memory and (attending) every layer's kernels
    cudaGraphExec_t exec = nullptr;  // graph replay: the step graph, owned by graphs_
  };
  PreparedCall call_;
};

bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "0") == 0;
}

}  // namespace

CudaEngineOptions default_engine_options() {
  CudaEngineOptions copt;
  copt.use_graph = !env_off("LADDER_CUDA_GRAPH");
  if (env_off("LADDER_GPU_PDL")) copt.tuning.programmatic = false;
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
