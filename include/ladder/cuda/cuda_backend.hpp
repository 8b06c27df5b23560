// The CUDA device, raw-device-pointer layer. Usable standalone (a Python binding hands it torch
// tensor pointers, zero copy) and needs no CUDA header: streams are `void*` (a cudaStream_t,
// nullptr = the default stream) and every buffer is a device pointer.
//
// Kernels support head_dim 128 only; other head_dims are refused with ErrorCode::unsupported.
// Every call reports CUDA failures as ErrorCode::device_error with cudaGetErrorString's text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "ladder/device_api.hpp"
#include "ladder/errors.hpp"
#include "ladder/heuristics.hpp"
#include "ladder/kernel_params.hpp"
#include "ladder/ladder.hpp"
#include "ladder/plane.hpp"

namespace ladder::cuda {

// The only head_dim the kernels are built for (stated once, in geometry.hpp's limits).
inline constexpr int kSupportedHeadDim = limits::kGpuHeadDim;

// A plane whose K and V rows live in device memory (words of cfg.kv_dtype), with the host-side
// metadata.
// row_capacity is the number of rows allocated per KV head (head-major) or in total
// (token-major); 0 means state.capacity. A growing plane may be allocated at max_context rows
// up front while its state's capacity still grows: only the strides use row_capacity.
struct DevicePlane {
  PlaneConfig cfg;
  PlaneState state;
  KvWord* k = nullptr;
  KvWord* v = nullptr;
  int row_capacity = 0;

  int rows_allocated() const { return row_capacity > 0 ? row_capacity : state.capacity; }
  PlaneStrides strides() const { return plane_strides(cfg.kind, rows_allocated(), cfg.n_kv_heads, cfg.head_dim); }
};

// One layer's activations in device memory, f32: q, out [n_heads][128]; k, v [n_kv_heads][128].
struct DeviceLayerIO {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
};

// Scratch in device memory for run_route, sized by scratch_needs / max_scratch_needs (R5).
// Counts are elements. The workspace owns its device buffers: allocate_workspace makes it, and
// it frees them (cudaFree) when it is destroyed or moved over; nothing else frees them, so never
// pass its pointers to cudaFree. Move-only: a move hands the buffers over, leaving the source
// empty (every pointer null, every count 0), as a default-constructed workspace is. Launches
// read it asynchronously: destroy it only after the work queued on it has finished (synchronize
// the stream given to run_route). The pointers below are views, valid while the workspace lives.
// Frees device memory (cudaFree, in dispatch.cpp: this header names no CUDA type).
struct DeviceFree {
  void operator()(void* p) const noexcept;
};

// One owned device buffer of `size()` elements of T: freed when it is destroyed or moved over; a
// move leaves the source empty (null, size 0).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(T* p, std::int64_t n) : p_(p), n_(p != nullptr ? n : 0) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::move(o.p_)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    p_ = std::move(o.p_);
    n_ = std::exchange(o.n_, 0);
    return *this;
  }
  T* get() const { return p_.get(); }
  std::int64_t size() const { return n_; }

 private:
  std::unique_ptr<T, DeviceFree> p_;
  std::int64_t n_ = 0;
};

class DeviceWorkspace {
 public:
  float* partials() const { return partials_.get(); }
  std::int64_t partial_floats() const { return partials_.size(); }
  KvWord* pad() const { return pad_.get(); }  // k block then v block
  std::int64_t pad_halfs() const { return pad_.size(); }
  KvWord* stage() const { return stage_.get(); }  // k rows then v rows
  std::int64_t stage_halfs() const { return stage_.size(); }
  // The fused splitk kernel's arrival counters (zero between launches; every launch leaves them
  // zero), then one more word, the grid form's barrier counter (GpuFusion::grid: zero when
  // allocated, each launch flips its top bit). allocate_workspace sizes them for every head shape
  // the partials fit.
  unsigned* arrivals() const { return arrivals_.get(); }
  std::int64_t arrival_count() const { return arrivals_.size(); }

 private:
  friend Result<DeviceWorkspace> allocate_workspace(const ScratchNeeds& needs);

  DeviceBuffer<float> partials_;
  DeviceBuffer<KvWord> pad_;
  DeviceBuffer<KvWord> stage_;
  DeviceBuffer<unsigned> arrivals_;
};
// A workspace for `needs` on the current device, its arrival counters zeroed; the caller owns
// it. A failure (out_of_memory when a buffer does not fit) leaves nothing allocated.
Result<DeviceWorkspace> allocate_workspace(const ScratchNeeds& needs);

// Which producer the routes run (docs/gpu.md, "Two producers").
enum class GpuProducer {
  automatic,    // tensor_core, unless the environment says LADDER_GPU_DAG=exact
  tensor_core,  // mma.sync, q and weights split hi/lo in the plane's dtype: the default; same partition and merge, not the CPU's bits
  exact_dag,    // THE PRODUCER DAG on CUDA cores: the CPU twins' bits, ~10x slower
};

// One kernel per layer (docs/gpu.md, "One kernel per layer") or store, producer, reducer: the
// forms and the default are stated once, in heuristics.hpp.
using GpuFusion = ladder::GpuFusion;
using TcTiles = ladder::TcTiles;

// How a batched reduce launch loads a head's partials (LaunchTuning::reduce_form).
enum class ReduceForm { automatic, one_pass, lean };

// Launch choices. `producer` changes the in-block arithmetic (and so the bits, within the
// tolerance the tests assert); heads_per_warp never changes a bit (tests prove it).
struct LaunchTuning {
  GpuProducer producer = GpuProducer::automatic;
  // Exact-DAG producer only: sibling query heads one warp computes together (rounded down to a
  // power of two that divides heads_per_kv, at most 16). 0 = the default (heuristic in dispatch).
  int heads_per_warp = 0;
  // Tensor-core producer, splitk and vec routes: one kernel per layer (store, pad, producer and
  // the split-K reduce fused; the same bits as the separate kernels) or the separate kernels.
  GpuFusion fusion = GpuFusion::automatic;
  // Launch the fused kernel with programmatic dependent launch: it may start while the previous
  // kernel on the stream runs, prefetching its KV rows, and waits for that kernel before it
  // reads q or the activations (a programmatic edge when captured into a graph). Off here: a
  // run_route caller's previous kernel may be writing those rows. Engines turn it on
  // (CudaEngineOptions), since they own their planes.
  bool programmatic = false;
  // Tests only: a device array [128] of nanoseconds the fused kernel's CTA of warp slot f waits
  // before it arrives at the reduce (forces an arrival order); in the store-fused form, before
  // slot f's partial is written, after the PDL reducer was allowed to start. nullptr in every
  // real use.
  const unsigned* debug_arrival_delay_ns = nullptr;
  // Tests only: nanoseconds each CTA of an engine call's step-state fetch sleeps after it let the
  // first layer's kernel start and before it copies (a kernel that read its entry before the
  // fetch finished would read the previous call's). 0 in every real use.
  unsigned debug_fetch_delay_ns = 0;
  // Tensor-core producer, batched launches: warp slots one CTA walks in turn (a launch shape:
  // every value gives the same bits). 0 = the rule of heuristics.hpp (tc_walk_extent).
  int tc_slots_per_cta = 0;
  // Batched reduce launches: the one-pass merge (every load in one round trip, three CTAs per
  // SM on the H200) or the lean one (loads in passes, four CTAs per SM). A launch shape: both
  // give the same bits. automatic = lean when the launch has more CTAs than the one-pass kernel
  // holds at once (docs/perf.md, change 20).
  ReduceForm reduce_form = ReduceForm::automatic;
  // Tensor-core producer, its direct and batched launches: the layout of its shared-memory tiles
  // (heuristics.hpp, TcTiles). A launch shape: every layout gives the same bits. The one-kernel
  // and grid forms (GpuFusion::fused, grid) always use padded tiles.
  TcTiles tc_tiles = TcTiles::automatic;
};
// The producer `automatic` resolves to here (reads LADDER_GPU_DAG).
GpuProducer resolve_producer(GpuProducer requested);
// What GpuFusion::automatic resolves to here: LADDER_GPU_FUSED=1 fused, =grid grid,
// =store store_fused, =0 separate, otherwise kGpuFusionDefault (heuristics.hpp).
GpuFusion resolve_fusion(GpuFusion requested);
// What TcTiles::automatic resolves to here: LADDER_GPU_TILES=padded / swizzled, otherwise
// automatic (each launch then applies heuristics.hpp's tc_tiles_direct / tc_tiles_batched).
TcTiles resolve_tc_tiles(TcTiles requested);

// Runs route `r` for one layer whose plane state already took this token's append and
// returned `slot`: stores the current row (fused on the interleaved route), attends, reduces
// into io.out. Asynchronous on `stream`; the launches are ordered by stream order only.
// Fail-closed: a route whose predicates do not hold for the plane (vec on a partially wrapped
// ring, vec on a token-major ring with a ragged tail, interleaved on a ring, staged on a
// growing plane) is refused with invalid_argument rather than read out of bounds.
Status run_route(Route r, const DevicePlane& plane, int position, int slot, const HeadShape& shape,
                 const DeviceLayerIO& io, const DeviceWorkspace& ws, void* stream, LaunchTuning tuning = {});

// run_route on host memory: mirrors the plane to the device for the call and writes the stored
// row back (what attend_layer(Device::cuda, ...) does, with a choice of producer).
Status attend_layer_host(Route r, HostPlane& plane, int position, int slot, const HeadShape& shape,
                         const LayerIO& io, LaunchTuning tuning = {});

// Checks a head shape against what the kernels support.
Status check_head_shape(const HeadShape& shape);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int sm_count = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t global_bytes = 0;
  int cc_major = 0;
  int cc_minor = 0;
};
Result<DeviceInfo> device_info();

// Bandwidth probes for benches (B1): medians over `reps` timed runs (CUDA events) after a warm-up.
struct BandwidthSample {
  std::int64_t bytes_moved = 0;  // per run: read + written (copy) or read (read probe)
  double median_us = 0.0;
  double gb_per_s = 0.0;  // bytes_moved / median, 1e9 bytes per second
};
// cudaMemcpyAsync device to device of `bytes`: counts bytes read + written.
Result<BandwidthSample> measure_device_copy_bandwidth(std::int64_t bytes, int reps);
// A read-only streaming kernel (16-byte loads) over `bytes`.
Result<BandwidthSample> measure_device_read_bandwidth(std::int64_t bytes, int reps);

// Benches only: the dependency between consecutive layers of a real model. One small kernel
// reads layer i's output and writes layer i+1's activations: q = base_q + out (n_heads x 128),
// k = base_k + out and v = base_v + out (the first n_kv_heads x 128 of out). `programmatic`
// launches it with PDL (it waits for the previous kernel before reading out).
struct LayerLink {
  const float* out = nullptr;
  const float* base_q = nullptr;
  const float* base_k = nullptr;
  const float* base_v = nullptr;
  float* q = nullptr;
  float* k = nullptr;
  float* v = nullptr;
};
Status enqueue_layer_link(const LayerLink& link, const HeadShape& shape, void* stream, bool programmatic);

struct CudaEngineOptions {
  // Capture the per-token step as a CUDA graph and replay it (E2). false = eager launches.
  bool use_graph = true;
  // An engine launches its tensor-core kernels with PDL (LaunchTuning::programmatic): it owns the
  // planes, so nothing outside it writes the rows a kernel prefetches before its wait. Measured
  // on the H200 (docs/perf.md, change 38): a 52-layer batch-16 call's GPU time -1.4 to -4.8 %.
  LaunchTuning tuning{.programmatic = true};
  // Time every call's work on the GPU with a pair of CUDA events (DeviceStats::device_us): what
  // the benches report beside the host clock. Off by default (two event records per call).
  bool time_steps = false;
  // Benches only, with time_steps and use_graph: a timed call that attends replays its step graph
  // this many times back to back between the two events, and DeviceStats::device_us counts the
  // time per replay: the graph's own GPU time with the host's launch latency hidden, the way the
  // peers are timed (bench/peers.py: replays of a captured graph). A replay repeats the call's
  // work bit for bit (the same row into the same slot, the same attention over the same rows).
  // Values below 1 count as 1.
  int replays_per_timed_call = 1;
};
// What Device::cuda engines run with: the defaults, with LADDER_CUDA_GRAPH=0 selecting eager
// launches and LADDER_GPU_PDL=0 launches without PDL.
CudaEngineOptions default_engine_options();
// The CUDA device for the engine (device_api.hpp). Each sequence owns its planes and scratch;
// the device owns one stream, the staging of host-memory activations and the step graphs. The
// sequences of a call are the slots of a power-of-two bucket: one launch per layer and kernel
// family covers all of them (src/cuda/backend.cpp). Growing planes are allocated at
// max_context rows up front (no device copy on growth); their PlaneState still grows exactly
// as on the CPU, so routes match. no_device in a build without CUDA.
Result<std::unique_ptr<DeviceBackend>> create_backend(const Geometry& g, const CudaEngineOptions& copt);

}  // namespace ladder::cuda
