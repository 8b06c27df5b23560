// The narrow interface between the one engine (src/engine) and a device (src/cpu, src/cuda).
// Dependencies run one way, core <- devices <- engine <- tools: a device implements these
// classes and includes nothing from src/engine; the engine plans every (sequence, layer) of a
// step with core's plan_append and choose_route and hands the device the finished plan.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ladder/errors.hpp"
#include "ladder/ladder.hpp"
#include "ladder/nonfinite.hpp"
#include "ladder/plane.hpp"

namespace ladder {

enum class Device { cpu, cuda };
const char* device_name(Device d);
// True when a CUDA device is usable by this build (false in builds without CUDA).
bool cuda_available();
// Whether Device::cuda runs the tensor-core producer by default (its in-block arithmetic differs
// from the CPU twins'; LADDER_GPU_DAG=exact selects the exact-DAG producer with the CPU's bits).
// false in a build without CUDA.
bool cuda_default_uses_tensor_cores();

// Where a call's activations live. Device memory is the CUDA device's global memory (what
// cudaMalloc or a CUDA torch tensor gives): the call reads q, k, v and writes out there, with no
// copy through the host, and returns once out is written. The CPU device takes host memory only.
enum class Memory : std::uint8_t { host, device };
const char* memory_name(Memory m);

// One token's activations for every layer of one sequence, f32, in `memory`:
//   q, out: [n_layers][n_heads][head_dim];  k, v: [n_layers][n_kv_heads][head_dim].
struct TokenIO {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  Memory memory = Memory::host;
};

// One layer's activations, host memory: q and out [n_heads][head_dim]; k, v [n_kv_heads][head_dim].
struct LayerIO {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
};

// One layer of one sequence in one step, as the engine planned it: the append puts `position`
// at physical `slot` and leaves the plane in state `next`; `route` is what choose_route picked
// for `next` (read only when the step attends).
struct LayerStep {
  Route route = Route::splitk;
  int slot = 0;
  PlaneState next;
};

// One sequence's step: layers first_layer .. first_layer + layers.size() - 1, in order (every
// layer for a whole token; one for Engine::encode_layer). io holds those layers only, in
// TokenIO's layout. attend == false is a pure KV append (fill).
struct SequenceStep {
  int position = 0;
  // The append was planned with room for this many rows (plan_append's `rows`: the first row of
  // a prompt, Engine::fill_layer_rows); a device that prepares appends prepares it the same way.
  int reserve_rows = 1;
  bool attend = true;
  TokenIO io;
  int first_layer = 0;
  std::vector<LayerStep> layers;
};

// Counters a device may keep about how it ran steps (the CUDA device's graph cache).
struct DeviceStats {
  int captures = 0;  // step graphs captured and instantiated (a new route mix)
  int replays = 0;   // steps served by replaying a cached graph
  // With CudaEngineOptions::time_steps: calls timed, and their summed GPU time (CUDA events
  // around each call's copies and kernels on the device's stream).
  int timed_calls = 0;
  double device_us = 0.0;
};

// One sequence's planes (one per layer, PlaneConfig::for_layer) on a device. The engine owns
// the plane states; the device owns the rows.
class DeviceSequence {
 public:
  virtual ~DeviceSequence() = default;
  // Makes room for `step` (a growing plane's larger rows, allocated and filled) without
  // changing anything a plane holds: all or nothing, and a failure (out_of_memory) leaves the
  // sequence as it was. A reservation lasts until run() or release().
  virtual Status reserve(const SequenceStep& step) = 0;
  // Drops a reservation that will not run (another sequence of the call failed to reserve).
  virtual void release() = 0;
  // One layer's K (values == false) or V words copied to host memory in the storage layout of a
  // host plane in `state` (plane_strides(kind, state.capacity, n_kv_heads, head_dim)): what the
  // Python module shows of a device plane (Plane.keys) and what its tests compare with a host
  // plane's words. `out` holds state.capacity * n_kv_heads * head_dim words. Rows never stored
  // read as the dtype's NaN. A device whose rows are host memory the engine never shows has no
  // such copy (unsupported).
  virtual Status copy_rows(int layer, const PlaneState& state, bool values, std::span<KvWord> out) const {
    (void)layer, (void)state, (void)values, (void)out;
    return make_error(ErrorCode::unsupported, "this device does not copy its planes' rows to the host");
  }
};

// A device: makes sequences and runs the steps of a call. Threads: one call at a time.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual Device device() const = 0;
  virtual std::string description() const = 0;
  // A sequence whose planes are `planes` (every layer of the geometry, in order), each empty.
  virtual Result<std::unique_ptr<DeviceSequence>> create_sequence(const std::vector<PlaneConfig>& planes) = 0;
  // What a call needs besides its sequences' reservations (scratch, staging, a step graph),
  // allocated after every listed step was reserved on its sequence and before run(): all or
  // nothing, and a failure (out_of_memory, or an invalid setting) leaves every sequence as it
  // was, its reservation in place for the caller to release. run() of the same sequences and
  // steps follows a successful prepare(), with nothing in between.
  virtual Status prepare(std::span<DeviceSequence* const> sequences, std::span<const SequenceStep> steps) {
    (void)sequences, (void)steps;
    return {};
  }
  // Runs every listed step (each one reserved on its sequence and the call prepared; sequences
  // distinct): stores each layer's row at its slot and, when the step attends, runs the layer's
  // route into io.out. On success every plane is in its step's `next` state. It allocates
  // nothing that prepare() could have, so an error here is the device failing mid-call: it
  // leaves the sequences of the call in an unknown state (the engine then refuses them until
  // they are removed).
  virtual Status run(std::span<DeviceSequence* const> sequences, std::span<const SequenceStep> steps) = 0;
  virtual DeviceStats stats() const { return {}; }
  // The block partition this device's producer folds a layer of `visible` tokens by (what the
  // engine's trace records): the pinned schedule unless the device's producer has its own.
  virtual Schedule schedule(int visible) const { return pinned_schedule(visible); }

  // Whether the device reads activations in `m` (TokenIO::memory).
  virtual bool accepts(Memory m) const { return m == Memory::host; }
  // N1's counters over the inputs, for a device that counts them itself while it runs
  // (counts_inputs() true): what the range rule did to every q (when the step attends), k and v
  // value of the last successful run(). Otherwise the engine counts host inputs.
  virtual bool counts_inputs() const { return false; }
  virtual RangeStats last_run_counts() const { return {}; }
  // N1's opt-in check over activations the engine cannot read (device memory), before anything
  // is stored: ok when every q (when attending), k and v value of `step` is finite, else
  // non_finite naming the layer and the array. Devices that accept only host memory are never
  // asked.
  virtual Status check_finite_inputs(const SequenceStep& step) {
    (void)step;
    return make_error(ErrorCode::unsupported, "this device cannot check activations in device memory");
  }
};

}  // namespace ladder
