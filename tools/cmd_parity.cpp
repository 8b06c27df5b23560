// `ladder parity` (C4/P5/P7): one logical input — a query, the window's K/V rows in logical order
// and the current token — run through every route on every plane layout that can hold it, then
// each pair of runs compared bit for bit. Every route walks the window in logical order (vec
// reads a full wrapped ring as two physical spans, the older first), so a difference is explained
// only by what differs between the two runs (device and its producer, where the current token is
// read from); a difference that none of those explains is reported as a failure.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "commands.hpp"
#include "ladder/attention.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/reference.hpp"

namespace ladder::cli {
namespace {

constexpr double kRelErrorBound = 2e-3;  // SPEC P3
// Layer index the synthetic generator uses for rows outside the logical input (evicted
// tokens of the wrapped ring), so they never coincide with the input rows.
constexpr int kFillerLayer = 1;
// K values parity writes before its run (every position before --position): Muse Glimmer at
// its full context is 131072 x 256 = 2^25; this allows 8x that, a few seconds on a 2-core host.
constexpr long long kMaxFillValues = 1LL << 28;
constexpr int kInputLayer = 0;

enum class Layout { ring_wrapped, ring_unwrapped, growing };
const char* layout_name(Layout l) {
  switch (l) {
    case Layout::ring_wrapped: return "ring as wrapped at the position";
    case Layout::ring_unwrapped: return "ring, same rows unwrapped";
    case Layout::growing: return "growing head-major plane";
  }
  return "?";
}
const char* layout_tag(Layout l) {
  switch (l) {
    case Layout::ring_wrapped: return "ring-wrapped";
    case Layout::ring_unwrapped: return "ring-unwrapped";
    case Layout::growing: return "growing";
  }
  return "?";
}

struct Options {
  GeometryFlags geometry;
  int position = 5000;
  std::uint64_t seed = 1;
  std::string device = "cpu";
  bool json = false;
};

// The logical input: window row j (0 = oldest visible, visible-1 = current token).
struct Input {
  int visible = 0;
  int kvn = 0;
  std::vector<float> q;
  std::vector<float> k, v;  // [visible][kvn]
  const float* k_row(int j) const { return k.data() + static_cast<std::size_t>(j) * kvn; }
  const float* v_row(int j) const { return v.data() + static_cast<std::size_t>(j) * kvn; }
};

struct Run {
  std::string id;
  Layout layout = Layout::ring_wrapped;
  Route route = Route::vec;
  Device device = Device::cpu;
  bool applicable = false;
  std::string refusal;
  std::vector<float> out;
  bool repeatable = true;
  double rel_error = 0;
  PlaneState state;
  std::string rows;  // where the window is read from, in logical order (describe_rows)
  // What can change the bits on one device: whether the current token comes from the f32
  // activations (the token order is logical on every route).
  bool bypass = false;
};

// The plane for a layout, holding every token before the current one.
HostPlane build_plane(const Geometry& g, Layout layout, const Input& in, int position, std::uint64_t seed) {
  const LayerClass cls = layout == Layout::growing ? LayerClass::nope : LayerClass::swa;
  Result<HostPlane> made = HostPlane::create(PlaneConfig::for_layer(g, cls));
  if (!made) throw std::runtime_error(made.status().to_string());
  HostPlane plane = std::move(made).value();
  const int last = layout == Layout::ring_wrapped ? position : in.visible - 1;
  const int first = last + 1 - in.visible;
  std::vector<float> fk(static_cast<std::size_t>(in.kvn)), fv(fk.size());
  for (int p = 0; p < last; ++p) {
    const float *k = nullptr, *v = nullptr;
    if (p >= first) {
      k = in.k_row(p - first);
      v = in.v_row(p - first);
    } else {
      fill_synthetic(seed, Stream::k, p, kFillerLayer, fk.data(), in.kvn);
      fill_synthetic(seed, Stream::v, p, kFillerLayer, fv.data(), in.kvn);
      k = fk.data();
      v = fv.data();
    }
    Result<int> slot = plane.append_row(p, k, v);
    if (!slot) throw std::runtime_error(slot.status().to_string());
  }
  return plane;
}

// Where a run finds the window it walks in logical order: the staged copy, or the plane's
// physical slots from the oldest visible token's, as one span or (a wrapped ring) two.
std::string describe_rows(const Run& r, int position, int visible) {
  if (r.route == Route::staged) return "logical order, from the staged copy";
  const int first = r.state.physical(position + 1 - visible);
  const int end = first + visible;
  if (end <= r.state.capacity) return fmt::format("logical order, slots {}..{}", first, end - 1);
  return fmt::format("logical order, slots {}..{} then 0..{}", first, r.state.capacity - 1,
                     end - r.state.capacity - 1);
}

// "f16 plane row" / "bf16 plane row": where a run reads the current token from.
std::string plane_row_text(const Geometry& g) { return fmt::format("{} plane row", kv_dtype_name(g.kv_dtype)); }

double reference_error(const Geometry& g, const Input& in, const std::vector<float>& out, bool bypass) {
  const std::size_t n = static_cast<std::size_t>(in.visible) * in.kvn;
  std::vector<double> k(n), v(n), q(in.q.begin(), in.q.end()), ref(in.q.size());
  for (std::size_t i = 0; i < n; ++i) {
    const bool raw = bypass && i >= n - static_cast<std::size_t>(in.kvn);
    k[i] = raw ? in.k[i] : kv_decode(kv_encode(in.k[i], g.kv_dtype), g.kv_dtype);
    v[i] = raw ? in.v[i] : kv_decode(kv_encode(in.v[i], g.kv_dtype), g.kv_dtype);
  }
  const HeadShape shape{g.n_heads, g.n_kv_heads, g.head_dim, g.scale()};
  reference_attention(shape, q.data(), k.data(), v.data(), in.visible, ref.data());
  return relative_error(out.data(), ref.data(), out.size());
}

void execute(const Geometry& g, const Input& in, const HostPlane& built, int position, Run& run) {
  const HeadShape shape{g.n_heads, g.n_kv_heads, g.head_dim, g.scale()};
  const int current = run.layout == Layout::ring_wrapped ? position : in.visible - 1;
  std::vector<float> outs[2];
  for (std::vector<float>& out : outs) {
    HostPlane plane = built;
    Result<int> slot = plane.append(current);
    if (!slot) throw std::runtime_error(slot.status().to_string());
    out.assign(in.q.size(), std::numeric_limits<float>::quiet_NaN());
    const LayerIO io{in.q.data(), in.k_row(in.visible - 1), in.v_row(in.visible - 1), out.data()};
    const Status st = attend_layer(run.device, run.route, plane, current, *slot, shape, io);
    if (!st.ok()) {
      run.applicable = false;
      run.refusal = st.to_string();
      return;
    }
    run.state = plane.state();
  }
  run.applicable = true;
  run.out = outs[0];
  run.repeatable = outs[0].size() == outs[1].size() &&
                   std::equal(outs[0].begin(), outs[0].end(), outs[1].begin(),
                              [](float a, float b) { return ulp_distance(a, b) == 0; });
  run.rows = describe_rows(run, current, in.visible);
  run.bypass = run.route == Route::interleaved;
  run.rel_error = reference_error(g, in, run.out, run.bypass);
}

struct Comparison {
  std::string a, b;
  bool identical = false;
  std::int64_t max_ulp = 0;
  double max_abs = 0;
  long long differing = 0;
  std::vector<std::string> reasons;
  bool explained = true;
};

Comparison compare(const Run& x, const Run& y) {
  Comparison c;
  c.a = x.id;
  c.b = y.id;
  for (std::size_t i = 0; i < x.out.size(); ++i) {
    const std::int64_t d = ulp_distance(x.out[i], y.out[i]);
    c.max_ulp = std::max(c.max_ulp, d);
    c.max_abs = std::max(c.max_abs, static_cast<double>(std::fabs(x.out[i] - y.out[i])));
    c.differing += d != 0 ? 1 : 0;
  }
  c.identical = c.differing == 0;
  if (x.device != y.device) {
    c.reasons.push_back(fmt::format("different device ({} vs {})", device_name(x.device), device_name(y.device)));
    // The default GPU producer computes each 32-token block with mma.sync (f16 hi/lo split);
    // the CPU twin follows the exact DAG. LADDER_GPU_DAG=exact makes them bit-identical.
    if (cuda_default_uses_tensor_cores())
      c.reasons.push_back("tensor-core in-block arithmetic (the GPU's default producer; LADDER_GPU_DAG=exact gives "
                          "the CPU twin's bits)");
    // The CPU's default producer is the fast one; only the exact twin follows the GPU's DAG.
    Result<cpu::CpuProducer> cpu_producer = cpu::producer();
    if (cpu_producer.ok() && *cpu_producer == cpu::CpuProducer::fast)
      c.reasons.push_back("the CPU's fast producer (its own chunked order; LADDER_CPU_PRODUCER=exact runs the exact "
                          "twin of the GPU's exact-DAG producer)");
  }
  if (x.bypass != y.bypass) {
    const Run& b = x.bypass ? x : y;
    c.reasons.push_back(fmt::format("current-token bypass: {} reads the current token from the f32 activations, the "
                                    "other from its plane row",
                                    b.id));
  }
  c.explained = c.identical || !c.reasons.empty();
  return c;
}

int run(const Options& o) {
  const Geometry g = o.geometry.resolve();
  if (g.window <= 0) throw UsageError("parity needs a finite --window (> 0) so that the ring can wrap");
  if (o.position < 0 || o.position >= g.max_context)
    throw UsageError(fmt::format("--position must be in 0..{} (got {})", g.max_context - 1, o.position));
  const long long fill_values = (static_cast<long long>(o.position) + 1) * g.n_kv_heads * g.head_dim;
  if (fill_values > kMaxFillValues)
    throw UsageError(fmt::format("--position {} fills {} K values before the run (every earlier position, {} per "
                                 "token); at most {}: pick a smaller position or geometry",
                                 o.position, fill_values, g.n_kv_heads * g.head_dim, kMaxFillValues));
  std::vector<Device> devices;
  if (o.device == "cpu" || o.device == "all") devices.push_back(Device::cpu);
  std::string cuda_note;
  if (o.device == "cuda" || o.device == "all") {
    if (cuda_available()) {
      devices.push_back(Device::cuda);
    } else if (o.device == "cuda") {
      std::fprintf(stderr, "ladder parity: --device cuda: no usable CUDA device in this build or machine\n");
      return kExitFailure;
    } else {
      cuda_note = "cuda runs skipped: no usable CUDA device in this build or machine";
    }
  }

  Input in;
  in.visible = g.visible(LayerClass::swa, o.position);
  in.kvn = g.n_kv_heads * g.head_dim;
  in.q.resize(static_cast<std::size_t>(g.n_heads) * g.head_dim);
  fill_synthetic(o.seed, Stream::q, o.position, kInputLayer, in.q.data(), static_cast<int>(in.q.size()));
  in.k.resize(static_cast<std::size_t>(in.visible) * in.kvn);
  in.v.resize(in.k.size());
  for (int j = 0; j < in.visible; ++j) {
    fill_synthetic(o.seed, Stream::k, j, kInputLayer, in.k.data() + static_cast<std::size_t>(j) * in.kvn, in.kvn);
    fill_synthetic(o.seed, Stream::v, j, kInputLayer, in.v.data() + static_cast<std::size_t>(j) * in.kvn, in.kvn);
  }

  const std::pair<Layout, std::vector<Route>> plan[] = {
      {Layout::ring_wrapped, {Route::splitk, Route::staged, Route::vec}},
      {Layout::ring_unwrapped, {Route::splitk, Route::vec}},
      {Layout::growing, {Route::vec, Route::interleaved}},
  };
  std::vector<Run> runs;
  for (const auto& [layout, routes] : plan) {
    const HostPlane built = build_plane(g, layout, in, o.position, o.seed);
    for (Device d : devices) {
      for (Route r : routes) {
        Run run;
        run.layout = layout;
        run.route = r;
        run.device = d;
        run.id = fmt::format("{}/{}/{}", route_name(r), layout_tag(layout), device_name(d));
        execute(g, in, built, o.position, run);
        runs.push_back(std::move(run));
      }
    }
  }

  std::vector<Comparison> comps;
  for (std::size_t i = 0; i < runs.size(); ++i)
    for (std::size_t j = i + 1; j < runs.size(); ++j)
      if (runs[i].applicable && runs[j].applicable) comps.push_back(compare(runs[i], runs[j]));

  bool ok = true;
  for (const Run& r : runs)
    if (r.applicable && (!r.repeatable || !(r.rel_error <= kRelErrorBound))) ok = false;
  for (const Comparison& c : comps)
    if (!c.explained) ok = false;

  if (o.json) {
    nlohmann::json j;
    j["geometry"] = g.describe();
    j["kv_dtype"] = kv_dtype_name(g.kv_dtype);
    j["position"] = o.position;
    j["visible"] = in.visible;
    j["seed"] = o.seed;
    if (!cuda_note.empty()) j["note"] = cuda_note;
    for (const Run& r : runs) {
      nlohmann::json jr{{"id", r.id}, {"route", route_name(r.route)}, {"layout", layout_tag(r.layout)},
                        {"device", device_name(r.device)}, {"applicable", r.applicable}};
      if (r.applicable) {
        jr["repeat_bit_identical"] = r.repeatable;
        jr["relative_error"] = r.rel_error;
        jr["token_order"] = r.rows;
        jr["current_token"] = r.bypass ? "f32 activations" : plane_row_text(g);
        jr["plane"] = {{"capacity", r.state.capacity}, {"len", r.state.len},
                       {"origin_logical", r.state.origin_logical}, {"origin_physical", r.state.origin_physical}};
      } else {
        jr["refused"] = r.refusal;
      }
      j["runs"].push_back(jr);
    }
    for (const Comparison& c : comps)
      j["pairs"].push_back({{"a", c.a}, {"b", c.b}, {"identical", c.identical}, {"max_ulp", c.max_ulp}, {"max_abs_difference", c.max_abs},
                            {"differing_values", c.differing}, {"reasons", c.reasons}, {"explained", c.explained}});
    j["pass"] = ok;
    std::printf("%s\n", j.dump(2).c_str());
    return ok ? kExitOk : kExitFailure;
  }

  std::printf("geometry: %s\n", g.describe().c_str());
  std::printf("logical input: position %d, %d visible tokens, seed %llu; every run gets the same query, the same "
              "window rows in logical order and the same current token\n",
              o.position, in.visible, static_cast<unsigned long long>(o.seed));
  if (!cuda_note.empty()) std::printf("%s\n", cuda_note.c_str());
  std::printf("\nruns:\n");
  for (const Run& r : runs) {
    if (!r.applicable) {
      std::printf("  %-36s not applicable: %s\n", r.id.c_str(), r.refusal.c_str());
      continue;
    }
    std::printf("  %-36s %s (cap %d, len %d, origin %d->%d); walks %s; current token from %s; rel err %.3g; "
                "repeat %s\n",
                r.id.c_str(), layout_name(r.layout), r.state.capacity, r.state.len, r.state.origin_logical,
                r.state.origin_physical, r.rows.c_str(), r.bypass ? "f32 activations" : plane_row_text(g).c_str(),
                r.rel_error, r.repeatable ? "bit-identical" : "DIFFERS");
  }
  std::printf("\npairs:\n");
  for (const Comparison& c : comps) {
    if (c.identical) {
      std::printf("  %-36s vs %-36s identical\n", c.a.c_str(), c.b.c_str());
      continue;
    }
    std::string why;
    for (const std::string& r : c.reasons) why += (why.empty() ? "" : "; ") + r;
    if (!c.explained) why = "UNEXPLAINED: same device, same current-token source, both in logical order";
    std::printf("  %-36s vs %-36s max %lld ulp, max abs %.2g (%lld of %zu values differ): %s\n", c.a.c_str(),
                c.b.c_str(), static_cast<long long>(c.max_ulp), c.max_abs, c.differing, in.q.size(), why.c_str());
  }
  std::printf("\n%s\n", ok ? "PASS: every run repeatable, within the reference bound, every difference explained"
                           : "FAIL: see the runs and pairs above");
  return ok ? kExitOk : kExitFailure;
}

const Register reg{Command{
    "parity", "Run one logical input through every applicable route and layout; compare every pair bit for bit",
    [](CLI::App& app) -> Runner {
      auto o = std::make_shared<Options>();
      app.add_option("--position", o->position, "Position of the current token (sets the ring's wrap state)")
          ->capture_default_str();
      add_seed_option(app, o->seed, "Seed of the synthetic input");
      app.add_option("--device", o->device, "cpu, cuda, or all (cpu and cuda)")
          ->check(CLI::IsMember({"cpu", "cuda", "all"}))
          ->capture_default_str();
      o->geometry.add_to(app);
      app.add_flag("--json", o->json, "Print JSON instead of text");
      return [o] { return run(*o); };
    }}};

}  // namespace
}  // namespace ladder::cli
