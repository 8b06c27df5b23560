// `ladder bench` (C5) internals: the B1 protocol on the GPU and B3 on the CPU. Both produce one
// Report (ceiling first, then rows), which cmd_bench.cpp prints as a table or JSON.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ladder/cpu/pool_profile.hpp"
#include "ladder/engine.hpp"
#include "ladder/errors.hpp"
#include "ladder/geometry.hpp"
#include "ladder/ladder.hpp"

namespace ladder::bench {

// A single-layer case: a route on a plane of one kind (vec runs on both plane kinds).
struct LayerCase {
  Route route = Route::vec;
  PlaneKind plane = PlaneKind::growing;
};
std::string case_name(const LayerCase& c);  // "vec/growing"
// Every route on the plane kinds it serves: splitk, vec and staged on rings; vec and
// interleaved on growing planes.
std::vector<LayerCase> all_layer_cases();

struct Options {
  std::vector<int> depths;             // single-layer depths (tokens visible)
  std::vector<int> step_depths;        // 52-layer step depths
  std::vector<LayerCase> cases;
  int reps = 0;                        // timed repetitions; the median is reported
  // E3: batch sizes (> 1) timed through Engine::encode at each step depth up to
  // batch_max_depth, with every sequence at the step depth and with mixed lengths.
  std::vector<int> batches;
  int batch_max_depth = 8192;
  double rotate_factor = 4.0;          // rotated buffers total >= rotate_factor x last-level cache
  bool step_fallbacks = true;          // also time the step with the vec family switched off
  bool engine_step = true;             // also time Engine::encode_token (host I/O included)
  // Engine::encode_token is timed only up to this depth: the engine fills its planes one token
  // at a time through host memory (fill_token), which costs seconds per ten thousand tokens.
  int engine_max_depth = 32768;
  // CPU: each row's timed calls also profile the worker pool (Row::pool).
  bool pool_profile = false;
  std::function<void(const std::string&)> progress;  // a line on stderr per measurement
};

// The ceiling of a run (B1/B3): copy (read + written) and read-only streaming; the higher wins.
struct Ceiling {
  double copy_gbps = 0.0;
  double read_gbps = 0.0;
  std::int64_t copy_bytes = 0;
  std::int64_t read_bytes = 0;
  double gbps() const { return copy_gbps > read_gbps ? copy_gbps : read_gbps; }
  const char* source() const { return copy_gbps > read_gbps ? "copy" : "read"; }
  // CPU only (0 on the GPU): single-precision FMAs per second over every worker, measured with
  // an 8-wide FMA loop (cpu::measure_host_fma_rate), the arithmetic ceiling of the roofline.
  double fma_per_s = 0.0;
};

struct Row {
  std::string kind;   // "layer", "step" (graph of the per-layer launches), "engine" (encode_token)
  std::string name;   // "splitk/ring", "step", "step (vec off)", "encode_token"
  std::string route_mix;  // step: per-route layer counts, e.g. "vec x52"
  int depth = 0;
  int batch = 1;
  double median_us = 0.0;
  double min_us = 0.0;
  double max_us = 0.0;
  std::int64_t bytes = 0;     // the fewest bytes the case must move (plane rows read, activations)
  std::int64_t fmas = 0;      // multiply-adds the case must do: q.k and w.v per head and token
  int rotation_sets = 1;      // distinct buffer sets the timed runs rotate through
  std::int64_t rotated_bytes = 0;
  // The device's own time per call (CUDA events), when the engine's device kept one: median,
  // min, max.
  double device_median_us = 0.0, device_min_us = 0.0, device_max_us = 0.0;
  std::string note;
  // CPU with Options::pool_profile: where the worker pool's thread time went in the timed calls.
  std::optional<cpu::PoolProfile> pool;
  // Derived against the run's ceiling.
  double gbps() const { return median_us > 0 ? static_cast<double>(bytes) / (median_us * 1e3) : 0.0; }
};

// Median, min and max of a measurement's timings (µs).
struct Timing {
  double median_us = 0.0, min_us = 0.0, max_us = 0.0;
};
Timing summarize(std::vector<double> us);  // `us` not empty
// "vec x39, splitk x13": per-route layer counts of a step.
std::string format_route_mix(const std::map<std::string, int>& layers_per_route);
void set_timing(Row& row, const Timing& t);

// Appends "NON-FINITE OUTPUT" to `note` (cmd_bench fails the run on it) when any value is NaN
// or infinite.
void flag_non_finite(const float* values, std::size_t n, std::string& note);

struct Report {
  std::string device;      // "cuda" or "cpu"
  std::string device_name;
  std::string date;        // UTC, ISO 8601
  std::int64_t cache_bytes = 0;  // L2 (GPU) or last-level cache (CPU) used for rotation
  int threads = 0;               // CPU worker threads
  std::string kv_dtype = "f16";  // the planes' element type (--kv-dtype)
  Ceiling ceiling;
  std::vector<Row> rows;
  std::vector<std::string> notes;
};

Result<Report> run_gpu(const Geometry& g, const Options& o);
Result<Report> run_cpu(const Geometry& g, const Options& o);

// The CPU roofline (issue 11): the time a row cannot beat on this machine,
// max(bytes / read bandwidth, fmas / FMA rate), in microseconds, and which ceiling binds
// ("memory" or "fma"). Without an FMA ceiling (the GPU) it is the memory floor against the run's
// ceiling (the higher of copy and read).
struct Roofline {
  double us = 0.0;
  const char* bound = "memory";
};
Roofline roofline(const Row& r, const Ceiling& c);

// Multiply-adds one layer must do at `visible` tokens (2 x n_heads x visible x head_dim: the
// scores and the weighted sum of V), and the whole step for the token at `position`.
std::int64_t layer_fmas(const Geometry& g, int visible);
std::int64_t step_fmas(const Geometry& g, int position);

// Bytes a single layer must move at `visible` tokens: K and V rows read once, the row stored,
// q and the current K/V read, out written.
std::int64_t layer_bytes(const Geometry& g, int visible);

// Bytes the whole step moves for the token at `position`: layer_bytes of every layer at its
// class's visible length.
std::int64_t step_bytes(const Geometry& g, int position);


// E3: Engine::encode on the host clock over one call of depths.size() sequences, sequence i
// decoding up to position depths[i] - 1 (batched fills bring each to its depth first). The row
// has the timing per call, the bytes and FMAs of every sequence's step, "batch" and a note; the
// caller names it.
// Device copies of a batch row's activations (the CUDA bench provides them): `make` gives one
// TokenIO per sequence in device memory, q, k and v holding what time_encode_batch makes from
// `seed` on the host, out a buffer per sequence; `read_out` brings one sequence's out back.
struct DeviceActivations {
  std::function<Result<std::vector<TokenIO>>(const Geometry& g, int b, std::uint64_t seed)> make;
  std::function<Result<std::vector<float>>(const TokenIO& io, std::size_t n)> read_out;
  explicit operator bool() const { return make && read_out; }
};
// `device_io` (nullptr: host memory): the activations of every sequence in device memory.
// `before_last_call` (when set) runs right before the last timed call (the CUDA bench's
// timeline reset: diagnostic builds record that call alone); `before_first_timed` right before
// the first (the CPU bench's pool profile starts there, after the fill and the warm-up calls).
Result<Row> time_encode_batch(Engine& e, const std::vector<int>& depths, int reps, int warmups, std::uint64_t seed,
                              const std::vector<TokenIO>* device_io = nullptr, const DeviceActivations* reader = nullptr,
                              const std::function<Status()>& before_last_call = {},
                              const std::function<Status()>& before_first_timed = {});
// One sequence's token (Engine::encode_token's call) on the host clock, either device and either
// memory: time_encode_batch with depths {depth} (fills to just below `depth`, `warmups` tokens,
// then `reps` timed tokens ending at position depth - 1, at least one), plus the route mix the
// ladder picks with `sw` for the last token. The note says "positions a..b" and where the
// activations were; the caller names the row.
Result<Row> time_encode_token(Engine& e, int depth, int reps, int warmups, const Switches& sw, std::uint64_t seed,
                              const std::vector<TokenIO>* device_io = nullptr,
                              const DeviceActivations* reader = nullptr,
                              const std::function<Status()>& before_first_timed = {});
// The two batch shapes measured for batch size b at depth d: every sequence at d, and mixed
// lengths d - i*d/b (sequence 0 at d).
std::vector<int> same_depths(int b, int d);
std::vector<int> mixed_depths(int b, int d);
// The batch rows of a report on `device` (each batch size of o.batches at each step depth up to
// o.batch_max_depth, both shapes), appended to `rows`.
// How a batch row makes its engine (the CUDA bench: with per-call GPU timing); empty:
// Engine::create.
using MakeEngine = std::function<Result<std::unique_ptr<Engine>>(const Geometry&, const EngineOptions&)>;
// One layer of class `cls` over `b` sequences at `depth` visible tokens: an engine of a one-layer
// geometry (a ring of window = capacity = depth, like the single-layer rows, or a growing
// plane), every sequence filled to the depth, then timed calls of all b. The row's median is the
// device's own time per call (CUDA events: the step-state fetch, N1's count kernel and the
// route's kernels over every sequence) and its note gives the host clock's; the activations stay
// in device memory. Comparable with a peer's batched single-layer call at L >= 32768, where the
// b planes exceed the L2 (the rows are not rotated).
Result<Row> time_layer_batch(const Geometry& g, LayerClass cls, int depth, int b, int reps,
                             const DeviceActivations& device_io, const MakeEngine& make,
                             const std::function<Status()>& before_last_call = {});
// With `device_io`, every row is timed a second time with the activations in device memory. A
// batch whose planes do not fit the device becomes a note in `notes` ("not measured: ..."), and
// the rows go on.
Status add_batch_rows(const Geometry& g, Device device, const Options& o, std::vector<Row>& rows,
                      std::vector<std::string>& notes, const DeviceActivations& device_io = {},
                      const MakeEngine& make = {});

// A single-layer case's plane, the same on both devices: a ring has window = capacity = depth
// and is timed wrapped (origin_physical != 0, len == capacity), the state every ring route can
// run on; a growing plane holds exactly `depth` rows. layer_position is the position timed.
PlaneConfig layer_plane_config(const Geometry& g, PlaneKind kind, int depth);
int layer_position(PlaneKind kind, int depth);

// The current time, UTC, ISO 8601 (a report's date).
std::string utc_now();

// Synthetic inputs, uniform in [-1, 1) (never zeros): plane rows of a dtype and f32 activations.
std::vector<KvWord> random_words(std::size_t n, std::uint64_t seed, KvDtype dtype);
std::vector<float> random_floats(std::size_t n, std::uint64_t seed);

// How many buffer sets of `set_bytes` to rotate among so they total >= factor x the cache,
// capped so a graph of one call per set stays bounded.
int rotation_sets(std::int64_t set_bytes, std::int64_t cache_bytes, double factor);

}  // namespace ladder::bench
