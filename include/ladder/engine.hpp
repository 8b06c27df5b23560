// E1/E3: the decode engine, one for every device. It holds sequences (each one plane per layer
// on the chosen device, its own positions and lengths); one call decodes one token for a chosen
// set of them. Per call it plans every (sequence, layer) append with core's plan_append, asks
// choose_route once per (sequence, layer), records the trace, and hands the plan to the device
// (device_api.hpp). An engine starts with one sequence, id 0, which the single-sequence calls
// (encode_token, fill_token, plane_state(layer)) act on.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ladder/device_api.hpp"
#include "ladder/errors.hpp"
#include "ladder/geometry.hpp"
#include "ladder/ladder.hpp"
#include "ladder/nonfinite.hpp"

namespace ladder {

struct EngineOptions {
  Device device = Device::cpu;
  Capabilities caps;
  Switches switches;
  bool record_trace = false;
  // Initial capacity of the growing (NoPE) planes; 0 picks a default. On the CPU they double
  // when full. On the GPU a sequence's growing planes are allocated up front at the most rows
  // they can reach (Geometry::max_context, or this capacity if larger), so no device copy runs
  // when a state grows: size max_context to the context served (Muse Glimmer's 13 growing layers
  // at 131,072 positions hold 1.7 GB of device memory per sequence).
  int initial_growing_capacity = 0;
  // N1's opt-in check (also LADDER_CHECK_FINITE=1): a token with a NaN or Inf anywhere in its
  // q, k or v is refused with ErrorCode::non_finite before any plane is touched. Off, such a
  // value follows the range rule (nonfinite.hpp) and propagates to the outputs it reaches.
  bool check_finite = false;
};

// A sequence of an engine. Ids are never reused within an engine.
using SequenceId = std::int64_t;

// One sequence's token in a batched call.
struct SequenceToken {
  SequenceId sequence = 0;
  int position = 0;
  TokenIO io;
};

// One sequence's prompt rows at one layer (Engine::fill_layer_rows): `count` consecutive
// positions from the sequence's next one; k and v [count][n_kv_heads][head_dim] f32 in `memory`.
// `slots`, when not null, receives each row's physical slot (count ints) on success.
struct SequenceRows {
  SequenceId sequence = 0;
  int count = 0;
  const float* k = nullptr;
  const float* v = nullptr;
  Memory memory = Memory::host;
  int* slots = nullptr;
};

// Threads (docs/threads.md): one thread at a time per engine; no member is synchronised, and
// trace()'s reference changes with the next encode_token or clear_trace. Different engines may
// be driven from different threads (CPU engines share the process-wide worker pool).
class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const Geometry& g, const EngineOptions& opt);
  // The same on a device made by the caller (the CUDA device with its own options, a test's
  // device that injects failures).
  static Result<std::unique_ptr<Engine>> create(const Geometry& g, const EngineOptions& opt,
                                                std::unique_ptr<DeviceBackend> device);
  virtual ~Engine() = default;

  // E3: sequences are added and removed between calls. A new sequence's planes are empty
  // (its first position is 0); out_of_memory leaves the engine as it was.
  virtual Result<SequenceId> add_sequence() = 0;
  virtual Status remove_sequence(SequenceId id) = 0;
  virtual std::vector<SequenceId> sequences() const = 0;  // in increasing order

  // One token for every listed sequence (distinct ids, any order, any subset): appends each
  // sequence's position to every layer's plane and computes every layer's attention output.
  // All or nothing: every (sequence, layer) append is planned and its rows reserved before any
  // is committed, so a refused position for one sequence or an allocation failure while a plane
  // grows leaves every sequence's planes exactly as they were. A device failure while running
  // leaves the call's sequences unusable (they are refused until removed); the others are kept.
  // A sequence's output bits do not depend on which other sequences share the call (P4).
  virtual Status encode(std::span<const SequenceToken> batch) = 0;
  // The same as a pure KV append (io.q and io.out ignored): no attention, no trace.
  virtual Status fill(std::span<const SequenceToken> batch) = 0;

  // One layer of one token for every listed sequence: what a model that runs its layers in turn
  // needs (an attention backend called once per layer). io holds that layer only: q and out
  // [n_heads][head_dim], k and v [n_kv_heads][head_dim]. Each layer's plane keeps its own next
  // position, so a token is whole once every layer has had it; encode() and encode_layer() may
  // be mixed as long as each layer sees positions in order. The same all-or-nothing rule, trace
  // and counters as encode().
  virtual Status encode_layer(int layer, std::span<const SequenceToken> batch) = 0;
  // The same as a pure KV append of one layer (a prompt's rows, without attention).
  virtual Status fill_layer(int layer, std::span<const SequenceToken> batch) = 0;
  // A prompt's rows, several per sequence, at one layer: the same appends as count fill_layer
  // calls, but all or nothing for everything that can be known before the first row: every row's
  // position, N1's opt-in check over every row, and a growing plane's growth for all the rows
  // (reserved at the first row, to the capacity the last row reaches) — a refusal or an
  // out-of-memory there leaves every plane exactly as it was. A device failure while the rows
  // run leaves the call's sequences unusable, as for encode(). Row r of every sequence goes in
  // one device call.
  virtual Status fill_layer_rows(int layer, std::span<const SequenceRows> batch) = 0;

  // Sequence 0's forms of encode and fill. Positions must arrive in order from 0; a refused
  // position leaves every plane untouched.
  Status encode_token(int position, const TokenIO& io);
  // A pure KV append brings the planes to a depth quickly (the demo and benchmarks start
  // decoding at depth 2048+ without teacher-forcing every earlier token through attention).
  // The planes end exactly as encode_token would leave them.
  Status fill_token(int position, const TokenIO& io);

  virtual const Geometry& geometry() const = 0;
  virtual Device device() const = 0;
  virtual std::string device_description() const = 0;
  // A plane's state; a zero state for an unknown sequence or layer.
  virtual PlaneState plane_state(SequenceId id, int layer) const = 0;
  PlaneState plane_state(int layer) const { return plane_state(0, layer); }
  // N1's counters over every token since creation: values saturated to +-65504 and NaN/Inf
  // values read (nonfinite.hpp), summed over all sequences and layers' q, k and v.
  virtual RangeStats range_stats() const = 0;
  // Trace of every (token, sequence, layer) since creation (when record_trace) — R4.
  virtual const std::vector<TraceEntry>& trace() const = 0;
  virtual void clear_trace() = 0;
  // The device's own counters (the CUDA device's graph cache).
  virtual DeviceStats device_stats() const = 0;
};

}  // namespace ladder
