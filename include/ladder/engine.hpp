// E1: the decode engine. Holds one plane per layer for a geometry on the chosen device; each
// encode_token appends, asks the ladder for a route per layer, and runs it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ladder/errors.hpp"
#include "ladder/geometry.hpp"
#include "ladder/ladder.hpp"
#include "ladder/nonfinite.hpp"

namespace ladder {

enum class Device { cpu, cuda };
const char* device_name(Device d);
// True when a CUDA device is usable by this build (false in builds without CUDA).
bool cuda_available();

struct EngineOptions {
  Device device = Device::cpu;
  Capabilities caps;
  Switches switches;
  bool record_trace = false;
  // Initial capacity of the growing (NoPE) planes; 0 picks a default. They double when full.
  int initial_growing_capacity = 0;
  // N1's opt-in check (also LADDER_CHECK_FINITE=1): a token with a NaN or Inf anywhere in its
  // q, k or v is refused with ErrorCode::non_finite before any plane is touched. Off, such a
  // value follows the range rule (nonfinite.hpp) and propagates to the outputs it reaches.
  bool check_finite = false;
};

// Per-token activations for all layers, host memory, f32:
//   q, out: [n_layers][n_heads][head_dim];  k, v: [n_layers][n_kv_heads][head_dim].
struct TokenIO {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
};

// Threads (docs/threads.md): one thread at a time per engine; no member is synchronised, and
// trace()'s reference changes with the next encode_token or clear_trace. Different engines may
// be driven from different threads (CPU engines share the process-wide worker pool).
class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const Geometry& g, const EngineOptions& opt);
  virtual ~Engine() = default;

  // Append `position` to every layer's plane and compute every layer's attention output.
  // Positions must arrive in order from 0; a refused position leaves every plane untouched.
  virtual Status encode_token(int position, const TokenIO& io) = 0;

  // A pure KV append: appends `position` to every layer's plane and stores that token's K/V
  // rows (io.k, io.v; io.q and io.out are ignored), computing no attention and recording no
  // trace. It brings the planes to a depth quickly (the demo and benchmarks start decoding at
  // depth 2048+ without teacher-forcing every earlier token through attention). The planes end
  // exactly as encode_token would leave them; the same ordering and refusal rules apply.
  virtual Status fill_token(int position, const TokenIO& io) = 0;

  virtual const Geometry& geometry() const = 0;
  virtual Device device() const = 0;
  virtual std::string device_description() const = 0;
  virtual PlaneState plane_state(int layer) const = 0;
  // N1's counters over every token since creation: values saturated to +-65504 and NaN/Inf
  // values read (nonfinite.hpp), summed over all layers' q, k and v.
  virtual RangeStats range_stats() const = 0;
  // Trace of every (token, layer) since creation (when record_trace) — R4.
  virtual const std::vector<TraceEntry>& trace() const = 0;
  virtual void clear_trace() = 0;
};

}  // namespace ladder
