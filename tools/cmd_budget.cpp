// `ladder budget` (C3): the chapter's §16.7 arithmetic for any geometry and depth. Nothing here
// is measured: every number is derived from the geometry.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "commands.hpp"

namespace ladder::cli {
namespace {

// Depth D = tokens a NoPE layer sees when decoding position D - 1.
struct DepthRow {
  long long depth = 0;
  double swa_kv = 0;   // bytes read per token by all SWA layers
  double nope_kv = 0;  // bytes read per token by all NoPE layers
  double total() const { return swa_kv + nope_kv; }
};

// The geometry's numbers the arithmetic needs, counted once (count_layers walks the layers).
struct Counts {
  double row = 0;  // KV bytes per token per layer
  long long window = 0;
  double swa_layers = 0, nope_layers = 0;
  explicit Counts(const Geometry& g)
      : row(static_cast<double>(g.kv_bytes_per_token_layer())),
        window(g.window),
        swa_layers(g.count_layers(LayerClass::swa)),
        nope_layers(g.count_layers(LayerClass::nope)) {}
};

DepthRow kv_at(const Counts& c, long long depth) {
  const long long swa_rows = c.window > 0 ? std::min<long long>(depth, c.window) : depth;
  DepthRow r;
  r.depth = depth;
  r.swa_kv = c.swa_layers * static_cast<double>(swa_rows) * c.row;
  r.nope_kv = c.nope_layers * static_cast<double>(depth) * c.row;
  return r;
}

// Smallest depth whose KV read reaches `target` bytes, or -1 when it never does (a bounded
// read: no NoPE layers and a finite window). `include_swa` false is the chapter's definition
// (NoPE KV alone against the weight stream).
constexpr long long kSearchLimit = 1LL << 50;
long long crossover(const Counts& c, double target, bool include_swa) {
  const auto reach = [&](long long d) {
    const DepthRow r = kv_at(c, d);
    return (include_swa ? r.total() : r.nope_kv) >= target;
  };
  if (!reach(kSearchLimit)) return -1;
  long long lo = 1, hi = kSearchLimit;
  while (lo < hi) {
    const long long mid = lo + (hi - lo) / 2;
    if (reach(mid)) hi = mid; else lo = mid + 1;
  }
  return lo;
}

struct Options {
  GeometryFlags geometry;
  std::string depths = "2048,32768,131072";
  bool json = false;
};

int run(const Options& o) {
  const Geometry g = o.geometry.resolve();
  constexpr long long kMaxDepth = 1LL << 40;
  const std::vector<int> depths = parse_int_list(o.depths, "--depths", 1, std::min<long long>(kMaxDepth, INT32_MAX));
  const Counts counts(g);
  const double weights = static_cast<double>(g.weight_bytes_per_token);
  const long long x_nope = weights > 0 ? crossover(counts, weights, false) : -1;
  const long long x_all = weights > 0 ? crossover(counts, weights, true) : -1;
  constexpr double kPercent = 100.0;

  if (o.json) {
    nlohmann::json j;
    j["derived_from_geometry_not_measured"] = true;
    j["geometry"] = g.describe();
    j["kv_dtype"] = kv_dtype_name(g.kv_dtype);
    j["kv_bytes_per_token_layer"] = g.kv_bytes_per_token_layer();
    j["weight_bytes_per_token"] = g.weight_bytes_per_token;
    j["swa_layers"] = g.count_layers(LayerClass::swa);
    j["nope_layers"] = g.count_layers(LayerClass::nope);
    for (int d : depths) {
      const DepthRow r = kv_at(counts, d);
      nlohmann::json row{{"depth", d}, {"swa_kv_bytes", r.swa_kv}, {"nope_kv_bytes", r.nope_kv},
                         {"total_kv_bytes", r.total()}};
      if (weights > 0) row["share_of_weight_stream"] = r.total() / weights;
      j["depths"].push_back(row);
    }
    j["crossover_nope_kv_equals_weights"] = x_nope >= 0 ? nlohmann::json(x_nope) : nlohmann::json(nullptr);
    j["crossover_all_kv_equals_weights"] = x_all >= 0 ? nlohmann::json(x_all) : nlohmann::json(nullptr);
    j["max_context"] = g.max_context;
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }

  std::printf("KV read per decoded token: derived from the geometry, not measured\n");
  std::printf("geometry: %s\n", g.describe().c_str());
  std::printf("KV per token per layer: %s B (2 planes x %d KV heads x %d dims x %d B %s)\n",
              with_commas(g.kv_bytes_per_token_layer()).c_str(), g.n_kv_heads, g.head_dim, kv_dtype_bytes(g.kv_dtype),
              kv_dtype_name(g.kv_dtype));
  if (weights > 0)
    std::printf("weights per token: %s B (%s)\n", with_commas(g.weight_bytes_per_token).c_str(),
                human_bytes(weights).c_str());
  else
    std::printf("weights per token: not given (--weight-bytes); shares and crossover are not computed\n");
  std::printf("SWA layers read min(depth, window) rows (constant once depth >= window = %d); NoPE layers read "
              "depth rows.\n\n",
              g.window);
  std::printf("%10s %14s %14s %14s %10s\n", "depth", "SWA KV", "NoPE KV", "total KV", "of weights");
  for (int d : depths) {
    const DepthRow r = kv_at(counts, d);
    const std::string share = weights > 0 ? fmt::format("{:.2f} %", kPercent * r.total() / weights) : "-";
    std::printf("%10s %14s %14s %14s %10s\n", with_commas(d).c_str(), human_bytes(r.swa_kv).c_str(),
                human_bytes(r.nope_kv).c_str(), human_bytes(r.total()).c_str(), share.c_str());
  }
  if (weights > 0) {
    const auto say = [&](const char* label, long long x) {
      if (x < 0) {
        std::printf("%s: never (the KV read is bounded by the window)\n", label);
        return;
      }
      std::printf("%s: depth %s tokens (%.2f M) — %s the max context of %s\n", label, with_commas(x).c_str(),
                  static_cast<double>(x) / 1e6, x > g.max_context ? "beyond" : "within",
                  with_commas(g.max_context).c_str());
    };
    std::printf("\n");
    say("crossover, NoPE KV = weight stream (the chapter's definition)", x_nope);
    say("crossover, all KV  = weight stream", x_all);
  }
  return kExitOk;
}

const Register reg{Command{
    "budget", "The chapter's §16.7 KV-vs-weights arithmetic for a geometry and depths (derived, not measured)",
    [](CLI::App& app) -> Runner {
      auto o = std::make_shared<Options>();
      o->geometry.add_to(app);
      app.add_option("--depths", o->depths, "Depths (tokens seen by a NoPE layer): list and ranges, e.g. 2048,32768")
          ->capture_default_str();
      app.add_flag("--json", o->json, "Print JSON instead of a table");
      return [o] { return run(*o); };
    }}};

}  // namespace
}  // namespace ladder::cli
