// ladder._ladder.Engine: the library's one engine (ladder/engine.hpp) for Python, called one
// layer at a time as a model's attention runs (encode_layer / fill_layer). Arrays are taken in
// place in float32, float16 or bfloat16 (tensors.hpp); a CUDA engine reads CUDA tensors where
// they are (TokenIO in device memory), after the caller's stream has written them.
//
// Shapes at the boundary (B = the sequences of the call):
//   encode_layer: q, out (B, n_heads, head_dim); k, v (B, n_kv_heads, head_dim)
//   fill_rows:    k, v   (rows, n_kv_heads, head_dim), one sequence, one layer
//   fill_batch:   k, v   (sum of counts, n_kv_heads, head_dim): the sequences' rows one after
//                 another, counts[i] rows for ids[i]
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "ladder/engine.hpp"

namespace ladder::py {

// Threads: every call holds the handle's lock (GilSafeLock, planes.hpp), so calls on one engine
// from several Python threads are serialized, as the engine requires (one thread at a time);
// encode_layer and fill_rows keep it while they compute with the GIL released.
class EngineHandle {
 public:
  EngineHandle(const Geometry& g, const std::string& device, nanobind::handle initial_growing_capacity);
  Where where() const { return where_; }
  RangeStats range_stats() const;
  std::string description() const;

  // A new sequence; ids are never reused. The engine's own first sequence (id 0) is removed at
  // creation, so every sequence of this handle comes from add_sequence (the first is 1).
  std::int64_t add_sequence();
  void remove_sequence(nanobind::handle id);
  std::vector<std::int64_t> sequences() const;
  // The next position layer `layer` of sequence `id` accepts (its plane's next_position).
  int next_position(nanobind::handle id, nanobind::handle layer) const;
  PlaneState state(nanobind::handle id, nanobind::handle layer) const;

  // One token of layer `layer` for every sequence in `ids` (distinct), each at its layer's next
  // position: appended and attended (the ladder's route), out written. All or nothing.
  void encode_layer(nanobind::handle layer, nanobind::handle ids, nanobind::handle q, nanobind::handle k,
                    nanobind::handle v, nanobind::handle out, std::uintptr_t stream);
  // A prompt's rows of one layer appended at the sequence's next positions without attention;
  // returns each row's slot. One Engine::fill_layer_rows call: every argument, the position
  // range, N1's opt-in check of every row and a growing plane's growth for all the rows are
  // settled before the first row, so a refusal or an out_of_memory changes nothing (a device
  // failure while the rows run leaves the sequences refused until removed, the engine's rule).
  std::vector<int> fill_rows(nanobind::handle layer, nanobind::handle id, nanobind::handle k, nanobind::handle v,
                             std::uintptr_t stream);
  // The prompts of several distinct sequences at once (a batch's prefill); returns each
  // sequence's slots.
  std::vector<std::vector<int>> fill_batch(nanobind::handle layer, nanobind::handle ids, nanobind::handle counts,
                                           nanobind::handle k, nanobind::handle v, std::uintptr_t stream);

 private:
  // `id` as one of `known` (the engine's sequences, read once per call).
  static SequenceId sequence_arg(nanobind::handle id, const std::vector<SequenceId>& known);
  SequenceId sequence_arg(nanobind::handle id) const { return sequence_arg(id, engine_->sequences()); }
  int layer_arg(nanobind::handle layer) const;
  // fill_rows and fill_batch, with the lock held and the sequence and layer checked.
  std::vector<std::vector<int>> fill_unlocked(int layer, const std::vector<SequenceId>& ids,
                                              const std::vector<std::int64_t>& counts, const ArrayInfo& k,
                                              const ArrayInfo& v, std::uintptr_t stream);
  PlaneState state_unlocked(nanobind::handle id, nanobind::handle layer) const;
  mutable std::mutex lock_;
  std::unique_ptr<Engine> engine_;
  Where where_ = Where::cpu;
};

}  // namespace ladder::py
