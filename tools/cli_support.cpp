#include "cli_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "commands.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/heuristics.hpp"

namespace ladder::cli {

void GeometryFlags::add_to(CLI::App& app) {
  app.add_option("--geometry", preset_, "Geometry preset; the flags below override its fields")
      ->check(CLI::IsMember({"muse-glimmer"}))
      ->capture_default_str();
  given_.n_layers = app.add_option("--n-layers", n_layers_, "Number of layers");
  given_.heads = app.add_option("--heads", heads_, "Query heads");
  given_.kv_heads = app.add_option("--kv-heads", kv_heads_, "KV heads (must divide --heads)");
  given_.head_dim = app.add_option("--head-dim", head_dim_, "Dimensions per head");
  given_.window = app.add_option("--window", window_, "SWA window in tokens (0 = unbounded)");
  given_.max_context = app.add_option("--max-context", max_context_, "Positions 0..max-context-1 are allowed");
  given_.ring_slack = app.add_option("--ring-slack", ring_slack_,
                                     "Extra ring rows beyond the window (> 0 makes partially wrapped rings)");
  given_.nope_period = app.add_option("--nope-period", nope_period_,
                                      "Layer i is NoPE when i % period == phase (0 = no NoPE layers)");
  given_.nope_phase = app.add_option("--nope-phase", nope_phase_, "See --nope-period");
  given_.weight_bytes = app.add_option("--weight-bytes", weight_bytes_, "Weight bytes streamed per token (budget)");
  app.add_option("--kv-dtype", kv_dtype_, "KV plane element type: f16 or bf16")->capture_default_str();
}

Geometry GeometryFlags::resolve() const {
  Geometry g = Geometry::muse_glimmer();
  bool changed = false;
  const auto take = [&](CLI::Option* opt, auto& field, auto value) {
    if (opt != nullptr && opt->count() > 0) {
      field = value;
      changed = true;
    }
  };
  take(given_.n_layers, g.n_layers, n_layers_);
  take(given_.heads, g.n_heads, heads_);
  take(given_.kv_heads, g.n_kv_heads, kv_heads_);
  take(given_.head_dim, g.head_dim, head_dim_);
  take(given_.window, g.window, window_);
  take(given_.max_context, g.max_context, max_context_);
  take(given_.ring_slack, g.ring_slack, ring_slack_);
  take(given_.nope_period, g.nope_period, nope_period_);
  take(given_.nope_phase, g.nope_phase, nope_phase_);
  take(given_.weight_bytes, g.weight_bytes_per_token, weight_bytes_);
  if (changed) g.name = "custom (from " + preset_ + ")";
  // The element type is not a shape field: the preset's name stays, describe() names the dtype.
  Result<KvDtype> dtype = parse_kv_dtype(kv_dtype_);
  if (!dtype) throw UsageError("--kv-dtype: " + dtype.status().message());
  g.kv_dtype = *dtype;
  const Status st = g.validate();
  if (!st.ok()) throw UsageError("invalid geometry: " + st.message());
  return g;
}

void SwitchFlags::add_to(CLI::App& app) {
  app.add_flag("--disable-vec", disable_vec, "Switch the vec family off (as LADDER_DISABLE_VEC=1)");
  app.add_flag("--strict", strict, "Take vec rows even without the vec capability (as LADDER_STRICT_ATTENTION=1)");
  app.add_flag("--stage", stage, "Stage wrapped SWA rings into absolute order for vec (the serving parity path)");
}

Switches SwitchFlags::merged_with_env() const {
  Switches s = Switches::from_env();
  s.disable_vec = s.disable_vec || disable_vec;
  s.strict = s.strict || strict;
  s.stage_wrapped_swa = s.stage_wrapped_swa || stage;
  return s;
}

std::string describe_switches(const Switches& s) {
  std::string out;
  const auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!out.empty()) out += ", ";
    out += name;
  };
  add(s.disable_vec, "disable-vec");
  add(s.strict, "strict");
  add(s.stage_wrapped_swa, "stage");
  return out.empty() ? "none" : out;
}

namespace {
// A list argument expands to at most this many values: enough for every position of a 131072
// context, small enough that a typo like 0-2000000000 fails fast instead of exhausting memory.
constexpr long long kMaxListItems = 1LL << 20;

long long parse_one(const std::string& item, const char* what) {
  long long v = 0;
  const char* first = item.data();
  const char* last = item.data() + item.size();
  const auto [ptr, ec] = std::from_chars(first, last, v);
  if (item.empty() || ec != std::errc() || ptr != last)
    throw UsageError(fmt::format("{}: '{}' is not an integer", what, item));
  return v;
}
}  // namespace

std::vector<int> parse_int_list(const std::string& text, const char* what, long long lo, long long hi,
                                int all_count) {
  std::vector<int> out;
  if (text == "all" && all_count >= 0) {
    for (int i = 0; i < all_count; ++i) out.push_back(i);
    return out;
  }
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw UsageError(fmt::format("{}: empty item in '{}'", what, text));
    // A range a-b; a leading '-' is a (rejected) negative number, not a range.
    const std::size_t dash = item.find('-', 1);
    long long a = 0, b = 0;
    if (dash == std::string::npos) {
      a = b = parse_one(item, what);
    } else {
      a = parse_one(item.substr(0, dash), what);
      b = parse_one(item.substr(dash + 1), what);
      if (b < a) throw UsageError(fmt::format("{}: range '{}' runs backwards", what, item));
    }
    if (a < lo || b > hi)
      throw UsageError(fmt::format("{}: {} is outside the allowed range {}..{}", what, item, lo, hi));
    if (b - a >= kMaxListItems || static_cast<long long>(out.size()) + (b - a) >= kMaxListItems)
      throw UsageError(fmt::format("{}: more than {} values; give fewer or shorter ranges", what, kMaxListItems));
    for (long long v = a; v <= b; ++v) out.push_back(static_cast<int>(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

CLI::Option* add_seed_option(CLI::App& app, std::uint64_t& seed, const std::string& help) {
  const CLI::Validator non_negative(
      [](std::string& text) -> std::string {
        return !text.empty() && text.front() == '-' ? "must be a non-negative integer (got " + text + ")" : "";
      },
      "NON-NEGATIVE");
  return app.add_option("--seed", seed, help)->check(non_negative)->capture_default_str();
}

void CpuFlags::add_to(CLI::App& app) {
  app.add_option("--threads", threads,
                 fmt::format("CPU worker threads, 0..{} (0: one per CPU this process may use: its affinity mask and cgroup CPU quota)", kMaxCpuThreads))
      ->check(CLI::Range(0, kMaxCpuThreads))
      ->capture_default_str();
  app.add_option("--cpu-producer", producer,
                 "CPU producer: fast (default) or exact (the twin of the GPU's exact-DAG producer, bit for bit); "
                 "default from LADDER_CPU_PRODUCER")
      ->check(CLI::IsMember({"fast", "exact"}));
  app.add_option("--cpu-vectors", vectors,
                 "the fast CPU producer's vectors: avx512 (16 lanes, where the CPU has AVX-512F) or avx2 (8 lanes); "
                 "the same bits either way; default from LADDER_CPU_VECTORS, else the widest the CPU has")
      ->check(CLI::IsMember({"avx2", "avx512"}));
}

void CpuFlags::apply() const {
  if (!producer.empty()) {
    Result<cpu::CpuProducer> p = cpu::parse_cpu_producer(producer);
    if (!p.ok()) throw UsageError(p.status().message());
    cpu::set_producer(*p);
  } else {
    Result<cpu::CpuProducer> p = cpu::producer();  // a bad LADDER_CPU_PRODUCER fails here, not mid-run
    if (!p.ok()) throw UsageError(p.status().message());
  }
  if (!vectors.empty()) {
    Result<cpu::CpuVectors> v = cpu::parse_cpu_vectors(vectors);  // avx512 on a CPU without it
    if (!v.ok()) throw UsageError(v.status().message());
    cpu::set_vectors(*v);
  } else {
    Result<cpu::CpuVectors> v = cpu::vectors();  // a bad LADDER_CPU_VECTORS fails here, not mid-run
    if (!v.ok()) throw UsageError(v.status().message());
  }
  const Status st = cpu::set_threads(threads);
  if (!st.ok()) throw std::runtime_error(st.to_string());
}

Device resolve_device(const std::string& name) {
  if (name == "cpu") return Device::cpu;
  if (name == "cuda") return Device::cuda;
  return cuda_available() ? Device::cuda : Device::cpu;
}

namespace {
// splitmix64: a counter-based mix, so any (seed, stream, position, layer, index) can be
// regenerated independently.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
constexpr int kMantissaBits = 24;  // uniform floats on a 2^-24 grid, exactly representable
}  // namespace

float synthetic_value(std::uint64_t seed, Stream stream, int position, int layer, int index) {
  std::uint64_t h = mix(seed ^ (static_cast<std::uint64_t>(stream) << 56));
  h = mix(h ^ (static_cast<std::uint64_t>(static_cast<std::uint32_t>(position)) << 20) ^
          static_cast<std::uint64_t>(static_cast<std::uint32_t>(layer)));
  h = mix(h ^ static_cast<std::uint64_t>(static_cast<std::uint32_t>(index)));
  const float unit = static_cast<float>(h >> (64 - kMantissaBits)) / static_cast<float>(1u << kMantissaBits);
  return 2.0f * unit - 1.0f;
}

void fill_synthetic(std::uint64_t seed, Stream stream, int position, int layer, float* dst, int count) {
  for (int i = 0; i < count; ++i) dst[i] = synthetic_value(seed, stream, position, layer, i);
}

std::string with_commas(long long v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string human_bytes(double bytes) {
  constexpr double kK = 1e3, kM = 1e6, kG = 1e9, kT = 1e12;
  if (bytes >= kT) return fmt::format("{:.2f} TB", bytes / kT);
  if (bytes >= kG) return fmt::format("{:.2f} GB", bytes / kG);
  if (bytes >= kM) return fmt::format("{:.1f} MB", bytes / kM);
  if (bytes >= kK) return fmt::format("{:.1f} kB", bytes / kK);
  return fmt::format("{:.0f} B", bytes);
}

}  // namespace ladder::cli
