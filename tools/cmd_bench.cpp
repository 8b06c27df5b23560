// `ladder bench` (C5): time and bandwidth per route and depth, and the whole step, against the
// bandwidth ceiling measured in the same process (B1 on the GPU, B3 on the CPU; on the CPU also
// the FMA ceiling and each row's roofline time and fraction of it). A table on
// stdout, JSON with --json (or --output FILE), progress lines on stderr.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "cli_support.hpp"
#include "commands.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/heuristics.hpp"

namespace ladder::cli {
namespace {

// Default timed repetitions: graph replays on the GPU are cheap; a CPU layer at depth 131072
// streams 128 MB per call.
constexpr int kDefaultGpuReps = 50;
constexpr int kDefaultCpuReps = 10;
// Sequences per call one batch row may hold (each has its own planes, filled first).
constexpr int kMaxBatch = 256;
// Upper bounds of the numeric flags, so that every accepted value finishes in minutes: 1000
// repetitions of a CPU layer at depth 131072 (about 40 ms each here) is under a minute per case.
constexpr int kMaxReps = 1000;
// Rotation beyond this many x the cache buys nothing (the sets are capped at 256 anyway).
constexpr double kMaxRotate = 64.0;

// SPEC "Where the bar is" (H200, graph replay, batch 1): targets in microseconds.
const std::map<int, double> kLayerTargetUs = {{2048, 2.5}, {8192, 4.0}, {32768, 9.5}, {131072, 32.5}};
const std::map<int, double> kStepTargetUs = {{2048, 100.0}, {32768, 180.0}, {131072, 460.0}};

struct Options {
  GeometryFlags geometry;
  std::string device = "auto";
  std::string depths = "2048,8192,32768,131072";
  std::string step_depths = "2048,32768,131072";
  std::string routes = "all";
  int reps = 0;
  std::string batch = "1";
  int batch_max_depth = 8192;
  double rotate = 4.0;
  CpuFlags cpu_flags;
  bool no_fallback_step = false;
  bool pool_profile = false;
  bool no_engine = false;
  int engine_max_depth = 32768;
  bool json = false;
  std::string output;
  bool quiet = false;
};

// Depths from 1 (or `multiple`) up to the geometry's max context; a layer depth must be a
// multiple of kBlockTokens because the vec and staged cases read whole 32-row blocks of a full
// ring (refused up front, not halfway through the run).
std::vector<int> parse_depths(const std::string& text, const char* what, int max_context, int multiple) {
  if (text == "none" || text.empty()) return {};
  std::vector<int> depths = parse_int_list(text, what, multiple, max_context);
  for (int d : depths)
    if (d % multiple != 0)
      throw UsageError(fmt::format("{}: {} is not a multiple of {} (the vec and staged routes read {}-row blocks of "
                                   "a full ring)",
                                   what, d, multiple, multiple));
  return depths;
}

std::vector<bench::LayerCase> parse_cases(const std::string& text) {
  const std::vector<bench::LayerCase> all = bench::all_layer_cases();
  if (text == "all") return all;
  if (text == "none") return {};
  std::vector<bench::LayerCase> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    bool matched = false;
    for (const auto& c : all)
      if (item == bench::case_name(c) || item == route_name(c.route)) {
        out.push_back(c);
        matched = true;
      }
    if (!matched) {
      std::string names;
      for (const auto& c : all) names += " " + bench::case_name(c);
      throw UsageError(fmt::format("--routes: unknown route '{}'; use a route (vec, splitk, interleaved, staged), a "
                                   "route/plane pair ({} ), 'all' or 'none'",
                                   item, names));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

double target_for(const bench::Row& r) {
  if (r.batch != 1) return 0.0;
  const auto& table = r.kind == "layer" ? kLayerTargetUs : kStepTargetUs;
  const auto it = table.find(r.depth);
  return it == table.end() ? 0.0 : it->second;
}

nlohmann::json pool_json(const cpu::PoolProfile& p) {
  return {{"jobs", p.jobs},
          {"tasks", p.tasks},
          {"dropped_tasks", p.dropped},
          {"threads", p.threads},
          {"span_us_median", p.span_us},
          {"join_us_median", p.join_us},
          {"idle_threads_mean", p.idle_threads},
          {"share_working", p.working},
          {"share_waiting", p.waiting},
          {"share_before_first_task", p.before_first},
          {"share_between_tasks", p.between},
          {"share_after_last_task", p.after_last}};
}

// One line per profiled row under the table: where the pool's threads x span went.
std::string pool_line(const bench::Row& r) {
  const cpu::PoolProfile& p = *r.pool;
  return fmt::format(
      "pool {} {} at {}: {} jobs on {} threads, span {:.1f} us; of threads x span: working {:.1f} %, waiting {:.1f} %, "
      "before a thread's first task {:.1f} % (the last joins {:.1f} us after the post; {:.2f} threads per job take "
      "none), between tasks {:.1f} %, after a thread's last task {:.1f} %{}",
      r.kind, r.name, r.depth, p.jobs, p.threads, p.span_us, 100 * p.working, 100 * p.waiting, 100 * p.before_first,
      p.join_us, p.idle_threads, 100 * p.between, 100 * p.after_last,
      p.dropped > 0 ? fmt::format(" ({} tasks past the record's room left out)", p.dropped) : "");
}

nlohmann::json to_json(const bench::Report& rep) {
  const double ceiling = rep.ceiling.gbps();
  nlohmann::json rows = nlohmann::json::array();
  for (const bench::Row& r : rep.rows) {
    const double floor_us = static_cast<double>(r.bytes) / (ceiling * 1e3);
    nlohmann::json j = {{"kind", r.kind},
                        {"name", r.name},
                        {"depth", r.depth},
                        {"batch", r.batch},
                        {"median_us", r.median_us},
                        {"min_us", r.min_us},
                        {"max_us", r.max_us},
                        {"bytes", r.bytes},
                        {"gb_per_s", r.gbps()},
                        {"fraction_of_ceiling", r.gbps() / ceiling},
                        {"floor_us", floor_us},
                        {"ratio_to_floor", r.median_us / floor_us},
                        {"rotation_sets", r.rotation_sets},
                        {"rotated_bytes", r.rotated_bytes}};
    if (r.device_median_us > 0) j["device_median_us"] = r.device_median_us;
    if (rep.ceiling.fma_per_s > 0) {
      const bench::Roofline roof = bench::roofline(r, rep.ceiling);
      j["fmas"] = r.fmas;
      j["roofline_us"] = roof.us;
      j["roofline_bound"] = roof.bound;
      j["fraction_of_roofline"] = roof.us / r.median_us;
    }
    if (!r.route_mix.empty()) j["route_mix"] = r.route_mix;
    if (!r.note.empty()) j["note"] = r.note;
    if (r.pool) j["pool_profile"] = pool_json(*r.pool);
    if (rep.device == "cuda" && target_for(r) > 0) j["spec_target_us"] = target_for(r);
    rows.push_back(j);
  }
  return {{"device", rep.device},
          {"device_name", rep.device_name},
          {"date", rep.date},
          {"cache_bytes", rep.cache_bytes},
          {"threads", rep.threads},
          {"kv_dtype", rep.kv_dtype},
          {"ceiling",
           {{"copy_gb_per_s", rep.ceiling.copy_gbps},
            {"read_gb_per_s", rep.ceiling.read_gbps},
            {"copy_bytes_per_run", rep.ceiling.copy_bytes},
            {"read_bytes_per_run", rep.ceiling.read_bytes},
            {"ceiling_gb_per_s", ceiling},
            {"source", rep.ceiling.source()},
            {"fma_g_per_s", rep.ceiling.fma_per_s / 1e9}}},
          {"rows", rows},
          {"notes", rep.notes}};
}

void print_table(const bench::Report& rep) {
  const double ceiling = rep.ceiling.gbps();
  std::printf("ladder bench on %s: %s, %s, KV %s\n", rep.device.c_str(), rep.device_name.c_str(), rep.date.c_str(),
              rep.kv_dtype.c_str());
  std::printf("ceiling %.0f GB/s (%s): copy %.0f GB/s (bytes read + written), read-only %.0f GB/s\n", ceiling,
              rep.ceiling.source(), rep.ceiling.copy_gbps, rep.ceiling.read_gbps);
  const bool targets = rep.device == "cuda";
  // The CPU roofline: max(bytes / read bandwidth, FMAs / FMA rate) and the fraction of it reached.
  const bool roof = rep.ceiling.fma_per_s > 0;
  if (roof)
    std::printf("FMA ceiling %.1f GFMA/s on %d threads; roofline = max(bytes / read %.1f GB/s, FMAs / FMA rate)\n",
                rep.ceiling.fma_per_s / 1e9, rep.threads, rep.ceiling.read_gbps);
  std::printf("%-7s %-20s %7s %11s %9s %8s %10s %9s %6s %s%s\n", "kind", "case", "depth", "median_us", "GB/s",
              "of_ceil", "floor_us", "x_floor", "sets", roof ? "   roof_us of_roof bound  " : "",
              targets ? "target_us  route mix / note" : "route mix / note");
  for (const bench::Row& r : rep.rows) {
    const double floor_us = static_cast<double>(r.bytes) / (ceiling * 1e3);
    std::string tail;
    if (roof) {
      const bench::Roofline rl = bench::roofline(r, rep.ceiling);
      tail = fmt::format("{:>10.2f} {:>7.3f} {:<6} ", rl.us, rl.us / r.median_us, rl.bound);
    }
    if (targets) tail += target_for(r) > 0 ? fmt::format("{:>9.1f}  ", target_for(r)) : fmt::format("{:>9}  ", "-");
    tail += r.route_mix;
    if (!r.note.empty()) tail += (r.route_mix.empty() ? "" : "; ") + r.note;
    std::printf("%-7s %-20s %7d %11.2f %9.1f %8.3f %10.2f %9.2f %6d %s\n", r.kind.c_str(), r.name.c_str(), r.depth,
                r.median_us, r.gbps(), r.gbps() / ceiling, floor_us, r.median_us / floor_us, r.rotation_sets,
                tail.c_str());
  }
  for (const bench::Row& r : rep.rows)
    if (r.pool) std::printf("%s\n", pool_line(r).c_str());
  for (const std::string& n : rep.notes) std::printf("note: %s\n", n.c_str());
}

int run(const Options& o) {
  const Geometry g = o.geometry.resolve();
  // Batch 1 is every other row; larger sizes add the engine's batched rows (E3).
  std::vector<int> batches;
  for (int b : parse_int_list(o.batch, "--batch", 1, kMaxBatch))
    if (b > 1) batches.push_back(b);
  if (o.batch_max_depth < 0)
    throw UsageError(fmt::format("--batch-max-depth must be >= 0 (got {})", o.batch_max_depth));
  if (o.reps < 0 || o.reps > kMaxReps)
    throw UsageError(fmt::format("--reps must be in 1..{} (0 picks the default; got {})", kMaxReps, o.reps));
  if (!(o.rotate >= 1.0 && o.rotate <= kMaxRotate))
    throw UsageError(fmt::format("--rotate must be in 1..{} (multiples of the last-level cache; got {})", kMaxRotate,
                                 o.rotate));
  // A threshold on step depths, which are bounded by the max context already: any value >= 0
  // is meaningful (above the max context it times every step through the engine).
  if (o.engine_max_depth < 0)
    throw UsageError(fmt::format("--engine-max-depth must be >= 0 (got {})", o.engine_max_depth));
  bench::Options bo;
  bo.depths = parse_depths(o.depths, "--depths", g.max_context, kBlockTokens);
  bo.step_depths = parse_depths(o.step_depths, "--step-depths", g.max_context, 1);
  bo.cases = parse_cases(o.routes);
  if (bo.depths.empty() != bo.cases.empty() && !bo.depths.empty())
    throw UsageError("--routes none leaves nothing to time at --depths; pass --depths none too");
  bo.rotate_factor = o.rotate;
  bo.step_fallbacks = !o.no_fallback_step;
  bo.pool_profile = o.pool_profile;
  bo.engine_step = !o.no_engine;
  bo.engine_max_depth = o.engine_max_depth;
  bo.batches = batches;
  bo.batch_max_depth = o.batch_max_depth;
  if (!o.quiet) bo.progress = [](const std::string& s) { std::fprintf(stderr, "bench: %s\n", s.c_str()); };

  const Device device = resolve_device(o.device);
  if (o.pool_profile && device != Device::cpu)
    throw UsageError("--pool-profile profiles the CPU worker pool: it needs --device cpu");
  if (device == Device::cpu) o.cpu_flags.apply();
  bo.reps = o.reps > 0 ? o.reps : (device == Device::cuda ? kDefaultGpuReps : kDefaultCpuReps);
  Result<bench::Report> rep = device == Device::cuda ? bench::run_gpu(g, bo) : bench::run_cpu(g, bo);
  if (!rep.ok()) throw std::runtime_error(rep.status().to_string());
  rep->kv_dtype = kv_dtype_name(g.kv_dtype);

  const nlohmann::json j = to_json(*rep);
  if (!o.output.empty()) {
    std::ofstream f(o.output);
    if (!f) throw std::runtime_error(fmt::format("cannot write {}", o.output));
    f << j.dump(2) << "\n";
  }
  if (o.json)
    std::printf("%s\n", j.dump(2).c_str());
  else
    print_table(*rep);
  for (const bench::Row& r : rep->rows)
    if (r.note.find("NON-FINITE") != std::string::npos) return kExitFailure;
  return kExitOk;
}

const Register reg{Command{
    "bench",
    "Time every route per depth and the whole step against the bandwidth ceiling measured in the same run (B1/B3)",
    [](CLI::App& app) -> Runner {
      auto o = std::make_shared<Options>();
      app.add_option("--device", o->device, "cpu, cuda, or auto (cuda when a GPU is usable, else cpu)")
          ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
          ->capture_default_str();
      app.add_option("--depths", o->depths, "Single-layer depths (visible tokens), comma list, or 'none'")
          ->capture_default_str();
      app.add_option("--step-depths", o->step_depths, "Whole-step depths, comma list, or 'none'")
          ->capture_default_str();
      app.add_option("--routes", o->routes,
                     "Single-layer cases: routes (vec, splitk, interleaved, staged), route/plane pairs "
                     "(e.g. vec/ring), 'all' or 'none'")
          ->capture_default_str();
      app.add_option("--reps", o->reps, "Timed repetitions per measurement (0: 50 on the GPU, 10 on the CPU)")
          ->capture_default_str();
      app.add_option("--batch", o->batch,
                     "Sequences per call, comma list (e.g. 1,4,16,64): sizes above 1 add Engine::encode rows at each "
                     "step depth up to --batch-max-depth, all sequences at that depth and mixed lengths")
          ->capture_default_str();
      app.add_option("--batch-max-depth", o->batch_max_depth,
                     "Deepest step depth of the batch rows (each sequence is filled to it first)")
          ->capture_default_str();
      app.add_option("--rotate", o->rotate, "Rotated buffers total at least this many x the L2 / last-level cache")
          ->capture_default_str();
      o->cpu_flags.add_to(app);
      app.add_flag("--no-fallback-step", o->no_fallback_step, "Skip the step timed with the vec family off");
      app.add_flag("--pool-profile", o->pool_profile,
                   "CPU: also profile the worker pool during each row's timed calls (where its threads' time goes: "
                   "working, waiting, before their first task, between tasks, after their last)");
      app.add_flag("--no-engine", o->no_engine, "Skip Engine::encode_token timings on the GPU");
      app.add_option("--engine-max-depth", o->engine_max_depth,
                     "Deepest step depth timed through Engine::encode_token on the GPU")
          ->capture_default_str();
      o->geometry.add_to(app);
      app.add_flag("--json", o->json, "Print JSON instead of the table");
      app.add_option("--output", o->output, "Also write the JSON report to this file");
      app.add_flag("--quiet", o->quiet, "No progress lines on stderr");
      return [o] { return run(*o); };
    }}};

}  // namespace
}  // namespace ladder::cli
