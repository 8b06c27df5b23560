// `ladder demo` (C1): decode tokens through a geometry (Muse Glimmer by default) with seeded
// synthetic activations, starting at a depth, on the default device; report the route mix,
// time per token, achieved KV bandwidth against the memory bandwidth measured in the same run,
// and the max relative error of sampled layers against the f64 reference.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "commands.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/cpu/membw.hpp"
#include "ladder/reference.hpp"
#ifdef LADDER_HAS_CUDA
#include "ladder/cuda/cuda_backend.hpp"
#endif

namespace ladder::cli {
namespace {

// SPEC P3: relative error bound against the f64 reference of the stored elements (either KV
// dtype: the reference reads what the planes hold, so the dtype's rounding is not in this error).
constexpr double kRelErrorBound = 2e-3;
// Decoded tokens per run: each one is a full step over every layer (about 0.2 s for Muse
// Glimmer at depth 2048 on a 2-core host), so more than this is a benchmark, not a demo.
constexpr int kMaxTokens = 1024;
// KV bytes the demo fills and holds in memory (depth x layers x KV bytes per token per layer):
// Muse Glimmer at its full context is 131072 x 52 x 1024 B = 7.0 GB; more is refused up front
// instead of running out of memory or filling for many minutes.
constexpr double kMaxFillBytes = 8e9;
// Layers per token checked against the f64 reference unless --check-layers says otherwise
// (fewer when the geometry has fewer layers).
constexpr int kDefaultCheckLayers = 4;
// Sequences one demo call may decode at once (--batch): each holds its own planes.
constexpr int kMaxBatch = 256;
// Progress lines while filling: one per this fraction of the depth.
constexpr int kProgressSteps = 4;
// Buffer for the host bandwidth measurement: far above any last-level cache, so the number is
// DRAM streaming, the regime a deep KV read is in.
constexpr std::size_t kBandwidthProbeBytes = std::size_t{256} << 20;
#ifdef LADDER_HAS_CUDA
// GPU probe: 1 GiB is far above the L2 of any current card; repetitions give a stable median.
constexpr std::int64_t kDeviceProbeBytes = std::int64_t{1} << 30;
constexpr int kDeviceProbeReps = 20;
#endif

struct Options {
  GeometryFlags geometry;
  SwitchFlags switches;
  int tokens = 8;
  int depth = 2048;
  int batch = 1;
  std::uint64_t seed = 1;
  std::string device = "auto";
  CpuFlags cpu_flags;
  int check_layers = kDefaultCheckLayers;
  CLI::Option* check_layers_given = nullptr;
  bool json = false;
};

struct LayerBuffers {
  std::vector<float> q, k, v, out;
  LayerBuffers(const Geometry& g)
      : q(static_cast<std::size_t>(g.n_layers) * g.n_heads * g.head_dim),
        k(static_cast<std::size_t>(g.n_layers) * g.n_kv_heads * g.head_dim),
        v(k.size()),
        out(q.size()) {}
  void generate(const Geometry& g, std::uint64_t seed, int position, bool with_q) {
    const int qn = g.n_heads * g.head_dim, kvn = g.n_kv_heads * g.head_dim;
    for (int layer = 0; layer < g.n_layers; ++layer) {
      if (with_q) fill_synthetic(seed, Stream::q, position, layer, q.data() + layer * qn, qn);
      fill_synthetic(seed, Stream::k, position, layer, k.data() + layer * kvn, kvn);
      fill_synthetic(seed, Stream::v, position, layer, v.data() + layer * kvn, kvn);
    }
  }
  TokenIO io() { return {q.data(), k.data(), v.data(), out.data()}; }
};

// The f64 reference for one layer at one position, from regenerated activations: rows rounded
// to the geometry's KV dtype as the planes hold them, except the current token on the interleaved route, which
// reads it from the f32 activations.
double check_layer(const Geometry& g, std::uint64_t seed, int position, int layer, Route route,
                   const float* q, const float* out) {
  const LayerClass cls = g.layer_class(layer);
  const int visible = g.visible(cls, position);
  const int first = position + 1 - visible;
  const int kvn = g.n_kv_heads * g.head_dim, qn = g.n_heads * g.head_dim;
  std::vector<double> kr(static_cast<std::size_t>(visible) * kvn), vr(kr.size()), qd(q, q + qn), ref(qn);
  std::vector<float> kf(kvn), vf(kvn);
  for (int t = 0; t < visible; ++t) {
    const int pos = first + t;
    fill_synthetic(seed, Stream::k, pos, layer, kf.data(), kvn);
    fill_synthetic(seed, Stream::v, pos, layer, vf.data(), kvn);
    const bool raw = route == Route::interleaved && pos == position;
    for (int e = 0; e < kvn; ++e) {
      kr[static_cast<std::size_t>(t) * kvn + e] = raw ? kf[e] : kv_decode(kv_encode(kf[e], g.kv_dtype), g.kv_dtype);
      vr[static_cast<std::size_t>(t) * kvn + e] = raw ? vf[e] : kv_decode(kv_encode(vf[e], g.kv_dtype), g.kv_dtype);
    }
  }
  HeadShape shape{g.n_heads, g.n_kv_heads, g.head_dim, g.scale()};
  reference_attention(shape, qd.data(), kr.data(), vr.data(), visible, ref.data());
  return relative_error(out, ref.data(), static_cast<std::size_t>(qn));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Sequence i of a batch of n starts decoding at depth - i * depth / n: mixed lengths, the first
// at the full depth (n == 1: the single sequence of the plain demo).
int depth_of(const Options& o, int i) {
  return o.depth - static_cast<int>(static_cast<long long>(o.depth) * i / o.batch);
}

int run(const Options& o) {
  const Geometry g = o.geometry.resolve();
  if (o.tokens < 1 || o.tokens > kMaxTokens)
    throw UsageError(fmt::format("--tokens must be in 1..{} (got {})", kMaxTokens, o.tokens));
  if (o.depth < 0) throw UsageError(fmt::format("--depth must be >= 0 (got {})", o.depth));
  if (o.batch < 1 || o.batch > kMaxBatch)
    throw UsageError(fmt::format("--batch must be in 1..{} (got {})", kMaxBatch, o.batch));
  if (static_cast<long long>(o.depth) + o.tokens > g.max_context)
    throw UsageError(fmt::format("--depth {} + --tokens {} runs past the max context of {} positions", o.depth,
                                 o.tokens, g.max_context));
  double fill_bytes = 0.0;
  for (int i = 0; i < o.batch; ++i)
    fill_bytes += (static_cast<double>(depth_of(o, i)) + o.tokens) * g.n_layers *
                  static_cast<double>(g.kv_bytes_per_token_layer());
  if (fill_bytes > kMaxFillBytes)
    throw UsageError(fmt::format("--depth {} + --tokens {} over {} layers and {} sequences holds {} of KV; at most {} "
                                 "(a smaller depth, batch or geometry)",
                                 o.depth, o.tokens, g.n_layers, o.batch, human_bytes(fill_bytes),
                                 human_bytes(kMaxFillBytes)));
  // The default adapts to a geometry of fewer layers; an explicit value must fit it.
  const bool check_given = o.check_layers_given != nullptr && o.check_layers_given->count() > 0;
  const int check_layers = check_given ? o.check_layers : std::min(kDefaultCheckLayers, g.n_layers);
  if (check_layers < 0 || check_layers > g.n_layers)
    throw UsageError(fmt::format("--check-layers must be in 0..{} (got {})", g.n_layers, check_layers));
  o.cpu_flags.apply();

  EngineOptions eo;
  eo.device = resolve_device(o.device);
  eo.record_trace = true;
  eo.switches = o.switches.merged_with_env();
  Result<std::unique_ptr<Engine>> created = Engine::create(g, eo);
  if (!created) {
    std::fprintf(stderr, "ladder demo: cannot create the %s engine: %s\n", device_name(eo.device),
                 created.status().to_string().c_str());
    return kExitFailure;
  }
  Engine& engine = *created.value();
  // Sequence i: engine id ids[i], activations from seed + i, decoding from depth_of(i).
  std::vector<SequenceId> ids{0};
  for (int i = 1; i < o.batch; ++i) {
    Result<SequenceId> id = engine.add_sequence();
    if (!id) {
      std::fprintf(stderr, "ladder demo: cannot add sequence %d: %s\n", i, id.status().to_string().c_str());
      return kExitFailure;
    }
    ids.push_back(*id);
  }
  const auto seed_of = [&](int i) { return o.seed + static_cast<std::uint64_t>(i); };

  if (!o.json) {
    std::printf("geometry: %s\n", g.describe().c_str());
    std::printf("device:   %s\n", engine.device_description().c_str());
    std::printf("settings: depth %d, tokens %d, seed %llu, reference check on %d layers per token, switches: %s\n",
                o.depth, o.tokens, static_cast<unsigned long long>(o.seed), check_layers,
                describe_switches(eo.switches).c_str());
    if (o.batch > 1)
      std::printf("batch:    %d sequences decoded per call, depths %d down to %d (sequence i: seed %llu + i)\n", o.batch,
                  depth_of(o, 0), depth_of(o, o.batch - 1), static_cast<unsigned long long>(o.seed));
    std::fflush(stdout);
  }

  std::vector<LayerBuffers> bufs(static_cast<std::size_t>(o.batch), LayerBuffers(g));
  const auto fill_start = std::chrono::steady_clock::now();
  const int progress_every = std::max(1, o.depth / kProgressSteps);
  for (int pos = 0; pos < o.depth; ++pos) {
    std::vector<SequenceToken> call;
    for (int i = 0; i < o.batch; ++i) {
      if (pos >= depth_of(o, i)) continue;
      LayerBuffers& b = bufs[static_cast<std::size_t>(i)];
      b.generate(g, seed_of(i), pos, false);
      call.push_back({ids[static_cast<std::size_t>(i)], pos, b.io()});
    }
    const Status st = engine.fill(call);
    if (!st.ok()) {
      std::fprintf(stderr, "ladder demo: filling position %d failed: %s\n", pos, st.to_string().c_str());
      return kExitFailure;
    }
    if ((pos + 1) % progress_every == 0 || pos + 1 == o.depth)
      std::fprintf(stderr, "filling KV planes: %d/%d positions\n", pos + 1, o.depth);
  }
  const double fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - fill_start).count();

  std::vector<double> times;
  std::array<long long, kRouteCount> mix{};
  double max_err = 0.0;
  int checked = 0;
  std::vector<double> token_bytes;
  for (int t = 0; t < o.tokens; ++t) {
    std::vector<SequenceToken> call;
    for (int i = 0; i < o.batch; ++i) {
      LayerBuffers& b = bufs[static_cast<std::size_t>(i)];
      b.generate(g, seed_of(i), depth_of(o, i) + t, true);
      std::fill(b.out.begin(), b.out.end(), std::numeric_limits<float>::quiet_NaN());
      call.push_back({ids[static_cast<std::size_t>(i)], depth_of(o, i) + t, b.io()});
    }
    engine.clear_trace();
    const auto t0 = std::chrono::steady_clock::now();
    const Status st = engine.encode(call);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!st.ok()) {
      std::fprintf(stderr, "ladder demo: decoding token %d (sequence 0 at position %d) failed: %s\n", t,
                   depth_of(o, 0) + t, st.to_string().c_str());
      return kExitFailure;
    }
    times.push_back(dt);
    double bytes = 0.0;
    for (const TraceEntry& e : engine.trace()) {
      ++mix[static_cast<std::size_t>(e.decision.route)];
      bytes += static_cast<double>(e.visible) * static_cast<double>(g.kv_bytes_per_token_layer());
    }
    token_bytes.push_back(bytes);
    // Rotate the checked (sequence, layer) pairs so that successive tokens cover different ones.
    for (int j = 0; j < check_layers; ++j) {
      const int layer = (t * check_layers + j) % g.n_layers;
      const int i = (t * check_layers + j) / g.n_layers % o.batch;
      const std::size_t entry = static_cast<std::size_t>(i) * g.n_layers + static_cast<std::size_t>(layer);
      const Route route = engine.trace()[entry].decision.route;
      const LayerBuffers& b = bufs[static_cast<std::size_t>(i)];
      const std::size_t qoff = static_cast<std::size_t>(layer) * g.n_heads * g.head_dim;
      const double err =
          check_layer(g, seed_of(i), depth_of(o, i) + t, layer, route, b.q.data() + qoff, b.out.data() + qoff);
      max_err = std::max(max_err, std::isnan(err) ? std::numeric_limits<double>::infinity() : err);
      ++checked;
    }
  }

  const double t_med = median(times);
  const double bytes_med = median(token_bytes);
  const double achieved = bytes_med / t_med;
  double ceiling = 0.0;
  std::string ceiling_what;
  if (engine.device() == Device::cpu) {
    ceiling = cpu::measure_host_read_bandwidth(kBandwidthProbeBytes, cpu::threads());
    ceiling_what = "host read bandwidth, measured in this run";
  }
#ifdef LADDER_HAS_CUDA
  if (engine.device() == Device::cuda) {
    // B1: the ceiling is the higher of device-to-device copy (read + written) and read-only
    // streaming. encode_token's time includes moving the activations between host and device.
    const Result<cuda::BandwidthSample> copy = cuda::measure_device_copy_bandwidth(kDeviceProbeBytes, kDeviceProbeReps);
    const Result<cuda::BandwidthSample> read = cuda::measure_device_read_bandwidth(kDeviceProbeBytes, kDeviceProbeReps);
    const double copy_bps = copy ? copy->gb_per_s * 1e9 : 0.0;
    const double read_bps = read ? read->gb_per_s * 1e9 : 0.0;
    ceiling = std::max(copy_bps, read_bps);
    ceiling_what = copy_bps > read_bps ? "device copy bandwidth (read + written), measured in this run"
                                       : "device read bandwidth, measured in this run";
  }
#endif
  const bool pass = checked == 0 || max_err <= kRelErrorBound;
  // N1's counters over every fill and decode of the run (docs/nonfinite.md): never silent.
  const RangeStats range = engine.range_stats();

  if (o.json) {
    nlohmann::json j;
    j["geometry"] = g.describe();
    j["kv_dtype"] = kv_dtype_name(g.kv_dtype);
    j["device"] = engine.device_description();
    j["depth"] = o.depth;
    j["tokens"] = o.tokens;
    j["batch"] = o.batch;
    for (int i = 0; i < o.batch; ++i) j["depths"].push_back(depth_of(o, i));
    j["seed"] = o.seed;
    j["switches"] = describe_switches(eo.switches);
    for (int r = 0; r < kRouteCount; ++r) j["route_mix"][route_name(static_cast<Route>(r))] = mix[r];
    j["fill_seconds"] = fill_s;
    j["time_per_token_median_s"] = t_med;
    j["time_per_token_s"] = times;
    j["kv_bytes_per_token"] = bytes_med;
    j["achieved_bytes_per_s"] = achieved;
    if (ceiling > 0) {
      j["ceiling_bytes_per_s"] = ceiling;
      j["fraction_of_ceiling"] = achieved / ceiling;
    }
    j["reference_checked_layers"] = checked;
    j["max_relative_error"] = max_err;
    j["relative_error_bound"] = kRelErrorBound;
    j["range_rule"] = {{"saturated", range.saturated}, {"nonfinite", range.nonfinite}};
    j["pass"] = pass;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("filled %d positions in %.2f s (KV append only, no attention)\n", o.depth, fill_s);
    long long steps = 0;
    for (long long c : mix) steps += c;
    std::printf("route mix (%lld layer-steps over %d tokens):", steps, o.tokens);
    for (int r = 0; r < kRouteCount; ++r) std::printf(" %s %lld", route_name(static_cast<Route>(r)), mix[r]);
    std::printf("\n");
    const auto [tmin, tmax] = std::minmax_element(times.begin(), times.end());
    std::printf("time per %s: median %.2f ms (min %.2f, max %.2f) over %d tokens, %d layers each\n",
                o.batch > 1 ? fmt::format("call of {} sequences", o.batch).c_str() : "token", t_med * 1e3, *tmin * 1e3,
                *tmax * 1e3, o.tokens, g.n_layers);
    std::printf("KV read per %s: %s (sum over layers of visible rows x %lld B) -> achieved %.2f GB/s\n",
                o.batch > 1 ? "call" : "token", human_bytes(bytes_med).c_str(), static_cast<long long>(g.kv_bytes_per_token_layer()), achieved / 1e9);
    if (ceiling > 0)
      std::printf("%s: %.2f GB/s -> %.2f of ceiling\n", ceiling_what.c_str(), ceiling / 1e9, achieved / ceiling);
    else
      std::printf("memory bandwidth of the %s device: not measured by the demo\n", device_name(engine.device()));
    std::printf("range rule (docs/nonfinite.md): %llu values saturated to +-65504, %llu non-finite read as NaN\n",
                static_cast<unsigned long long>(range.saturated), static_cast<unsigned long long>(range.nonfinite));
    if (checked > 0)
      std::printf("reference check: %d layer outputs vs the f64 reference, max relative error %.3g (bound %.0e): "
                  "%s\n",
                  checked, max_err, kRelErrorBound, pass ? "PASS" : "FAIL");
    else
      std::printf("reference check: skipped (--check-layers 0)\n");
  }
  return pass ? kExitOk : kExitFailure;
}

const Register reg{Command{
    "demo", "Decode tokens through Muse Glimmer (or a custom geometry) and report routes, time, bandwidth, error",
    [](CLI::App& app) -> Runner {
      auto o = std::make_shared<Options>();
      app.add_option("--tokens", o->tokens, "Tokens to decode")->capture_default_str();
      app.add_option("--depth", o->depth, "Position of the first decoded token (the planes are filled to it)")
          ->capture_default_str();
      add_seed_option(app, o->seed, "Seed of the synthetic activations");
      app.add_option("--batch", o->batch,
                     "Sequences decoded per call (mixed lengths: sequence i starts at depth - i*depth/batch)")
          ->capture_default_str();
      app.add_option("--device", o->device, "cpu, cuda, or auto (cuda when a GPU is usable, else cpu)")
          ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
          ->capture_default_str();
      o->cpu_flags.add_to(app);
      o->check_layers_given =
          app.add_option("--check-layers", o->check_layers,
                         "Layers per token checked against the f64 reference (default: 4, or n_layers when fewer)");
      o->geometry.add_to(app);
      o->switches.add_to(app);
      app.add_flag("--json", o->json, "Print JSON instead of text");
      return [o] { return run(*o); };
    }}};

}  // namespace
}  // namespace ladder::cli
