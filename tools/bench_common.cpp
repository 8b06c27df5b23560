// Pieces of `ladder bench` shared by the GPU and CPU protocols.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <random>

#include <fmt/format.h>

#include "bench.hpp"
#include "ladder/reference.hpp"

namespace ladder::bench {

namespace {
// Enough sets to pass 4x L2 at depth 2048 (2 MB per plane) without a runaway graph.
constexpr int kMaxRotationSets = 256;
}  // namespace

std::string case_name(const LayerCase& c) { return fmt::format("{}/{}", route_name(c.route), plane_kind_name(c.plane)); }

std::vector<LayerCase> all_layer_cases() {
  return {{Route::splitk, PlaneKind::ring},
          {Route::vec, PlaneKind::ring},
          {Route::staged, PlaneKind::ring},
          {Route::vec, PlaneKind::growing},
          {Route::interleaved, PlaneKind::growing}};
}

Timing summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  return Timing{us[us.size() / 2], us.front(), us.back()};
}

std::string format_route_mix(const std::map<std::string, int>& layers_per_route) {
  std::string s;
  for (const auto& [r, n] : layers_per_route) s += fmt::format("{}{} x{}", s.empty() ? "" : ", ", r, n);
  return s;
}

void set_timing(Row& row, const Timing& t) {
  row.median_us = t.median_us;
  row.min_us = t.min_us;
  row.max_us = t.max_us;
}

void flag_non_finite(const float* values, std::size_t n, std::string& note) {
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i])) {
      note += note.empty() ? "NON-FINITE OUTPUT" : "; NON-FINITE OUTPUT";
      return;
    }
}

std::int64_t step_bytes(const Geometry& g, int position) {
  std::int64_t bytes = 0;
  for (int l = 0; l < g.n_layers; ++l) bytes += layer_bytes(g, g.visible(g.layer_class(l), position));
  return bytes;
}

Result<Row> time_encode_token(Engine& e, int depth, int reps, int warmups, const Switches& sw, std::uint64_t seed,
                              const std::vector<TokenIO>* device_io, const DeviceActivations* reader,
                              const std::function<Status()>& before_first_timed) {
  Result<Row> row = time_encode_batch(e, {depth}, reps, warmups, seed, device_io, reader, {}, before_first_timed);
  if (!row) return row.status();
  std::map<std::string, int> mix;
  for (int l = 0; l < e.geometry().n_layers; ++l)
    mix[route_name(choose_route(e.geometry().layer_class(l), e.plane_state(l), Capabilities{}, sw).route)] += 1;
  row->route_mix = format_route_mix(mix);
  return row;
}

std::vector<int> same_depths(int b, int d) { return std::vector<int>(static_cast<std::size_t>(b), d); }

std::vector<int> mixed_depths(int b, int d) {
  std::vector<int> out;
  for (int i = 0; i < b; ++i) out.push_back(d - static_cast<int>(static_cast<long long>(d) * i / b));
  return out;
}

Result<Row> time_encode_batch(Engine& e, const std::vector<int>& depths, int reps, int warmups, std::uint64_t seed,
                              const std::vector<TokenIO>* device_io, const DeviceActivations* reader,
                              const std::function<Status()>& before_last_call,
                              const std::function<Status()>& before_first_timed) {
  const Geometry& g = e.geometry();
  const std::size_t b = depths.size();
  const std::size_t layers = static_cast<std::size_t>(g.n_layers);
  const std::vector<float> q = random_floats(layers * g.n_heads * g.head_dim, seed + 1);
  const std::vector<float> k = random_floats(layers * g.n_kv_heads * g.head_dim, seed + 2);
  const std::vector<float> v = random_floats(layers * g.n_kv_heads * g.head_dim, seed + 3);
  std::vector<std::vector<float>> outs(device_io == nullptr ? b : 0, std::vector<float>(q.size()));
  // Sequence i's activations: the host arrays, or their device copies.
  const auto io_of = [&](std::size_t i) {
    return device_io != nullptr ? (*device_io)[i] : TokenIO{q.data(), k.data(), v.data(), outs[i].data()};
  };
  if (device_io != nullptr && (device_io->size() != b || reader == nullptr || !reader->read_out))
    return make_error(ErrorCode::invalid_argument, "time_encode_batch: one device TokenIO per sequence and a reader");
  std::vector<SequenceId> ids{0};
  while (ids.size() < b) {
    Result<SequenceId> id = e.add_sequence();
    if (!id) return id.status();
    ids.push_back(*id);
  }
  const int shallowest = *std::min_element(depths.begin(), depths.end());
  const int timed = std::max(1, std::min(reps, shallowest / 2));
  const int warm = std::min(warmups, shallowest / 4);
  // Call c (0-based) decodes position depths[i] - (timed + warm) + c of sequence i; the fills
  // before it bring every sequence to that position, the deepest first.
  const int deepest = *std::max_element(depths.begin(), depths.end());
  for (int p = 0; p < deepest - timed - warm; ++p) {
    std::vector<SequenceToken> call;
    for (std::size_t i = 0; i < b; ++i)
      if (p < depths[i] - timed - warm) {
        TokenIO io = io_of(i);
        io.q = nullptr;
        io.out = nullptr;
        call.push_back({ids[i], p, io});
      }
    LADDER_TRY(e.fill(call));
  }
  std::vector<double> us, gpu_us;  // host clock per call; the device's own time when it keeps one
  double first_us = 0.0;
  const DeviceStats before = e.device_stats();
  for (int c = 0; c < timed + warm; ++c) {
    std::vector<SequenceToken> call;
    for (std::size_t i = 0; i < b; ++i)
      call.push_back({ids[i], depths[i] - timed - warm + c, io_of(i)});
    if (before_first_timed && c == warm) LADDER_TRY(before_first_timed());
    if (before_last_call && c + 1 == timed + warm) LADDER_TRY(before_last_call());
    const DeviceStats s0 = e.device_stats();
    const auto t0 = std::chrono::steady_clock::now();
    LADDER_TRY(e.encode(call));
    const double dt = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    const DeviceStats s1 = e.device_stats();
    if (c == 0) first_us = dt;
    if (c >= warm) {
      us.push_back(dt);
      if (s1.timed_calls > s0.timed_calls) gpu_us.push_back(s1.device_us - s0.device_us);
    }
  }
  const int captures = e.device_stats().captures - before.captures;
  Row row;
  row.depth = deepest;
  row.batch = static_cast<int>(b);
  set_timing(row, summarize(std::move(us)));
  for (int d : depths) {
    row.bytes += step_bytes(g, d - 1);
    row.fmas += step_fmas(g, d - 1);
  }
  const char* memory = device_io != nullptr ? "device" : "host";
  row.note = b == 1 ? fmt::format("positions {}..{}, activations in {} memory", deepest - timed, deepest - 1, memory)
                    : fmt::format("{} sequences per call, depths {}..{}, activations in {} memory", b, shallowest,
                                  deepest, memory);
  if (!gpu_us.empty()) {
    const Timing t = summarize(std::move(gpu_us));
    row.device_median_us = t.median_us;
    row.device_min_us = t.min_us;
    row.device_max_us = t.max_us;
    row.note += fmt::format("; GPU time per call {:.1f} us (median, CUDA events: the step graph's kernels and copies)",
                            row.device_median_us);
  }
  // What a recapture per call would cost: the first call of a new shape captures its step graph.
  if (captures > 0) row.note += fmt::format("; first call {:.0f} us ({} graph capture{})", first_us, captures, captures > 1 ? "s" : "");
  for (const std::vector<float>& out : outs) flag_non_finite(out.data(), out.size(), row.note);
  if (device_io != nullptr)
    for (const TokenIO& io : *device_io) {
      Result<std::vector<float>> out = reader->read_out(io, q.size());
      if (!out) return out.status();
      flag_non_finite(out->data(), out->size(), row.note);
    }
  return row;
}

Result<Row> time_layer_batch(const Geometry& g, LayerClass cls, int depth, int b, int reps,
                             const DeviceActivations& device_io, const MakeEngine& make,
                             const std::function<Status()>& before_last_call) {
  constexpr std::uint64_t kLayerBatchSeed = 29;
  constexpr int kLayerBatchWarmups = 2;
  Geometry one = g;
  one.n_layers = 1;
  one.layer_classes = {cls};
  one.nope_period = 0;
  one.ring_slack = 0;
  if (cls == LayerClass::swa) one.window = depth;
  one.max_context = std::max(one.max_context, depth + 1);
  LADDER_TRY(one.validate());
  EngineOptions eo;
  eo.device = Device::cuda;
  Result<std::unique_ptr<Engine>> made = make(one, eo);
  if (!made) return made.status();
  Result<std::vector<TokenIO>> on_device = device_io.make(one, b, kLayerBatchSeed);
  if (!on_device) return on_device.status();
  Result<Row> r = time_encode_batch(**made, std::vector<int>(static_cast<std::size_t>(b), depth), reps,
                                    kLayerBatchWarmups, kLayerBatchSeed, &*on_device, &device_io, before_last_call);
  if (!r) return r.status();
  if (r->device_median_us <= 0.0) return make_error(ErrorCode::internal, "the layer-batch row's device kept no time");
  const double host_us = r->median_us;
  r->kind = "layer-batch";
  r->name = fmt::format("{} layer, batch {}", cls == LayerClass::swa ? "swa (ring)" : "nope (growing)", b);
  r->median_us = r->device_median_us;
  r->min_us = r->device_min_us;
  r->max_us = r->device_max_us;
  r->note += fmt::format("; row time = GPU time; host clock per call {:.1f} us", host_us);
  return r;
}

Status add_batch_rows(const Geometry& g, Device device, const Options& o, std::vector<Row>& rows,
                      std::vector<std::string>& notes, const DeviceActivations& device_io, const MakeEngine& make) {
  constexpr std::uint64_t kBatchSeed = 17;
  constexpr int kBatchWarmups = 2;
  bool any_depth = false;
  for (int d : o.step_depths) {
    if (d > o.batch_max_depth) continue;
    any_depth = true;
    // A server sizes its growing planes to the context it serves: the rows' engines hold
    // max(d, window) + 1 positions. At the model's 131,072 a sequence's 13 growing layers hold
    // 1.7 GB on the GPU (allocated whole there), and 64 sequences did not fit an 80 GB H100
    // (2026-12-07). The rings keep their window rows either way.
    Geometry row_g = g;
    row_g.max_context = std::min(g.max_context, std::max(d, g.window) + 1);
    LADDER_TRY(row_g.validate());
    for (int b : o.batches) {
      std::vector<TokenIO> on_device;
      if (device_io) {
        Result<std::vector<TokenIO>> made = device_io.make(row_g, b, kBatchSeed);
        if (!made) return made.status();
        on_device = std::move(made).value();
      }
      for (const bool mixed : {false, true}) {
        for (const bool in_device_memory : {false, true}) {
          if (in_device_memory && !device_io) continue;
          const std::string what = fmt::format("batch {} ({}, {} memory) at depth {}", b,
                                               mixed ? "mixed lengths" : "same depth",
                                               in_device_memory ? "device" : "host", d);
          if (o.progress) o.progress("engine encode, " + what);
          EngineOptions eo;
          eo.device = device;
          Result<std::unique_ptr<Engine>> made = make ? make(row_g, eo) : Engine::create(row_g, eo);
          Result<Row> r = made ? time_encode_batch(**made, mixed ? mixed_depths(b, d) : same_depths(b, d), o.reps,
                                                   kBatchWarmups, kBatchSeed, in_device_memory ? &on_device : nullptr,
                                                   &device_io)
                               : Result<Row>(made.status());
          // A batch that does not fit this machine is a row not measured, said so, not a lost
          // report: the engine leaves nothing behind when an allocation fails (issue 8 item 5).
          if (!r && r.status().code() == ErrorCode::out_of_memory) {
            notes.push_back(fmt::format("engine encode, {}: not measured: {}", what, r.status().message()));
            continue;
          }
          if (!r) return r.status();
          r->kind = "engine";
          r->name = fmt::format("encode, batch {}{}{}", b, mixed ? " mixed" : "", in_device_memory ? ", device I/O" : "");
          rows.push_back(*r);
        }
      }
    }
  }
  if (any_depth && !o.batches.empty())
    notes.push_back("batch rows: each engine holds max(depth, window) + 1 positions (a GPU growing plane is "
                    "allocated whole at its max context)");
  return {};
}

std::int64_t layer_bytes(const Geometry& g, int visible) {
  const std::int64_t row = g.kv_bytes_per_token_layer();  // K and V, the geometry's dtype, all KV heads
  const std::int64_t q_out = std::int64_t{2} * g.n_heads * g.head_dim * 4;
  const std::int64_t cur_kv = std::int64_t{2} * g.n_kv_heads * g.head_dim * 4;
  return row * visible + row + q_out + cur_kv;
}

std::int64_t layer_fmas(const Geometry& g, int visible) {
  return std::int64_t{2} * g.n_heads * g.head_dim * static_cast<std::int64_t>(visible);
}

std::int64_t step_fmas(const Geometry& g, int position) {
  std::int64_t fmas = 0;
  for (int l = 0; l < g.n_layers; ++l) fmas += layer_fmas(g, g.visible(g.layer_class(l), position));
  return fmas;
}

Roofline roofline(const Row& r, const Ceiling& c) {
  Roofline out;
  if (c.fma_per_s <= 0.0) {
    out.us = c.gbps() > 0 ? static_cast<double>(r.bytes) / (c.gbps() * 1e3) : 0.0;
    return out;
  }
  const double memory_us = c.read_gbps > 0 ? static_cast<double>(r.bytes) / (c.read_gbps * 1e3) : 0.0;
  const double fma_us = static_cast<double>(r.fmas) / c.fma_per_s * 1e6;
  out.us = std::max(memory_us, fma_us);
  out.bound = fma_us > memory_us ? "fma" : "memory";
  return out;
}

PlaneConfig layer_plane_config(const Geometry& g, PlaneKind kind, int depth) {
  PlaneConfig cfg;
  cfg.kind = kind;
  cfg.n_kv_heads = g.n_kv_heads;
  cfg.head_dim = g.head_dim;
  cfg.capacity = depth;
  cfg.window = kind == PlaneKind::ring ? depth : 0;
  cfg.max_context = 2 * depth + 1;  // room for the ring to wrap past `depth`
  cfg.kv_dtype = g.kv_dtype;
  return cfg;
}

// A quarter window past full: the ring has wrapped, its origin is mid-plane.
int layer_position(PlaneKind kind, int depth) { return kind == PlaneKind::ring ? depth + depth / 4 : depth - 1; }

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::vector<KvWord> random_words(std::size_t n, std::uint64_t seed, KvDtype dtype) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<KvWord> h(n);
  for (auto& x : h) x = kv_encode(u(gen), dtype);
  return h;
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> f(n);
  for (auto& x : f) x = u(gen);
  return f;
}

int rotation_sets(std::int64_t set_bytes, std::int64_t cache_bytes, double factor) {
  const double need = factor * static_cast<double>(cache_bytes) / static_cast<double>(std::max<std::int64_t>(set_bytes, 1));
  // Clamped as a double: a huge factor must not reach an out-of-range int conversion.
  return static_cast<int>(std::clamp(std::ceil(need), 1.0, static_cast<double>(kMaxRotationSets)));
}

}  // namespace ladder::bench
