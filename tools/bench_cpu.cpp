// `ladder bench` on the CPU: the B3 protocol in one process. The host's ceilings are measured
// first on the worker count (read-only streaming and copy bandwidth, the copy counting bytes read
// + written, and an 8-wide FMA loop on every worker: the roofline's two axes), then single-layer timings per route and
// depth through attend_layer (planes rotated beyond the last-level cache), then the step through
// the CPU Engine's encode_token at each step depth.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <random>
#include <thread>
#include <unistd.h>

#include "bench.hpp"
#include "ladder/attention.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/cpu/membw.hpp"
#include "ladder/engine.hpp"
#include "ladder/reference.hpp"

namespace ladder::bench {
namespace {

// 1 GiB: far beyond any last-level cache, tens of milliseconds per pass.
constexpr std::size_t kProbeBytes = std::size_t{1} << 30;
// FMAs per thread for the arithmetic ceiling: ~10-40 ms per repetition on one core.
constexpr std::int64_t kFmaProbePerThread = std::int64_t{1} << 29;
constexpr int kWarmups = 2;
// When the cache size cannot be read, assume a large server LLC so rotation errs on the safe side.
constexpr std::int64_t kFallbackLlcBytes = std::int64_t{64} << 20;
constexpr std::uint64_t kSeed = 0x1adde5;

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

std::int64_t llc_bytes() {
  const long s = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (s > 0) return s;
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string text;
  if (f >> text && !text.empty()) {
    const std::int64_t n = std::atoll(text.c_str());
    const char unit = text.back();
    if (n > 0) return unit == 'K' ? n << 10 : unit == 'M' ? n << 20 : n;
  }
  return kFallbackLlcBytes;
}

// The three ceilings of the run, on the pool's thread count: read-only streaming and copy over
// kProbeBytes (cpu/membw.hpp), and the FMA rate of every worker.
Ceiling host_ceiling(int threads) {
  Ceiling c;
  c.read_bytes = static_cast<std::int64_t>(kProbeBytes);
  c.copy_bytes = 2 * static_cast<std::int64_t>(kProbeBytes);
  c.read_gbps = cpu::measure_host_read_bandwidth(kProbeBytes, threads) / 1e9;
  c.copy_gbps = cpu::measure_host_copy_bandwidth(kProbeBytes, threads) / 1e9;
  c.fma_per_s = cpu::measure_host_fma_rate(kFmaProbePerThread, threads);
  return c;
}

// Each ceiling the higher of two probes: a shared host's neighbours slow a probe as much as a row
// (on the 2-vCPU build machine one run's FMA probe read 12 % below the next run's), and a slowed
// probe would raise every row's fraction of the roofline.
Ceiling higher_of(const Ceiling& a, const Ceiling& b) {
  Ceiling c = a;
  c.read_gbps = std::max(a.read_gbps, b.read_gbps);
  c.copy_gbps = std::max(a.copy_gbps, b.copy_gbps);
  c.fma_per_s = std::max(a.fma_per_s, b.fma_per_s);
  return c;
}

// Turns off a pool profile that an error return left on (after a normal stop, a no-op).
struct PoolProfileOff {
  PoolProfileOff() = default;
  PoolProfileOff(const PoolProfileOff&) = delete;
  PoolProfileOff& operator=(const PoolProfileOff&) = delete;
  ~PoolProfileOff() { (void)cpu::stop_pool_profile(); }
};

Result<Row> bench_layer(const Geometry& g, const LayerCase& c, int depth, const Options& o, std::int64_t llc,
                        const std::vector<KvWord>& pool, const std::vector<float>& acts) {
  const PlaneConfig cfg = layer_plane_config(g, c.plane, depth);
  const int position = layer_position(c.plane, depth);
  Result<HostPlane> made = HostPlane::create(cfg);
  if (!made.ok()) return made.status();
  HostPlane base = std::move(*made);
  for (int p = 0; p < position; ++p) {
    Result<int> slot = base.append(p);
    if (!slot.ok()) return slot.status();
  }
  std::memcpy(base.k(), pool.data(), base.elements() * sizeof(KvWord));
  std::memcpy(base.v(), pool.data() + pool.size() - base.elements(), base.elements() * sizeof(KvWord));
  Result<int> slot = base.append(position);
  if (!slot.ok()) return slot.status();

  const std::int64_t plane_bytes = g.kv_bytes_per_token_layer() * depth;
  const int sets = rotation_sets(plane_bytes, llc, o.rotate_factor);
  std::vector<HostPlane> planes(sets, base);
  const HeadShape shape{g.n_heads, g.n_kv_heads, g.head_dim, g.scale()};
  const float* q = acts.data();
  const float* k = q + g.n_heads * g.head_dim;
  const float* v = k + g.n_kv_heads * g.head_dim;
  std::vector<float> out(static_cast<std::size_t>(g.n_heads) * g.head_dim);
  const LayerIO io{q, k, v, out.data()};
  std::vector<double> us;
  const PoolProfileOff profile_off;
  for (int r = 0; r < kWarmups + o.reps; ++r) {
    HostPlane& p = planes[r % sets];
    if (o.pool_profile && r == kWarmups) LADDER_TRY(cpu::start_pool_profile());
    const auto t0 = Clock::now();
    LADDER_TRY(attend_layer(Device::cpu, c.route, p, position, *slot, shape, io));
    if (r >= kWarmups) us.push_back(us_since(t0));
  }
  Row row;
  if (o.pool_profile) row.pool = cpu::stop_pool_profile();
  row.kind = "layer";
  row.name = case_name(c);
  row.depth = depth;
  set_timing(row, summarize(std::move(us)));
  row.bytes = layer_bytes(g, depth);
  row.fmas = layer_fmas(g, depth);
  row.rotation_sets = sets;
  row.rotated_bytes = plane_bytes * sets;
  flag_non_finite(out.data(), out.size(), row.note);
  return row;
}

// The CPU Engine's encode_token at `depth` (time_encode_token, bench_common.cpp).
Result<Row> bench_step(const Geometry& g, int depth, const Switches& sw, const char* name, const Options& o) {
  EngineOptions eo;
  eo.device = Device::cpu;
  eo.switches = sw;
  Result<std::unique_ptr<Engine>> made = Engine::create(g, eo);
  if (!made.ok()) return made.status();
  const auto start_profile = [] { return cpu::start_pool_profile(); };
  Result<Row> row = time_encode_token(**made, depth, o.reps, kWarmups, sw, kSeed, nullptr, nullptr,
                                      o.pool_profile ? std::function<Status()>(start_profile) : nullptr);
  const std::optional<cpu::PoolProfile> pool =
      o.pool_profile ? std::optional<cpu::PoolProfile>(cpu::stop_pool_profile()) : std::nullopt;
  if (!row.ok()) return row.status();
  row->pool = pool;
  row->kind = "step";
  row->name = name;
  row->note = "Engine::encode_token, " + row->note;
  return row;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "CPU";
}

}  // namespace

Result<Report> run_cpu(const Geometry& g, const Options& o) {
  Report rep;
  rep.device = "cpu";
  rep.threads = cpu::threads();
  Result<cpu::CpuProducer> producer = cpu::producer();
  if (!producer.ok()) return producer.status();
  Result<cpu::CpuVectors> vectors = cpu::vectors();
  if (!vectors.ok()) return vectors.status();
  rep.device_name = fmt::format("{} ({} worker threads, {} producer, {} vectors)", cpu_model(), rep.threads,
                                cpu::cpu_producer_name(*producer), cpu::cpu_vectors_name(*vectors));
  rep.date = utc_now();
  rep.cache_bytes = llc_bytes();
  auto progress = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  progress(fmt::format("ceilings: host memory read and copy bandwidth, FMA rate, on {} threads", rep.threads));
  rep.ceiling = host_ceiling(rep.threads);

  int max_depth = 4096;
  for (int d : o.depths) max_depth = std::max(max_depth, d);
  const std::vector<KvWord> pool =
      random_words(static_cast<std::size_t>(max_depth) * g.n_kv_heads * g.head_dim, kSeed, g.kv_dtype);
  const std::vector<float> acts =
      random_floats(static_cast<std::size_t>(g.n_heads + 2 * g.n_kv_heads) * g.head_dim, kSeed + 7);
  const std::size_t total = o.depths.size() * o.cases.size() + o.step_depths.size();
  std::size_t done = 0;
  for (int depth : o.depths)
    for (const LayerCase& c : o.cases) {
      progress(fmt::format("[{}/{}] layer {} at depth {}", ++done, total, case_name(c), depth));
      Result<Row> r = bench_layer(g, c, depth, o, rep.cache_bytes, pool, acts);
      if (!r.ok()) return r.status();
      rep.rows.push_back(*r);
    }
  for (int depth : o.step_depths) {
    progress(fmt::format("[{}/{}] {}-layer step at depth {} (fills {} tokens first)", ++done, total, g.n_layers,
                         depth, depth));
    if (depth > g.max_context)
      return make_error(ErrorCode::invalid_argument,
                        fmt::format("step depth {} is past the geometry's max context {}", depth, g.max_context));
    Result<Row> r = bench_step(g, depth, Switches{}, "step", o);
    if (!r.ok()) return r.status();
    rep.rows.push_back(*r);
    if (o.step_fallbacks) {
      Switches off;
      off.disable_vec = true;
      Result<Row> f = bench_step(g, depth, off, "step (vec off)", o);
      if (!f.ok()) return f.status();
      rep.rows.push_back(*f);
    }
  }
  rep.notes.push_back(fmt::format("single layer: attend_layer on the CPU, planes rotated beyond the "
                                  "last-level cache ({:.0f} MB); rings wrapped with window = capacity = depth",
                                  static_cast<double>(rep.cache_bytes) / 1e6));
  rep.notes.push_back("step: the CPU Engine's encode_token, the last tokens before the depth");
  LADDER_TRY(add_batch_rows(g, Device::cpu, o, rep.rows, rep.notes));
  if (!o.batches.empty())
    rep.notes.push_back("batch rows: Engine::encode, one call per token for every sequence (each its own planes), "
                        "each layer one pool job over every sequence's tasks");
  progress("ceilings again, after the rows (each ceiling is the higher of the two probes)");
  const Ceiling before = rep.ceiling;
  const Ceiling after = host_ceiling(rep.threads);
  rep.ceiling = higher_of(before, after);
  rep.notes.push_back(fmt::format("ceilings probed before and after the rows, the higher kept: read {:.1f} / {:.1f} GB/s, "
                                  "copy {:.1f} / {:.1f} GB/s, FMA {:.1f} / {:.1f} GFMA/s",
                                  before.read_gbps, after.read_gbps, before.copy_gbps, after.copy_gbps,
                                  before.fma_per_s / 1e9, after.fma_per_s / 1e9));
  return rep;
}

}  // namespace ladder::bench
