#include "engine_calls.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "device_convert.hpp"
#include "integers.hpp"
#include "planes.hpp"
#include "tensors.hpp"

namespace nb = nanobind;

namespace ladder::py {

namespace {

Where engine_where(const std::string& device) {
  if (device == "cpu") return Where::cpu;
  if (device == "cuda" || device.rfind("cuda:", 0) == 0) return Where::cuda;
  raise(error_types().invalid_argument, fmt::format("device must be 'cpu' or 'cuda', got '{}'", device));
}

// The caller's arrays must live where the engine's planes do: the CUDA engine reads CUDA
// tensors in place and the CPU engine host arrays; nothing is copied between the two.
void check_same_side(Where engine, const ArrayInfo& a, const char* name) {
  const Where at = where_of(a, name);
  if (at == engine) return;
  raise(error_types().device_mismatch,
        engine == Where::cuda
            ? fmt::format("{} is a host array but the engine's planes are on the GPU: pass CUDA tensors", name)
            : fmt::format("{} is a CUDA tensor but the engine's planes are in host memory: create the engine "
                          "with device='cuda'",
                          name));
}

}  // namespace

EngineHandle::EngineHandle(const Geometry& g, const std::string& device, nb::handle initial_growing_capacity) {
  where_ = engine_where(device);
  EngineOptions opt;
  opt.device = where_ == Where::cuda ? Device::cuda : Device::cpu;
  opt.initial_growing_capacity =
      int_arg(initial_growing_capacity, "initial_growing_capacity", error_types().invalid_argument);
  Result<std::unique_ptr<Engine>> made = Engine::create(g, opt);
  if (!made) check(made.status());
  engine_ = std::move(made).value();
  check(engine_->remove_sequence(0));
}

std::int64_t EngineHandle::add_sequence() {
  const GilSafeLock held(lock_);
  Result<SequenceId> id = engine_->add_sequence();
  if (!id) check(id.status());
  return *id;
}

SequenceId EngineHandle::sequence_arg(nb::handle id, const std::vector<SequenceId>& known) {
  std::int64_t v = 0;
  if (!nb::try_cast(id, v)) raise(error_types().invalid_argument, "a sequence id must be an integer");
  if (!std::binary_search(known.begin(), known.end(), v))
    raise(error_types().invalid_argument, fmt::format("sequence {} is not in this engine", v));
  return v;
}

int EngineHandle::layer_arg(nb::handle layer) const {
  const int l = int_arg(layer, "layer", error_types().invalid_argument);
  if (l < 0 || l >= engine_->geometry().n_layers)
    raise(error_types().invalid_argument,
          fmt::format("layer {} does not exist (0..{})", l, engine_->geometry().n_layers - 1));
  return l;
}

void EngineHandle::remove_sequence(nb::handle id) {
  const GilSafeLock held(lock_);
  check(engine_->remove_sequence(sequence_arg(id)));
}

std::vector<std::int64_t> EngineHandle::sequences() const {
  const GilSafeLock held(lock_);
  return engine_->sequences();
}

PlaneState EngineHandle::state_unlocked(nb::handle id, nb::handle layer) const {
  return engine_->plane_state(sequence_arg(id), layer_arg(layer));
}

PlaneState EngineHandle::state(nb::handle id, nb::handle layer) const {
  const GilSafeLock held(lock_);
  return state_unlocked(id, layer);
}

int EngineHandle::next_position(nb::handle id, nb::handle layer) const {
  const GilSafeLock held(lock_);
  return state_unlocked(id, layer).next_position;
}

RangeStats EngineHandle::range_stats() const {
  const GilSafeLock held(lock_);
  return engine_->range_stats();
}

std::string EngineHandle::description() const {
  const GilSafeLock held(lock_);
  return engine_->device_description();
}

void EngineHandle::encode_layer(nb::handle layer_arg_h, nb::handle ids_arg, nb::handle q_arg, nb::handle k_arg,
                                nb::handle v_arg, nb::handle out_arg, std::uintptr_t stream) {
  const GilSafeLock held(lock_);
  const int layer = layer_arg(layer_arg_h);
  const std::vector<SequenceId> known = engine_->sequences();  // increasing
  std::vector<SequenceId> ids;
  for (nb::handle h : ids_arg) ids.push_back(sequence_arg(h, known));
  if (ids.empty()) raise(error_types().invalid_argument, "encode_layer needs at least one sequence");
  const Geometry& g = engine_->geometry();
  const ArrayInfo q = in_array(q_arg, "q"), k = in_array(k_arg, "k"), v = in_array(v_arg, "v"),
                  out = out_array(out_arg, "out");
  for (const auto& [a, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}})
    check_same_side(where_, *a, name);
  const std::int64_t b = static_cast<std::int64_t>(ids.size());
  const std::vector<Dim> q_dims{{b, "sequences"}, {g.n_heads, "n_heads"}, {g.head_dim, "head_dim"}};
  const std::vector<Dim> kv_dims{{b, "sequences"}, {g.n_kv_heads, "n_kv_heads"}, {g.head_dim, "head_dim"}};
  // Every check before any conversion; the conversions before the engine's own checks, which
  // leave every plane untouched when they refuse.
  F32In qf(q, "q", q_dims, where_), kf(k, "k", kv_dims, where_), vf(v, "v", kv_dims, where_);
  F32Out of(out, "out", q_dims, where_);
  const std::size_t qn = g.q_floats_per_layer();
  const std::size_t kvn = g.kv_floats_per_layer();
  const float* qd = qf.data(stream);
  const float* kd = kf.data(stream);
  const float* vd = vf.data(stream);
  float* od = of.data(stream);
  std::vector<SequenceToken> call;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    TokenIO io{qd + i * qn, kd + i * kvn, vd + i * kvn, od + i * qn,
               where_ == Where::cuda ? Memory::device : Memory::host};
    call.push_back({ids[i], engine_->plane_state(ids[i], layer).next_position, io});
  }
  Status s;
  {
    nb::gil_scoped_release unlocked;
    if (where_ == Where::cuda) sync_stream(stream);
    s = engine_->encode_layer(layer, call);
  }
  check(s);
  of.finish(stream);
}

std::vector<int> EngineHandle::fill_rows(nb::handle layer_arg_h, nb::handle id_arg, nb::handle k_arg,
                                         nb::handle v_arg, std::uintptr_t stream) {
  const GilSafeLock held(lock_);
  const SequenceId id = sequence_arg(id_arg);
  const ArrayInfo k = in_array(k_arg, "k");
  const std::int64_t rows = k.shape.empty() ? -1 : k.shape[0];  // shape errors are fill_unlocked's
  return fill_unlocked(layer_arg(layer_arg_h), {id}, {rows}, k, in_array(v_arg, "v"), stream).front();
}

std::vector<std::vector<int>> EngineHandle::fill_batch(nb::handle layer_arg_h, nb::handle ids_arg,
                                                       nb::handle counts_arg, nb::handle k_arg, nb::handle v_arg,
                                                       std::uintptr_t stream) {
  const GilSafeLock held(lock_);
  const int layer = layer_arg(layer_arg_h);
  const std::vector<SequenceId> known = engine_->sequences();  // increasing
  std::vector<SequenceId> ids;
  for (nb::handle h : ids_arg) ids.push_back(sequence_arg(h, known));
  std::vector<std::int64_t> counts;
  for (nb::handle h : counts_arg) counts.push_back(int_arg(h, "a row count", error_types().invalid_argument));
  return fill_unlocked(layer, ids, counts, in_array(k_arg, "k"), in_array(v_arg, "v"), stream);
}

std::vector<std::vector<int>> EngineHandle::fill_unlocked(int layer, const std::vector<SequenceId>& ids,
                                                          const std::vector<std::int64_t>& counts, const ArrayInfo& k,
                                                          const ArrayInfo& v, std::uintptr_t stream) {
  const Geometry& g = engine_->geometry();
  if (ids.empty()) raise(error_types().invalid_argument, "a fill needs at least one sequence");
  if (counts.size() != ids.size())
    raise(error_types().invalid_argument,
          fmt::format("{} row counts for {} sequences: one count per sequence", counts.size(), ids.size()));
  check_same_side(where_, k, "k");
  check_same_side(where_, v, "v");
  if (k.shape.size() != 3)
    raise(error_types().shape, fmt::format("k must have shape (rows, {}, {}) = (rows, n_kv_heads, head_dim), got {}",
                                           g.n_kv_heads, g.head_dim, shape_of(k)));
  std::int64_t total = 0;
  std::vector<int> first(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (counts[i] < 0)
      raise(error_types().invalid_argument, fmt::format("sequence {}: a row count must be >= 0, got {}", ids[i], counts[i]));
    first[i] = engine_->plane_state(ids[i], layer).next_position;
    if (counts[i] > 0 && static_cast<std::int64_t>(first[i]) + counts[i] > g.max_context)
      raise(error_types().position,
            fmt::format("sequence {}: {} rows from position {} pass the max context {}: nothing was written", ids[i],
                        counts[i], first[i], g.max_context));
    total += counts[i];
  }
  const std::vector<Dim> dims{{total, "rows (the sum of the counts)"}, {g.n_kv_heads, "n_kv_heads"},
                              {g.head_dim, "head_dim"}};
  F32In kf(k, "k", dims, where_), vf(v, "v", dims, where_);
  const std::size_t kvn = g.kv_floats_per_layer();
  const float* kd = kf.data(stream);
  const float* vd = vf.data(stream);
  // Sequence i's rows start at row offset[i] of k and v (the sequences' rows one after another).
  std::vector<std::vector<int>> slots(ids.size());
  std::vector<SequenceRows> rows(ids.size());
  const Memory memory = where_ == Where::cuda ? Memory::device : Memory::host;
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    slots[i].resize(static_cast<std::size_t>(counts[i]));
    const std::size_t o = static_cast<std::size_t>(offset) * kvn;
    rows[i] = SequenceRows{ids[i], static_cast<int>(counts[i]), kd + o, vd + o, memory, slots[i].data()};
    offset += counts[i];
  }
  Status s;
  {
    nb::gil_scoped_release unlocked;
    if (where_ == Where::cuda && total > 0) sync_stream(stream);
    // One engine call: every row's position, N1's check and a growing plane's growth for all
    // the rows are settled before the first row (Engine::fill_layer_rows), so a refused or
    // out-of-memory prefill changes nothing. Each slot is the row's while it is held (a ring may
    // overwrite it with a later row of the prompt).
    s = engine_->fill_layer_rows(layer, rows);
  }
  check(s);
  return slots;
}

}  // namespace ladder::py
