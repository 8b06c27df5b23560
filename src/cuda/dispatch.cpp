// Route -> launches (R2), using the same choose_route/scratch_needs as the CPU (R5), and the
// single-layer host entry point cuda::attend_layer_host, and the batched layer launches.
#include "cuda/dispatch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda/device_memory.hpp"
#include "cuda/kernels.hpp"

namespace ladder {
namespace cuda_detail {

namespace {
Status bad(std::string m) { return make_error(ErrorCode::invalid_argument, std::move(m)); }

// Default sibling heads per warp. Measured on an H200 (2026-11-30, docs/perf.md): 4 siblings
// per warp beat all 16 on every route at every depth (vec at 131072: 300 us vs 856 us), because
// 16 siblings need 255 registers and leave 2 x 32 blocks for 132 SMs, while 4 give 4x the blocks;
// the 4x K/V re-reads mostly hit L2. Any value gives the same bits (GpuApi tests).
constexpr int kDefaultHeadsPerWarp = 4;

}  // namespace

Status cuda_status(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return {};
  // Reset the last-error slot: a non-sticky failure (an allocation) must not make the next
  // launch's cudaGetLastError report it again.
  (void)cudaGetLastError();
  const ErrorCode code = e == cudaErrorMemoryAllocation ? ErrorCode::out_of_memory : ErrorCode::device_error;
  return make_error(code, fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
}

Status require_device() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    // Clear the non-sticky error so later calls start clean.
    (void)cudaGetLastError();
    return make_error(ErrorCode::no_device,
                      fmt::format("no CUDA device is usable here ({}); use --device cpu",
                                  e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0"));
  }
  return {};
}

void clear_stale_error() { (void)cudaGetLastError(); }

int heads_per_warp_for(int heads_per_kv, int requested) {
  int g = 1;
  while (g * 2 <= requested && g * 2 <= 16 && heads_per_kv % (g * 2) == 0) g *= 2;
  return g;
}

long long resident_ctas(const void* kernel, int threads, std::size_t smem, ResidentCache& cache, int device) {
  constexpr long long kUnknown = -1;
  const bool cached = device >= 0 && device < ResidentCache::kDevices;
  long long resident = cached ? cache.per_device[device].load(std::memory_order_relaxed) : 0;
  if (resident == 0) {
    int sms = 0, per_sm = 0;
    cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem);
    if (e != cudaSuccess) (void)cudaGetLastError();
    resident = e == cudaSuccess ? static_cast<long long>(sms) * per_sm : kUnknown;
    if (cached) cache.per_device[device].store(resident, std::memory_order_relaxed);
  }
  return resident > 0 ? resident : 0;
}

Schedule ProducerChoice::schedule(int visible, const HeadShape& shape) const {
  if (!tensor_core) return pinned_schedule(visible);
  return tc_schedule(visible, tc_groups(shape));
}

ProducerChoice resolve_producer_choice(const HeadShape& shape, const cuda::LaunchTuning& t) {
  ProducerChoice c;
  c.tensor_core = cuda::resolve_producer(t.producer) == cuda::GpuProducer::tensor_core;
  c.heads_per_warp =
      heads_per_warp_for(shape.heads_per_kv(), t.heads_per_warp > 0 ? t.heads_per_warp : kDefaultHeadsPerWarp);
  // Only the tensor-core kernels take the store in.
  c.fusion = c.tensor_core ? cuda::resolve_fusion(t.fusion) : GpuFusion::separate;
  c.programmatic = c.fusion != GpuFusion::separate && t.programmatic;
  c.arrival_delay_ns = t.debug_arrival_delay_ns;
  c.tc_slots_per_cta = t.tc_slots_per_cta;
  c.reduce_form = t.reduce_form;
  c.tiles = cuda::resolve_tc_tiles(t.tc_tiles);
  c.reduce_programmatic = c.fusion == GpuFusion::store_fused;
  if (cudaGetDevice(&c.device) != cudaSuccess) {
    (void)cudaGetLastError();  // no device: nothing will launch, and the choice stays usable on the host
    c.device = -1;
  }
  return c;
}

Status plan_route(Route r, const cuda::DevicePlane& plane, int position, int slot, const HeadShape& shape,
                  const cuda::DeviceLayerIO& io, const cuda::DeviceWorkspace& ws, const ProducerChoice& producer,
                  RouteLaunch& out) {
  LADDER_TRY(cuda::check_head_shape(shape));
  const PlaneConfig& cfg = plane.cfg;
  const PlaneState& st = plane.state;
  if (cfg.n_kv_heads != shape.n_kv_heads || cfg.head_dim != shape.head_dim)
    return bad(fmt::format("plane has {} KV heads x {} dims but the head shape says {} x {}", cfg.n_kv_heads,
                           cfg.head_dim, shape.n_kv_heads, shape.head_dim));
  if (plane.k == nullptr || plane.v == nullptr || io.q == nullptr || io.k == nullptr || io.v == nullptr ||
      io.out == nullptr)
    return bad("run_route needs device pointers for the plane's K and V and for q, k, v, out");
  if (st.capacity <= 0 || plane.rows_allocated() < st.capacity)
    return bad(fmt::format("plane rows allocated ({}) below its capacity ({})", plane.rows_allocated(),
                           st.capacity));
  LADDER_TRY(check_layer_call(cfg, st, position, slot));
  LADDER_TRY(check_route(r, cfg, st));
  const int visible = st.len;
  const bool head_major = cfg.kind == PlaneKind::growing;

  const ScratchNeeds need = scratch_needs(r, shape_geometry(shape), visible);
  if (ws.partials() == nullptr || ws.partial_floats() < need.partial_floats)
    return bad(fmt::format("workspace partials {} floats, route needs {}", ws.partial_floats(), need.partial_floats));
  if (need.pad_halfs > 0 && (ws.pad() == nullptr || ws.pad_halfs() < need.pad_halfs))
    return bad(fmt::format("workspace pad {} halfs, route needs {}", ws.pad_halfs(), need.pad_halfs));
  if (need.stage_halfs > 0 && (ws.stage() == nullptr || ws.stage_halfs() < need.stage_halfs))
    return bad(fmt::format("workspace stage {} halfs, route needs {}", ws.stage_halfs(), need.stage_halfs));

  RouteLaunch l;
  l.route = r;
  l.head_major = head_major;
  const PlaneStrides strides = plane.strides();

  l.store.kv_dtype = cfg.kv_dtype;
  l.store.n_kv_heads = shape.n_kv_heads;
  l.store.head_dim = shape.head_dim;
  l.store.k = io.k;
  l.store.v = io.v;
  l.store.plane_k = plane.k;
  l.store.plane_v = plane.v;
  l.store.strides = strides;
  l.store.slot = slot;

  ProducerParams& p = l.producer;
  p.shape = shape;
  p.kv_dtype = cfg.kv_dtype;
  p.visible = visible;
  p.sched = producer.schedule(visible, shape);
  p.q = io.q;
  p.rows = logical_window(plane.k, plane.v, strides, st, logical_start(position, cfg.window));
  p.tail = p.rows;
  p.tail_first = visible;
  p.partials = ws.partials();

  const bool fused = producer.fuses_store(r);
  const bool merges_itself = producer.merges_in_producer(r);
  // The fused kernel's counters from the front of the workspace's array; the grid form's barrier
  // word is its last one, clear of them for any shape the workspace serves.
  const std::int64_t fused_arrivals = static_cast<std::int64_t>(tc_groups(shape)) * kFusedArrivalsPerGroup;
  const bool grid = fused && producer.fusion == GpuFusion::grid;
  if (merges_itself || grid) {
    const std::int64_t need_arrivals = fused_arrivals + (grid ? kGridBarrierWords : 0);
    if (ws.arrivals() == nullptr || ws.arrival_count() < need_arrivals)
      return bad(fmt::format("workspace has {} arrival counters, the {} kernel needs {}", ws.arrival_count(),
                             grid ? "grid-merged" : "fused", need_arrivals));
  }

  switch (r) {
    case Route::splitk:
      break;
    case Route::vec:
      // vec reads the window in logical order like splitk (a full wrapped ring as two spans, the
      // older first), so the two give the same bits. The fused kernel reads a ragged tail in
      // place (rows past a block's count are zero-filled, never read): no pad.
      if (fused) break;
      // The pad block: head-major, 32 rows per KV head; k block then v block; it holds the
      // window's last visible % 32 logical tokens.
      l.copy = pad_copy(p.rows, cfg.kind, visible, shape, ws.pad(), ws.pad() + ws.pad_halfs() / 2);
      if (l.copy.rows > 0) {
        p.tail_first = l.copy.first;
        p.tail = copied_rows(l.copy);
      }
      break;
    case Route::staged:
      l.copy = stage_copy(p.rows, logical_start(position, cfg.window), visible, p.sched.blocks * kBlockTokens, shape,
                          ws.stage(), ws.stage() + ws.stage_halfs() / 2);
      p.rows = copied_rows(l.copy);
      p.tail = p.rows;
      break;
    case Route::interleaved:
      // A growing plane never wraps: row t is token t.
      p.rows.order = RowOrder::contiguous;
      p.cur_k = io.k;
      p.cur_v = io.v;
      p.store_k = plane.k;
      p.store_v = plane.v;
      p.store_slot = slot;
      break;
  }

  switch (r) {
    case Route::splitk: p.family = fused ? KernelFamily::splitk_fused : KernelFamily::splitk; break;
    case Route::vec: p.family = fused ? KernelFamily::vec_fused : KernelFamily::vec; break;
    case Route::staged: p.family = KernelFamily::vec; break;
    case Route::interleaved: p.family = KernelFamily::interleaved; break;
  }
  // Routes that store inside the producer have no store launch; in a batch their store entry
  // must do nothing (kernels.hpp, BatchSpan).
  if (fused || r == Route::interleaved) l.store.n_kv_heads = 0;

  if (fused) {
    // The fused producer stores the current row itself (and reads it from the activations): no
    // store launch. In the one-kernel form (GpuFusion::fused) it also writes the output: no
    // reduce launch.
    p.cur_k = io.k;
    p.cur_v = io.v;
    p.store_k = plane.k;
    p.store_v = plane.v;
    p.store_slot = slot;
    p.early_dependents = producer.reduce_programmatic;
    p.debug_delay_ns = producer.arrival_delay_ns;
    l.tail.out = io.out;
    l.tail.arrivals = ws.arrivals();
    l.tail.delay_ns = producer.arrival_delay_ns;
    if (grid) l.tail.grid_counter = ws.arrivals() + (ws.arrival_count() - 1);
  }

  l.reduce.shape = shape;
  // The tensor-core producer writes one partial per warp slot and leaves their fold into fold
  // groups to the reducer (or folds them itself, reduce_parts_after_fold); the exact-DAG producer
  // merges each workgroup itself (kernel_params.hpp, steps 4 and 5).
  const FoldGroups merge = producer.tensor_core ? tc_fold_groups(p.sched) : FoldGroups{p.sched.nwg, 1};
  l.reduce.groups = merge.groups;
  l.reduce.parts = merge.parts;
  if (!reducer_takes_parts(l.reduce.parts))
    return make_error(ErrorCode::internal,
                      fmt::format("a fold group of {} warp slots has no reducer", l.reduce.parts));
  l.reduce.partials = ws.partials();
  l.reduce.out = io.out;
  if (merges_itself) l.reduce.groups = 0;  // no reduce entry
  out = l;
  return {};
}

LayerKernels layer_kernels(const RouteLaunch& l, const ProducerChoice& producer, int max_padded_rows) {
  LayerKernels k;
  k.kv_dtype = l.producer.kv_dtype;
  if (producer.fuses_store(l.route)) {
    k.bits = l.route == Route::splitk ? LayerKernels::fused_splitk : LayerKernels::fused_vec;
    if (!producer.merges_in_producer(l.route)) k.bits |= LayerKernels::reduce;
    return k;
  }
  k.bits = LayerKernels::reduce;
  switch (l.route) {
    case Route::splitk: k.bits |= LayerKernels::store | LayerKernels::splitk; break;
    case Route::vec:
      k.bits |= LayerKernels::store | LayerKernels::vec;
      if (l.head_major) {
        k.bits |= LayerKernels::copy;
        k.copy_rows = kBlockTokens;
      }
      break;
    case Route::staged:
      k.bits |= LayerKernels::store | LayerKernels::copy | LayerKernels::vec;
      k.copy_rows = max_padded_rows;
      break;
    case Route::interleaved: k.bits |= LayerKernels::interleaved; break;
  }
  return k;
}

// pinned_schedule's slots bound every producer's at this length or shorter (tc_schedule never
// has more), so CTAs past an entry's own slots exit at once.
unsigned indirect_slots(const BatchSpan& batch) {
  if (batch.max_visible <= 0) return static_cast<unsigned>(kMaxWorkgroups * kMaxWarpsPerWorkgroup);
  return static_cast<unsigned>(pinned_schedule(batch.max_visible).slots());
}

unsigned indirect_workgroups(const BatchSpan& batch) {
  if (batch.max_visible <= 0) return static_cast<unsigned>(kMaxWorkgroups);
  return static_cast<unsigned>(pinned_schedule(batch.max_visible).nwg);
}

LayerKernels merge(LayerKernels a, const LayerKernels& b) {
  // An empty key (no entry merged yet) takes the entry's dtype: every entry of one engine has
  // its geometry's dtype.
  if (a.bits == 0) a.kv_dtype = b.kv_dtype;
  a.bits = static_cast<std::uint8_t>(a.bits | b.bits);
  a.copy_rows = std::max(a.copy_rows, b.copy_rows);
  a.max_visible = std::max(a.max_visible, b.max_visible);
  return a;
}

RouteLaunch empty_launch(const HeadShape& shape) {
  RouteLaunch l;
  l.store.n_kv_heads = 0;
  l.copy.rows = 0;
  l.producer.family = KernelFamily::none;
  l.producer.shape = shape;
  l.reduce.shape = shape;
  l.reduce.groups = 0;
  return l;
}

namespace {
// A store-fused launch in error messages (a literal: the name is built on every launch).
const char* store_fused_name(Route r, const ProducerChoice& c) {
  if (c.merges_in_producer(r)) return r == Route::splitk ? "fused splitk" : "fused vec";
  if (c.fusion == GpuFusion::grid) return r == Route::splitk ? "grid-merged splitk" : "grid-merged vec";
  return r == Route::splitk ? "store-fused splitk" : "store-fused vec";
}
}  // namespace

Status enqueue_layer_batch(const LayerKernels& k, const HeadShape& shape, const RouteLaunch* first, BatchSpan batch,
                           const ProducerChoice& producer, unsigned* grid_counter, cudaStream_t stream) {
  clear_stale_error();
  batch.max_visible = k.max_visible;
  // Every tensor-core producer launch of the layer walks with one y extent, which the reducer
  // needs too: where their CTAs fold whole workgroups (not in the grid form, whose merge inside
  // the launch reads every slot's partial), it reads parts 1 for the entries they folded.
  if (producer.tensor_core) {
    batch.tc_ctas = tc_batched_ctas(shape, batch, producer);
    batch.tc_partials = producer.fusion == GpuFusion::grid ? TcPartials::per_slot : TcPartials::per_group;
  }
  // One launch, then its error in words. Only the layer's first launch can be right behind the
  // state fetch (EntriesFrom): every launch after it reads its entries at once.
  const auto step = [&](auto&& launch, const char* what) -> Status {
    const cudaError_t r = launch();
    batch.entries = EntriesFrom::earlier_kernel;
    return cuda_status(r, fmt::format("launching the batched {} kernel", what));
  };
  // Grid sizes come from the shape, never from an entry (which may be an empty slot).
  StoreParams store;
  store.kv_dtype = k.kv_dtype;  // the host structs pick the instantiation; entries live on the device
  store.n_kv_heads = shape.n_kv_heads;
  store.head_dim = shape.head_dim;
  RowCopyParams copy;
  copy.n_kv_heads = shape.n_kv_heads;
  copy.head_dim = shape.head_dim;
  ProducerParams prod;
  prod.shape = shape;
  prod.kv_dtype = k.kv_dtype;
  ReduceParams reduce;
  reduce.shape = shape;
  // One bit per fused family: a layer whose entries are all vec launches no empty splitk grid.
  FusedTail tail;
  tail.grid_counter = grid_counter;
  bool all_merged = true;  // every fused family's launch wrote its entries' outputs
  for (const auto& [r, bit] : {std::pair{Route::splitk, LayerKernels::fused_splitk},
                               std::pair{Route::vec, LayerKernels::fused_vec}})
    if (k.bits & bit) {
      bool merged = false;
      LADDER_TRY(step(
          [&] {
            return launch_store_fused_route(r, prod, &first->producer, reduce, &first->reduce, tail, &first->tail,
                                            producer, stream, merged, batch);
          },
          store_fused_name(r, producer)));
      all_merged = all_merged && merged;
    }
  if (k.bits & LayerKernels::store)
    LADDER_TRY(step([&] { return launch_store(store, &first->store, stream, batch); }, "store"));
  if (k.bits & LayerKernels::copy)
    LADDER_TRY(step([&] { return launch_copy_rows(copy, &first->copy, k.copy_rows, stream, batch); }, "pad or stage"));
  if (k.bits & LayerKernels::splitk)
    LADDER_TRY(step([&] { return launch_splitk(prod, &first->producer, producer, stream, batch); }, "splitk producer"));
  if (k.bits & LayerKernels::vec)
    LADDER_TRY(step([&] { return launch_vec(prod, &first->producer, producer, stream, batch); }, "vec producer"));
  if (k.bits & LayerKernels::interleaved)
    LADDER_TRY(step([&] { return launch_interleaved(prod, &first->producer, producer, stream, batch); },
                    "interleaved producer"));
  // The reducer, unless every entry was merged by its grid-form launch (where entries of other
  // families need it, it also merges those entries again, to the same bits).
  const bool others = (k.bits & (LayerKernels::splitk | LayerKernels::vec | LayerKernels::interleaved)) != 0;
  if ((k.bits & LayerKernels::reduce) && (others || !all_merged))
    LADDER_TRY(step(
        [&] {
          return launch_reduce(reduce, &first->reduce, producer, stream, batch,
                               producer.reducer_behind_pdl(batch.count));
        },
        "reduce"));
  return {};
}

Status enqueue_route(const RouteLaunch& l, const ProducerChoice& producer, cudaStream_t stream) {
  clear_stale_error();
  const auto step = [&](cudaError_t r, const char* what) -> Status {
    return cuda_status(r, fmt::format("launching the {} kernel of the {} route", what, route_name(l.route)));
  };
  constexpr int kOneSequence = 1;
  if (producer.fuses_store(l.route)) {
    bool merged = false;
    LADDER_TRY(step(launch_store_fused_route(l.route, l.producer, nullptr, l.reduce, nullptr, l.tail, nullptr,
                                             producer, stream, merged),
                    store_fused_name(l.route, producer)));
    if (merged) return {};
    return step(launch_reduce(l.reduce, nullptr, producer, stream, {}, producer.reducer_behind_pdl(kOneSequence)),
                "reduce");
  }
  switch (l.route) {
    case Route::splitk:
      LADDER_TRY(step(launch_store(l.store, nullptr, stream), "store"));
      LADDER_TRY(step(launch_splitk(l.producer, nullptr, producer, stream), "splitk producer"));
      break;
    case Route::vec:
    case Route::staged: {
      LADDER_TRY(step(launch_store(l.store, nullptr, stream), "store"));
      // staged always copies; vec pads only a head-major plane's ragged tail (rows 0: no launch).
      const bool staged = l.route == Route::staged;
      if (staged || (l.head_major && l.copy.rows > 0))
        LADDER_TRY(step(launch_copy_rows(l.copy, nullptr, l.copy.rows, stream), staged ? "stage" : "pad"));
      LADDER_TRY(step(launch_vec(l.producer, nullptr, producer, stream), "vec producer"));
      break;
    }
    case Route::interleaved:
      LADDER_TRY(step(launch_interleaved(l.producer, nullptr, producer, stream), "interleaved producer"));
      break;
  }
  return step(launch_reduce(l.reduce, nullptr, producer, stream), "reduce");
}

}  // namespace cuda_detail

namespace cuda {

Status check_head_shape(const HeadShape& shape) {
  if (shape.n_heads <= 0 || shape.n_kv_heads <= 0 || shape.n_heads % shape.n_kv_heads != 0)
    return make_error(ErrorCode::invalid_argument,
                      fmt::format("head shape needs n_heads divisible by n_kv_heads (got {} and {})", shape.n_heads,
                                  shape.n_kv_heads));
  if (shape.head_dim != kSupportedHeadDim)
    return make_error(ErrorCode::unsupported,
                      fmt::format("the CUDA kernels support head_dim {} only (got {}); use --device cpu for "
                                  "other head dims",
                                  kSupportedHeadDim, shape.head_dim));
  return {};
}

Status run_route(Route r, const DevicePlane& plane, int position, int slot, const HeadShape& shape,
                 const DeviceLayerIO& io, const DeviceWorkspace& ws, void* stream, LaunchTuning tuning) {
  const cuda_detail::ProducerChoice producer = cuda_detail::resolve_producer_choice(shape, tuning);
  cuda_detail::RouteLaunch l;
  LADDER_TRY(cuda_detail::plan_route(r, plane, position, slot, shape, io, ws, producer, l));
  return cuda_detail::enqueue_route(l, producer, static_cast<cudaStream_t>(stream));
}

void DeviceFree::operator()(void* p) const noexcept { cudaFree(p); }

Result<DeviceWorkspace> allocate_workspace(const ScratchNeeds& needs) {
  LADDER_TRY(cuda_detail::require_device());
  // Each buffer is the workspace's as soon as it is allocated: a later failure frees it with `ws`.
  DeviceWorkspace ws;
  const auto grab = [](auto& buffer, std::int64_t n, const char* what) {
    return cuda_detail::allocate_device_buffer(buffer, n, fmt::format("workspace {} ({} elements)", what, n));
  };
  // Arrival counters: groups (KV head x 16-head tile) <= n_heads <= partials / one partial, so
  // this count covers every head shape whose partials fit (a few hundred KB at most); the last
  // word is the grid form's barrier counter.
  const std::int64_t arrivals =
      needs.partial_floats / partial_stride(kSupportedHeadDim) * cuda_detail::kFusedArrivalsPerGroup +
      cuda_detail::kGridBarrierWords;
  LADDER_TRY(grab(ws.partials_, needs.partial_floats, "partials"));
  LADDER_TRY(grab(ws.pad_, needs.pad_halfs, "pad"));
  LADDER_TRY(grab(ws.stage_, needs.stage_halfs, "stage"));
  LADDER_TRY(grab(ws.arrivals_, arrivals, "arrival counters"));
  if (arrivals > 0)
    LADDER_TRY(cuda_detail::cuda_status(
        cudaMemset(ws.arrivals(), 0, static_cast<std::size_t>(arrivals) * sizeof(unsigned)),
        "zeroing the arrival counters"));
  return ws;
}

}  // namespace cuda

namespace cuda {

GpuFusion resolve_fusion(GpuFusion requested) {
  if (requested != GpuFusion::automatic) return requested;
  const char* v = std::getenv("LADDER_GPU_FUSED");
  if (v != nullptr && std::strcmp(v, "1") == 0) return GpuFusion::fused;
  if (v != nullptr && std::strcmp(v, "store") == 0) return GpuFusion::store_fused;
  if (v != nullptr && std::strcmp(v, "grid") == 0) return GpuFusion::grid;
  if (v != nullptr && std::strcmp(v, "0") == 0) return GpuFusion::separate;
  return kGpuFusionDefault;
}

TcTiles resolve_tc_tiles(TcTiles requested) {
  if (requested != TcTiles::automatic) return requested;
  const char* v = std::getenv("LADDER_GPU_TILES");
  if (v != nullptr && std::strcmp(v, "swizzled") == 0) return TcTiles::swizzled;
  if (v != nullptr && std::strcmp(v, "padded") == 0) return TcTiles::padded;
  return TcTiles::automatic;
}

GpuProducer resolve_producer(GpuProducer requested) {
  if (requested != GpuProducer::automatic) return requested;
  const char* v = std::getenv("LADDER_GPU_DAG");
  return v != nullptr && std::strcmp(v, "exact") == 0 ? GpuProducer::exact_dag : GpuProducer::tensor_core;
}

Status attend_layer_host(Route r, HostPlane& plane, int position, int slot, const HeadShape& shape,
                         const LayerIO& io, LaunchTuning tuning) {
  LADDER_TRY(cuda::check_head_shape(shape));
  LADDER_TRY(cuda_detail::require_device());
  using cuda_detail::DeviceArray;
  const std::size_t plane_elems = plane.elements();
  const std::size_t q_elems = static_cast<std::size_t>(shape.n_heads) * shape.head_dim;
  const std::size_t kv_elems = static_cast<std::size_t>(shape.n_kv_heads) * shape.head_dim;
  DeviceArray<KvWord> dk, dv;
  DeviceArray<float> dq, dcur_k, dcur_v, dout;
  LADDER_TRY(dk.allocate(plane_elems, "plane K"));
  LADDER_TRY(dv.allocate(plane_elems, "plane V"));
  LADDER_TRY(dq.allocate(q_elems, "q"));
  LADDER_TRY(dcur_k.allocate(kv_elems, "k"));
  LADDER_TRY(dcur_v.allocate(kv_elems, "v"));
  LADDER_TRY(dout.allocate(q_elems, "out"));
  LADDER_TRY(dk.upload(plane.k(), plane_elems));
  LADDER_TRY(dv.upload(plane.v(), plane_elems));
  LADDER_TRY(dq.upload(io.q, q_elems));
  LADDER_TRY(dcur_k.upload(io.k, kv_elems));
  LADDER_TRY(dcur_v.upload(io.v, kv_elems));

  const int visible = visible_rows(position, plane.config().window);
  Result<cuda::DeviceWorkspace> ws = cuda::allocate_workspace(scratch_needs(r, shape_geometry(shape), visible));
  if (!ws) return ws.status();

  cuda::DevicePlane dp;
  dp.cfg = plane.config();
  dp.state = plane.state();
  dp.k = dk.get();
  dp.v = dv.get();
  cuda::DeviceLayerIO dio{dq.get(), dcur_k.get(), dcur_v.get(), dout.get()};
  LADDER_TRY(cuda::run_route(r, dp, position, slot, shape, dio, *ws, nullptr, tuning));
  LADDER_TRY(cuda_detail::cuda_status(cudaDeviceSynchronize(), "running the route"));
  LADDER_TRY(dout.download(io.out, q_elems));

  // The stored row, written back so the host plane's bytes match a CPU run.
  const PlaneStrides s = plane.strides();
  for (int h = 0; h < shape.n_kv_heads; ++h) {
    const std::size_t at = static_cast<std::size_t>(s.offset(slot, h));
    LADDER_TRY(dk.download_range(plane.k() + at, at, static_cast<std::size_t>(shape.head_dim)));
    LADDER_TRY(dv.download_range(plane.v() + at, at, static_cast<std::size_t>(shape.head_dim)));
  }
  return {};
}

}  // namespace cuda

bool cuda_default_uses_tensor_cores() {
  return cuda::resolve_producer(cuda::GpuProducer::automatic) == cuda::GpuProducer::tensor_core;
}

}  // namespace ladder
