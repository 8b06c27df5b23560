// `ladder routes` (C2): the route trace for chosen positions, layers and plane states. It walks
// each layer class's plane metadata through the same append rule the engines use
// (plan_append) and asks the same ladder (choose_route), so no KV rows are allocated and any
// position up to the max context is cheap.
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "commands.hpp"

namespace ladder::cli {
namespace {

// Trace rows one run prints: every position of a 131072 context for 8 layers, small enough that
// a typo like `--positions 0-1000000 --layers all` is refused at once instead of printing for
// minutes.
constexpr long long kMaxTraceRows = 1LL << 20;

struct Options {
  GeometryFlags geometry;
  SwitchFlags switches;
  std::string positions = "0,31,2047,2048,5000";
  std::string layers = "0-7";
  int initial_capacity = 0;
  bool no_vec_capability = false;
  bool json = false;
};

nlohmann::json to_json(const TraceEntry& e) {
  const Predicates& p = e.decision.pred;
  return {{"position", e.position},
          {"layer", e.layer},
          {"class", layer_class_name(e.cls)},
          {"route", route_name(e.decision.route)},
          {"capacity", e.state.capacity},
          {"len", e.state.len},
          {"origin_logical", e.state.origin_logical},
          {"origin_physical", e.state.origin_physical},
          {"visible", e.visible},
          {"has_vec", p.has_vec},
          {"strict", p.strict},
          {"vec_rows", p.vec_rows},
          {"swa_vec", p.swa_vec},
          {"stage", p.stage},
          {"blocks", e.schedule.blocks},
          {"nwg", e.schedule.nwg},
          {"nsg", e.schedule.nsg}};
}

int run(const Options& o) {
  const Geometry g = o.geometry.resolve();
  const std::vector<int> positions = parse_int_list(o.positions, "--positions", 0, g.max_context - 1);
  const std::vector<int> layers = parse_int_list(o.layers, "--layers", 0, g.n_layers - 1, g.n_layers);
  if (o.initial_capacity < 0) throw UsageError("--initial-capacity must be >= 0 (0 picks the default)");
  if (static_cast<long long>(positions.size()) * static_cast<long long>(layers.size()) > kMaxTraceRows)
    throw UsageError(fmt::format("--positions x --layers asks for {} x {} trace rows; at most {} per run",
                                 positions.size(), layers.size(), kMaxTraceRows));
  Capabilities caps;
  caps.has_vec = !o.no_vec_capability;
  const Switches sw = o.switches.merged_with_env();

  // Every layer of a class holds the same plane state at a position; it is computed in closed
  // form (state_after), so a position near a huge max context costs no more than position 0.
  if (o.initial_capacity > g.max_context)
    throw UsageError(fmt::format("--initial-capacity must be in 0..{} (the max context; got {})", g.max_context,
                                 o.initial_capacity));
  std::map<LayerClass, PlaneConfig> configs;
  for (int layer : layers) {
    const LayerClass c = g.layer_class(layer);
    if (configs.count(c) == 0) configs.emplace(c, PlaneConfig::for_layer(g, c, o.initial_capacity));
  }

  std::vector<TraceEntry> trace;
  for (int position : positions) {
    std::map<LayerClass, PlaneState> states;
    for (const auto& [cls, cfg] : configs) {
      Result<PlaneState> st = state_after(cfg, position);
      if (!st) throw std::runtime_error(st.status().to_string());
      states.emplace(cls, *st);
    }
    for (int layer : layers) {
      const LayerClass c = g.layer_class(layer);
      TraceEntry e;
      e.position = position;
      e.layer = layer;
      e.cls = c;
      e.state = states.at(c);
      e.decision = choose_route(c, e.state, caps, sw);
      e.visible = g.visible(c, position);
      e.schedule = pinned_schedule(e.visible);
      trace.push_back(e);
    }
  }

  if (o.json) {
    nlohmann::json j;
    j["geometry"] = g.describe();
    j["switches"] = describe_switches(sw);
    j["has_vec_capability"] = caps.has_vec;
    j["trace"] = nlohmann::json::array();
    for (const TraceEntry& e : trace) j["trace"].push_back(to_json(e));
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  std::printf("geometry: %s\n", g.describe().c_str());
  std::printf("vec capability: %s; switches: %s\n", caps.has_vec ? "yes" : "no", describe_switches(sw).c_str());
  std::printf("predicates after the append: vec_rows = (strict || has_vec) && len > 0 && capacity >= 32 && "
              "(origin_physical == 0 || len == capacity); swa_vec = vec_rows && len %% 32 == 0\n\n");
  std::printf("%s\n", format_trace_header().c_str());
  for (const TraceEntry& e : trace) std::printf("%s\n", format_trace(e).c_str());
  return kExitOk;
}

const Register reg{Command{
    "routes", "Print the route ladder's trace (route and every predicate) for positions, layers and plane states",
    [](CLI::App& app) -> Runner {
      auto o = std::make_shared<Options>();
      app.add_option("--positions", o->positions, "Positions to decode: list and ranges, e.g. 0,31,2047-2049")
          ->capture_default_str();
      app.add_option("--layers", o->layers, "Layers to show: list, ranges or 'all'")->capture_default_str();
      app.add_option("--initial-capacity", o->initial_capacity,
                     "First capacity of the growing (NoPE) planes; 0 picks the default");
      app.add_flag("--no-vec-capability", o->no_vec_capability,
                   "Model a build without the vec family (has_vec = false)");
      o->geometry.add_to(app);
      o->switches.add_to(app);
      app.add_flag("--json", o->json, "Print JSON instead of a table");
      return [o] { return run(*o); };
    }}};

}  // namespace
}  // namespace ladder::cli
