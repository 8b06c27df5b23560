// Flags and helpers shared by several subcommands: the geometry flags, list/range arguments,
// device selection, ladder switches and the seeded synthetic activations.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "ladder/engine.hpp"
#include "ladder/geometry.hpp"
#include "ladder/ladder.hpp"

namespace ladder::cli {

// --geometry PRESET plus per-field overrides (--n-layers, --heads, --kv-heads, --head-dim,
// --window, --max-context, --ring-slack, --nope-period, --nope-phase, --weight-bytes), and the
// KV element type --kv-dtype f16|bf16 (default f16).
class GeometryFlags {
 public:
  void add_to(CLI::App& app);
  // The preset with every given override applied, validated; throws UsageError if invalid.
  Geometry resolve() const;

 private:
  std::string preset_ = "muse-glimmer";
  int n_layers_ = 0, heads_ = 0, kv_heads_ = 0, head_dim_ = 0, window_ = 0, max_context_ = 0, ring_slack_ = 0,
      nope_period_ = 0, nope_phase_ = 0;
  std::int64_t weight_bytes_ = 0;
  std::string kv_dtype_ = "f16";
  struct Given {
    CLI::Option *n_layers = nullptr, *heads = nullptr, *kv_heads = nullptr, *head_dim = nullptr, *window = nullptr,
                *max_context = nullptr, *ring_slack = nullptr, *nope_period = nullptr, *nope_phase = nullptr,
                *weight_bytes = nullptr;
  } given_;
};

// --disable-vec, --strict, --stage (merged with LADDER_DISABLE_VEC / LADDER_STRICT_ATTENTION).
struct SwitchFlags {
  bool disable_vec = false;
  bool strict = false;
  bool stage = false;
  void add_to(CLI::App& app);
  Switches merged_with_env() const;
};
std::string describe_switches(const Switches& s);

// "0,31,2047" and ranges "0-7"; "all" gives [0, all_count). Throws UsageError with `what` in
// the message on a malformed item or a value outside [lo, hi].
std::vector<int> parse_int_list(const std::string& text, const char* what, long long lo, long long hi,
                                int all_count = -1);

// --threads N (0: one per usable CPU, at most kMaxCpuThreads) and --cpu-producer fast|exact
// for the commands that run the CPU producers.
struct CpuFlags {
  int threads = 0;
  std::string producer;  // empty: LADDER_CPU_PRODUCER, else fast
  std::string vectors;   // empty: LADDER_CPU_VECTORS, else the widest the CPU has
  void add_to(CLI::App& app);
  // Starts the worker pool with --threads workers and selects the producer. A pool the system
  // refuses (process or memory limits) throws std::runtime_error with the reason: an error,
  // never a hang.
  void apply() const;
};

// --seed N: a std::uint64_t seed. CLI11 converts "-1" to an unsigned target by wrapping it to
// 2^64 - 1; the check refuses any negative value instead.
CLI::Option* add_seed_option(CLI::App& app, std::uint64_t& seed, const std::string& help);

// --device cpu|cuda|auto: auto is cuda when a CUDA device is usable, else cpu.
Device resolve_device(const std::string& name);

// Seeded synthetic activations, random-access so that a checker can regenerate any token's
// rows without storing them: uniform in [-1, 1), a function of (seed, stream, position, layer,
// index) only.
enum class Stream : std::uint32_t { q = 1, k = 2, v = 3 };
float synthetic_value(std::uint64_t seed, Stream stream, int position, int layer, int index);
void fill_synthetic(std::uint64_t seed, Stream stream, int position, int layer, float* dst, int count);

// 1234567 -> "1,234,567"; bytes -> "109.1 MB" (decimal units, like the chapter).
std::string with_commas(long long v);
std::string human_bytes(double bytes);

}  // namespace ladder::cli
