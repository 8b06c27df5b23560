// `ladder bench` on the GPU: the B1 protocol in one process.
//  1. Ceiling: a device-to-device copy (bytes read + written) and a read-only streaming kernel,
//     both from the CUDA backend's probes; the higher is the ceiling.
//  2. Single layer per route and depth: one CUDA graph holds one run_route per buffer set, each
//     set its own plane and activations, so consecutive layers never find their rows in L2
//     (sets total >= rotate_factor x L2). Time per layer = graph replay time / sets; medians.
//  3. The 52-layer step: one graph per buffer set with the ladder's route for every layer, sets
//     rotated the same way; and Engine::encode_token (the engine's own cached step graph plus
//     its host<->device activation copies) where filling the engine to that depth is cheap.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <random>

#include "bench.hpp"
#include "ladder/engine.hpp"
#include "ladder/reference.hpp"

#ifdef LADDER_HAS_CUDA
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "ladder/cuda/cuda_backend.hpp"
#include "ladder/cuda/timeline.hpp"
#include "ladder/cuda_engine.hpp"
#endif

namespace ladder::bench {

#ifndef LADDER_HAS_CUDA

Result<Report> run_gpu(const Geometry&, const Options&) {
  return make_error(ErrorCode::no_device,
                    "this build of ladder has no CUDA device support; run `ladder bench --device cpu`");
}

#else

namespace {

// Probe size: 1 GiB is ~17x the H200's L2 and a few hundred microseconds per run, far above
// event resolution.
constexpr std::int64_t kProbeBytes = std::int64_t{1} << 30;
constexpr int kProbeReps = 30;
constexpr int kWarmupReplays = 3;
// Replays of one timed layer-batch call's step graph, back to back: the host's launch latency
// before the first replay is spread over all of them.
constexpr int kLayerBatchReplays = 10;
// Seed of the synthetic rows and activations (uniform in [-1, 1), never zeros).
constexpr std::uint64_t kSeed = 0x1adde5;

Status cu(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return {};
  (void)cudaGetLastError();
  return make_error(e == cudaErrorMemoryAllocation ? ErrorCode::out_of_memory : ErrorCode::device_error,
                    fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

// Diagnostic builds (LADDER_DIAG_TIMELINE) with LADDER_TIMELINE_DIR set: the kernels' marks
// (include/ladder/cuda/timeline.hpp) of each row's last timed replay go to <dir>/<row>.bin, 32-byte
// records, beside <row>.tags: one line per buffer set and layer, "set layer q out" (the addresses
// the producer and reducer marks carry as tags). scripts/timeline_summary.py reads both.
constexpr std::uint32_t kTimelineRecords = 1u << 22;
struct TimelineTag {
  int set = 0;
  int layer = 0;
  const void* q = nullptr;
  const void* out = nullptr;
};

const char* timeline_dir() {
  const char* d = std::getenv("LADDER_TIMELINE_DIR");
  return d != nullptr && *d != '\0' && cuda::timeline_compiled() ? d : nullptr;
}

Status write_timeline(const std::string& label, const std::vector<TimelineTag>& tags) {
  const char* dir = timeline_dir();
  if (dir == nullptr) return {};
  Result<std::vector<cuda::TimelineRecord>> recs = cuda::timeline_take();
  if (!recs.ok()) return recs.status();
  std::string stem = label;
  for (char& ch : stem)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  const std::string base = fmt::format("{}/{}", dir, stem);
  std::FILE* f = std::fopen((base + ".bin").c_str(), "wb");
  if (f == nullptr) return make_error(ErrorCode::invalid_argument, fmt::format("cannot write {}.bin", base));
  const std::size_t wrote = std::fwrite(recs->data(), sizeof(cuda::TimelineRecord), recs->size(), f);
  std::fclose(f);
  if (wrote != recs->size()) return make_error(ErrorCode::internal, fmt::format("short write of {}.bin", base));
  std::FILE* t = std::fopen((base + ".tags").c_str(), "w");
  if (t == nullptr) return make_error(ErrorCode::invalid_argument, fmt::format("cannot write {}.tags", base));
  for (const TimelineTag& g : tags)
    std::fprintf(t, "%d %d %llu %llu\n", g.set, g.layer,
                 static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(g.q)),
                 static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(g.out)));
  std::fclose(t);
  return {};
}

class DevBuf {
 public:
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  ~DevBuf() {
    if (p_ != nullptr) cudaFree(p_);
  }
  Status allocate(std::size_t bytes) { return cu(cudaMalloc(&p_, std::max<std::size_t>(bytes, 1)), "cudaMalloc"); }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
};


// The plane state after appending `position` to an empty plane, by the library's rule.
Result<AppendPlan> plan_at(const PlaneConfig& cfg, int position) {
  PlaneState st;
  st.capacity = cfg.capacity;
  for (int p = 0; p < position; ++p) {
    Result<AppendPlan> plan = plan_append(cfg, st, p);
    if (!plan.ok()) return plan.status();
    st = plan->next;
  }
  return plan_append(cfg, st, position);
}

// One layer's device buffers: plane rows (random f16) and activations (random f32).
struct LayerBuffers {
  DevBuf k, v, q, cur_k, cur_v, out;
  cuda::DevicePlane plane;
  cuda::DeviceLayerIO io;
  int slot = 0;
};

Status make_layer(const Geometry& g, const PlaneConfig& cfg, const AppendPlan& plan, const std::vector<KvWord>& rows,
                  const std::vector<float>& acts, LayerBuffers& b) {
  const std::size_t halfs = static_cast<std::size_t>(plan.next.capacity) * cfg.n_kv_heads * cfg.head_dim;
  const std::size_t plane_bytes = halfs * sizeof(KvWord);
  const std::size_t q_elems = static_cast<std::size_t>(g.n_heads) * g.head_dim;
  const std::size_t kv_elems = static_cast<std::size_t>(g.n_kv_heads) * g.head_dim;
  LADDER_TRY(b.k.allocate(plane_bytes));
  LADDER_TRY(b.v.allocate(plane_bytes));
  LADDER_TRY(b.q.allocate(q_elems * 4));
  LADDER_TRY(b.out.allocate(q_elems * 4));
  LADDER_TRY(b.cur_k.allocate(kv_elems * 4));
  LADDER_TRY(b.cur_v.allocate(kv_elems * 4));
  // Rows are random and distinct per plane (an offset into one random pool), never zeros.
  const std::size_t offset = (reinterpret_cast<std::uintptr_t>(b.k.as<void>()) >> 8) % (rows.size() - halfs + 1);
  LADDER_TRY(cu(cudaMemcpy(b.k.as<void>(), rows.data() + offset, plane_bytes, cudaMemcpyHostToDevice), "uploading K"));
  LADDER_TRY(cu(cudaMemcpy(b.v.as<void>(), rows.data() + (rows.size() - halfs - offset), plane_bytes,
                           cudaMemcpyHostToDevice),
                "uploading V"));
  LADDER_TRY(cu(cudaMemcpy(b.q.as<void>(), acts.data(), q_elems * 4, cudaMemcpyHostToDevice), "uploading q"));
  LADDER_TRY(cu(cudaMemcpy(b.cur_k.as<void>(), acts.data() + q_elems, kv_elems * 4, cudaMemcpyHostToDevice), "k"));
  LADDER_TRY(cu(cudaMemcpy(b.cur_v.as<void>(), acts.data() + q_elems + kv_elems, kv_elems * 4, cudaMemcpyHostToDevice),
                "v"));
  b.plane = cuda::DevicePlane{cfg, plan.next, b.k.as<KvWord>(), b.v.as<KvWord>(), 0};
  b.io = cuda::DeviceLayerIO{b.q.as<float>(), b.cur_k.as<float>(), b.cur_v.as<float>(), b.out.as<float>()};
  b.slot = plan.slot;
  return {};
}

// Replays graphs round-robin (`reps` timed launches after warm-ups), each timed with events;
// every launch counts `per_launch` units (layers or steps).
Result<Timing> time_graphs(const std::vector<cudaGraphExec_t>& graphs, int reps, int per_launch, cudaStream_t s) {
  cudaEvent_t a = nullptr, b = nullptr;
  LADDER_TRY(cu(cudaEventCreate(&a), "cudaEventCreate"));
  LADDER_TRY(cu(cudaEventCreate(&b), "cudaEventCreate"));
  Status st;
  for (int i = 0; st.ok() && i < kWarmupReplays * static_cast<int>(graphs.size()); ++i)
    st = cu(cudaGraphLaunch(graphs[i % graphs.size()], s), "cudaGraphLaunch");
  if (st.ok()) st = cu(cudaStreamSynchronize(s), "warm-up replays");
  std::vector<double> us;
  for (int i = 0; st.ok() && i < reps; ++i) {
    if (i + 1 == reps) st = cuda::timeline_reset(s);  // diagnostic builds record the last replay
    if (st.ok()) st = cu(cudaEventRecord(a, s), "cudaEventRecord");
    if (st.ok()) st = cu(cudaGraphLaunch(graphs[i % graphs.size()], s), "cudaGraphLaunch");
    if (st.ok()) st = cu(cudaEventRecord(b, s), "cudaEventRecord");
    if (st.ok()) st = cu(cudaEventSynchronize(b), "replaying a graph");
    float ms = 0;
    if (st.ok()) st = cu(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    us.push_back(1e3 * ms / per_launch);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (!st.ok()) return st;
  return summarize(std::move(us));
}

// Captures `enqueue` (run_route calls on `s`) as one graph.
template <class Enqueue>
Result<cudaGraphExec_t> capture(cudaStream_t s, Enqueue&& enqueue) {
  LADDER_TRY(cu(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture"));
  const Status inner = enqueue();
  cudaGraph_t graph = nullptr;
  const Status ended = cu(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
  LADDER_TRY(inner);
  LADDER_TRY(ended);
  cudaGraphExec_t exec = nullptr;
  const Status inst = cu(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cudaGraphDestroy(graph);
  LADDER_TRY(inst);
  return exec;
}

Status check_finite(const float* dev_out, std::size_t n, std::string& note) {
  std::vector<float> h(n);
  LADDER_TRY(cu(cudaMemcpy(h.data(), dev_out, n * 4, cudaMemcpyDeviceToHost), "reading an output"));
  flag_non_finite(h.data(), n, note);
  return {};
}


HeadShape shape_of(const Geometry& g) { return HeadShape{g.n_heads, g.n_kv_heads, g.head_dim, g.scale()}; }

// Single layer: `c.route` on the plane layer_plane_config() describes (bench.hpp).
Result<Row> bench_layer(const Geometry& g, const LayerCase& c, int depth, const Options& o, std::int64_t l2,
                        cudaStream_t s, const std::vector<KvWord>& pool, const std::vector<float>& acts) {
  const PlaneConfig cfg = layer_plane_config(g, c.plane, depth);
  const int position = layer_position(c.plane, depth);
  Result<AppendPlan> plan = plan_at(cfg, position);
  if (!plan.ok()) return plan.status();

  const std::int64_t plane_bytes = g.kv_bytes_per_token_layer() * depth;
  const int sets = rotation_sets(plane_bytes, l2, o.rotate_factor);
  std::vector<LayerBuffers> bufs(sets);
  for (auto& b : bufs) LADDER_TRY(make_layer(g, cfg, *plan, pool, acts, b));
  Result<cuda::DeviceWorkspace> ws = cuda::allocate_workspace(scratch_needs(c.route, g, depth));
  if (!ws.ok()) return ws.status();
  const HeadShape shape = shape_of(g);
  Result<cudaGraphExec_t> exec = capture(s, [&]() -> Status {
    for (auto& b : bufs) LADDER_TRY(cuda::run_route(c.route, b.plane, position, b.slot, shape, b.io, *ws, s));
    return {};
  });
  Row row;
  if (exec.ok()) {
    Result<Timing> t = time_graphs({*exec}, o.reps, sets, s);
    cudaGraphExecDestroy(*exec);
    std::vector<TimelineTag> tags;
    if (timeline_dir() != nullptr)
      for (int i = 0; i < sets; ++i) tags.push_back({i, 0, bufs[i].q.as<void>(), bufs[i].out.as<void>()});
    const Status written = t.ok() ? write_timeline(fmt::format("layer {} {}", case_name(c), depth), tags) : Status{};
    if (!t.ok() || !written.ok()) return t.ok() ? written : t.status();
    set_timing(row, *t);
    LADDER_TRY(check_finite(bufs[0].io.out, static_cast<std::size_t>(g.n_heads) * g.head_dim, row.note));
  }
  if (!exec.ok()) return exec.status();
  row.kind = "layer";
  row.name = case_name(c);
  row.depth = depth;
  row.bytes = layer_bytes(g, depth);
  row.rotation_sets = sets;
  row.rotated_bytes = plane_bytes * sets;
  return row;
}

// How the layers of a timed step depend on each other.
enum class StepLink {
  independent,  // every layer's activations are given (the engine's step: q/k/v copied in first)
  chained,      // layer i+1's q, k, v are computed from layer i's output by a small kernel
  chained_pdl,  // the same, every kernel launched with programmatic dependent launch
};

// The 52-layer step at depth D (the token at position D-1): every layer's plane in the state
// the append rule gives it there, the route the ladder picks, one graph per buffer set.
Result<Row> bench_step(const Geometry& g, int depth, const Switches& sw, const char* name, StepLink link,
                       const Options& o, std::int64_t l2, cudaStream_t s, const std::vector<KvWord>& pool,
                       const std::vector<float>& acts) {
  const int position = depth - 1;
  std::map<LayerClass, std::pair<PlaneConfig, AppendPlan>> per_class;
  std::int64_t set_bytes = 0;
  std::map<std::string, int> mix;
  for (int l = 0; l < g.n_layers; ++l) {
    const LayerClass cls = g.layer_class(l);
    if (!per_class.count(cls)) {
      const PlaneConfig cfg = PlaneConfig::for_layer(g, cls);
      Result<AppendPlan> plan = plan_at(cfg, position);
      if (!plan.ok()) return plan.status();
      per_class.emplace(cls, std::make_pair(cfg, *plan));
    }
    const auto& [cfg, plan] = per_class.at(cls);
    set_bytes += g.kv_bytes_per_token_layer() * plan.next.capacity;
    mix[route_name(choose_route(cls, plan.next, Capabilities{}, sw).route)] += 1;
  }
  const int sets = rotation_sets(set_bytes, l2, o.rotate_factor);
  std::vector<std::vector<LayerBuffers>> bufs(sets);
  for (auto& set : bufs) {
    set = std::vector<LayerBuffers>(g.n_layers);
    for (int l = 0; l < g.n_layers; ++l) {
      const auto& [cfg, plan] = per_class.at(g.layer_class(l));
      LADDER_TRY(make_layer(g, cfg, plan, pool, acts, set[l]));
    }
  }
  Result<cuda::DeviceWorkspace> ws = cuda::allocate_workspace(max_scratch_needs(g));
  if (!ws.ok()) return ws.status();
  const HeadShape shape = shape_of(g);
  // The chained steps' base activations (the same random values every layer starts from).
  DevBuf base;
  const std::size_t q_elems = static_cast<std::size_t>(g.n_heads) * g.head_dim;
  const std::size_t kv_elems = static_cast<std::size_t>(g.n_kv_heads) * g.head_dim;
  LADDER_TRY(base.allocate(acts.size() * 4));
  LADDER_TRY(cu(cudaMemcpy(base.as<void>(), acts.data(), acts.size() * 4, cudaMemcpyHostToDevice), "uploading base"));
  cuda::LaunchTuning tuning;
  tuning.programmatic = link == StepLink::chained_pdl;
  // PDL needs a fused form (the separate store and producer have no pre-wait part): the one the
  // environment or the default selects, else the one-kernel form.
  if (tuning.programmatic && cuda::resolve_fusion(cuda::GpuFusion::automatic) == cuda::GpuFusion::separate)
    tuning.fusion = cuda::GpuFusion::fused;
  std::vector<cudaGraphExec_t> graphs;
  Status st;
  for (auto& set : bufs) {
    Result<cudaGraphExec_t> exec = capture(s, [&]() -> Status {
      for (int l = 0; l < g.n_layers; ++l) {
        const LayerClass cls = g.layer_class(l);
        const Route r = choose_route(cls, set[l].plane.state, Capabilities{}, sw).route;
        LADDER_TRY(cuda::run_route(r, set[l].plane, position, set[l].slot, shape, set[l].io, *ws, s, tuning));
        if (link != StepLink::independent && l + 1 < g.n_layers) {
          cuda::LayerLink next;
          next.out = set[l].io.out;
          next.base_q = base.as<float>();
          next.base_k = base.as<float>() + q_elems;
          next.base_v = base.as<float>() + q_elems + kv_elems;
          next.q = set[l + 1].q.as<float>();
          next.k = set[l + 1].cur_k.as<float>();
          next.v = set[l + 1].cur_v.as<float>();
          LADDER_TRY(cuda::enqueue_layer_link(next, shape, s, tuning.programmatic));
        }
      }
      return {};
    });
    if (!exec.ok()) {
      st = exec.status();
      break;
    }
    graphs.push_back(*exec);
  }
  Row row;
  if (st.ok()) {
    Result<Timing> t = time_graphs(graphs, o.reps, 1, s);
    if (t.ok() && timeline_dir() != nullptr) {
      std::vector<TimelineTag> tags;
      for (int i = 0; i < sets; ++i)
        for (int l = 0; l < g.n_layers; ++l)
          tags.push_back({i, l, bufs[i][l].q.as<void>(), bufs[i][l].out.as<void>()});
      st = write_timeline(fmt::format("{} {}", name, depth), tags);
    }
    if (st.ok() && t.ok()) {
      set_timing(row, *t);
      st = check_finite(bufs[0][g.n_layers - 1].io.out, static_cast<std::size_t>(g.n_heads) * g.head_dim, row.note);
    } else if (!t.ok()) {
      st = t.status();
    }
  }
  for (cudaGraphExec_t e : graphs) cudaGraphExecDestroy(e);
  LADDER_TRY(st);
  row.kind = "step";
  row.name = name;
  row.route_mix = format_route_mix(mix);
  row.depth = depth;
  row.bytes = step_bytes(g, position);
  row.rotation_sets = sets;
  row.rotated_bytes = set_bytes * sets;
  return row;
}

// Engine::encode_token on the host clock (time_encode_token, bench_common.cpp), no rotation.
// Activations in host memory (device_io null): the engine a user gets (LADDER_CUDA_GRAPH and
// LADDER_GPU_PDL included), its cached step graph plus its copies of them in and the outputs
// back. In device memory (a caller whose model runs on the GPU, as through the Python module),
// from the engine `make` gives, one that also times each call with CUDA events: the row's time
// is the host clock like the host row's, its note gives the GPU time, so the two rows together
// say what the host-memory row pays for its copies.
Result<Row> bench_engine(const Geometry& g, int depth, const Options& o, const DeviceActivations* device_io = nullptr,
                         const MakeEngine& make = {}) {
  EngineOptions eo;
  eo.device = Device::cuda;
  Result<std::unique_ptr<Engine>> made =
      make ? make(g, eo) : cuda::create_engine(g, eo, cuda::default_engine_options());
  if (!made.ok()) return made.status();
  std::vector<TokenIO> io;
  if (device_io != nullptr) {
    Result<std::vector<TokenIO>> on_device = device_io->make(g, 1, kSeed);
    if (!on_device.ok()) return on_device.status();
    io = std::move(on_device).value();
  }
  Result<Row> row = time_encode_token(**made, depth, o.reps, kWarmupReplays, Switches{}, kSeed,
                                      device_io != nullptr ? &io : nullptr, device_io);
  if (!row.ok()) return row.status();
  row->kind = "engine";
  row->name = device_io != nullptr ? "encode_token, device I/O" : "encode_token";
  row->note += "; no rotation";
  return row;
}

}  // namespace

Result<Report> run_gpu(const Geometry& g, const Options& o) {
  Result<cuda::DeviceInfo> info = cuda::device_info();
  if (!info.ok()) return info.status();
  Report rep;
  rep.device = "cuda";
  rep.device_name = fmt::format("{} (sm_{}{}, {} SMs, {:.0f} MB L2)", info->name, info->cc_major, info->cc_minor,
                                info->sm_count, static_cast<double>(info->l2_bytes) / 1e6);
  rep.date = utc_now();
  rep.cache_bytes = info->l2_bytes;
  auto progress = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };

  progress("ceiling: device copy and read-only streaming bandwidth");
  Result<cuda::BandwidthSample> copy = cuda::measure_device_copy_bandwidth(kProbeBytes, kProbeReps);
  if (!copy.ok()) return copy.status();
  Result<cuda::BandwidthSample> read = cuda::measure_device_read_bandwidth(kProbeBytes, kProbeReps);
  if (!read.ok()) return read.status();
  rep.ceiling = Ceiling{copy->gb_per_s, read->gb_per_s, copy->bytes_moved, read->bytes_moved};

  int max_depth = 0;
  for (int d : o.depths) max_depth = std::max(max_depth, d);
  for (int d : o.step_depths) max_depth = std::max(max_depth, d);
  // One random pool, large enough for the biggest plane plus distinct offsets per plane.
  const std::size_t pool_halfs =
      2 * static_cast<std::size_t>(std::max(max_depth, 4096)) * g.n_kv_heads * g.head_dim + 4096;
  const std::vector<KvWord> pool = random_words(pool_halfs, kSeed, g.kv_dtype);
  const std::vector<float> acts =
      random_floats(static_cast<std::size_t>(g.n_heads + 2 * g.n_kv_heads) * g.head_dim, kSeed + 7);

  if (timeline_dir() != nullptr) LADDER_TRY(cuda::timeline_enable(kTimelineRecords));
  cudaStream_t s = nullptr;
  LADDER_TRY(cu(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
  Status st;
  const std::size_t total = o.depths.size() * o.cases.size() + o.step_depths.size();
  std::size_t done = 0;
  for (int depth : o.depths) {
    for (const LayerCase& c : o.cases) {
      progress(fmt::format("[{}/{}] layer {} at depth {}", ++done, total, case_name(c), depth));
      Result<Row> r = bench_layer(g, c, depth, o, rep.cache_bytes, s, pool, acts);
      if (!r.ok()) {
        st = r.status();
        break;
      }
      rep.rows.push_back(*r);
    }
    if (!st.ok()) break;
  }
  for (std::size_t i = 0; st.ok() && i < o.step_depths.size(); ++i) {
    const int depth = o.step_depths[i];
    progress(fmt::format("[{}/{}] {}-layer step at depth {}", ++done, total, g.n_layers, depth));
    if (depth > g.max_context) {
      st = make_error(ErrorCode::invalid_argument,
                      fmt::format("step depth {} is past the geometry's max context {}", depth, g.max_context));
      break;
    }
    for (const auto& [link, name] : {std::pair{StepLink::independent, "step"},
                                     std::pair{StepLink::chained, "step, chained"},
                                     std::pair{StepLink::chained_pdl, "step, chained + PDL"}}) {
      Result<Row> r = bench_step(g, depth, Switches{}, name, link, o, rep.cache_bytes, s, pool, acts);
      if (!r.ok()) {
        st = r.status();
        break;
      }
      rep.rows.push_back(*r);
    }
    if (!st.ok()) break;
    if (o.step_fallbacks) {
      Switches off;
      off.disable_vec = true;
      Result<Row> f =
          bench_step(g, depth, off, "step (vec off), chained + PDL", StepLink::chained_pdl, o, rep.cache_bytes, s, pool, acts);
      if (!f.ok()) {
        st = f.status();
        break;
      }
      rep.rows.push_back(*f);
    }
    if (o.engine_step && depth <= o.engine_max_depth) {
      progress(fmt::format("engine encode_token at depth {} (fills {} tokens first)", depth, depth));
      Result<Row> e = bench_engine(g, depth, o);
      if (!e.ok()) {
        st = e.status();
        break;
      }
      rep.rows.push_back(*e);
    }
  }
  cudaStreamDestroy(s);
  LADDER_TRY(st);
  // The batch rows again with every sequence's activations in device memory (what a serving
  // engine whose model runs on the GPU passes): the buffers live until the report is done.
  std::vector<DevBuf> activation_buffers;
  DeviceActivations on_device;
  on_device.make = [&](const Geometry& geo, int b, std::uint64_t seed) -> Result<std::vector<TokenIO>> {
    const std::size_t layers = static_cast<std::size_t>(geo.n_layers);
    const std::vector<float> q = random_floats(layers * geo.n_heads * geo.head_dim, seed + 1);
    const std::vector<float> k = random_floats(layers * geo.n_kv_heads * geo.head_dim, seed + 2);
    const std::vector<float> v = random_floats(layers * geo.n_kv_heads * geo.head_dim, seed + 3);
    const auto upload = [&](const std::vector<float>& h) -> Result<float*> {
      DevBuf d;
      LADDER_TRY(d.allocate(h.size() * sizeof(float)));
      LADDER_TRY(cu(cudaMemcpy(d.as<void>(), h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice),
                    "uploading activations"));
      activation_buffers.push_back(std::move(d));
      return activation_buffers.back().as<float>();
    };
    std::vector<TokenIO> ios;
    for (int i = 0; i < b; ++i) {
      TokenIO io;
      io.memory = Memory::device;
      Result<float*> dq = upload(q), dk = upload(k), dv = upload(v), dout = upload(std::vector<float>(q.size()));
      if (!dq || !dk || !dv || !dout) return make_error(ErrorCode::out_of_memory, "device activations for a batch row");
      io.q = *dq;
      io.k = *dk;
      io.v = *dv;
      io.out = *dout;
      ios.push_back(io);
    }
    return ios;
  };
  on_device.read_out = [](const TokenIO& io, std::size_t n) -> Result<std::vector<float>> {
    std::vector<float> h(n);
    LADDER_TRY(cu(cudaMemcpy(h.data(), io.out, n * sizeof(float), cudaMemcpyDeviceToHost), "reading an output"));
    return h;
  };
  // Engines whose calls are timed by CUDA events, each timed call replaying its graph `replays`
  // times.
  const auto timed_engine = [](int replays) -> MakeEngine {
    return [replays](const Geometry& geo, const EngineOptions& eo) {
      cuda::CudaEngineOptions copt = cuda::default_engine_options();
      copt.time_steps = true;
      copt.replays_per_timed_call = replays;
      return cuda::create_engine(geo, eo, copt);
    };
  };
  const MakeEngine timed = timed_engine(1);
  if (o.engine_step)
    for (int depth : o.step_depths) {
      if (depth > o.engine_max_depth) continue;
      progress(fmt::format("engine encode_token with device I/O at depth {} (fills {} tokens first)", depth, depth));
      Result<Row> r = bench_engine(g, depth, o, &on_device, timed);
      if (!r) return r.status();
      rep.rows.push_back(*r);
    }
  LADDER_TRY(add_batch_rows(g, Device::cuda, o, rep.rows, rep.notes, on_device, timed));
  // One layer over each batch size at each single-layer depth: what a peer's batched
  // single-layer call is compared with. The peers are timed as replays of a captured graph, back
  // to back, so these rows are too: each timed call replays its step graph kLayerBatchReplays
  // times between its events (a call timed alone also carries the host's launch latency).
  const MakeEngine replayed = timed_engine(kLayerBatchReplays);
  for (int b : o.batches)
    for (int d : o.depths)
      for (const LayerClass cls : {LayerClass::swa, LayerClass::nope}) {
        progress(fmt::format("one {} layer, batch {} at depth {} (GPU time)", layer_class_name(cls), b, d));
        // Diagnostic builds record the last timed call: its kLayerBatchReplays replays.
        std::function<Status()> reset;
        if (timeline_dir() != nullptr)
          reset = []() -> Status {
            LADDER_TRY(cu(cudaDeviceSynchronize(), "before the timeline's reset"));
            LADDER_TRY(cuda::timeline_reset(nullptr));
            return cu(cudaDeviceSynchronize(), "resetting the timeline");
          };
        Result<Row> r = time_layer_batch(g, cls, d, b, o.reps, on_device, replayed, reset);
        if (!r) return r.status();
        LADDER_TRY(write_timeline(fmt::format("layer-batch {} b{} {}", layer_class_name(cls), b, d), {}));
        r->note += fmt::format("; GPU time = {} back-to-back replays of the call's step graph / {} (no buffer "
                               "rotation)",
                               kLayerBatchReplays, kLayerBatchReplays);
        rep.rows.push_back(*r);
      }
  rep.notes.push_back(fmt::format(
      "single layer: {} KV heads x head_dim {} f16, {} query heads; a graph of one run_route per rotated buffer "
      "set, time per layer = replay time / sets; rings wrapped with window = capacity = depth",
      g.n_kv_heads, g.head_dim, g.n_heads));
  rep.notes.push_back(
      "step: one graph per buffer set holding the ladder's route for each layer (run_route chain, no host I/O); "
      "'chained': layer i+1's q, k, v computed from layer i's output by a small kernel (a real model's "
      "dependency); '+ PDL': the fused producers and the link kernels launched with programmatic dependent "
      "launch (each prefetches its KV rows before it waits for the previous kernel)");
  if (o.engine_step)
    rep.notes.push_back(fmt::format("engine: Engine::encode_token on the host clock (its cached step graph plus "
                                    "activation copies in and out; ', device I/O': the activations in device memory, the "
                                    "note giving the call's GPU time), depths <= {}",
                                    o.engine_max_depth));
  if (!o.batches.empty())
    rep.notes.push_back("batch rows: Engine::encode on the host clock, one call per token for every sequence "
                        "(one launch per layer and kernel family over all of them), with the activations in host "
                        "memory (copies in and out included) and, ', device I/O', in device memory");
  return rep;
}

#endif

}  // namespace ladder::bench
