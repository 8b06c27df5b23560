// The one decode engine (E1/E3) for every device: sequences, the per-call plan (plan_append and
// choose_route once per (sequence, layer)), the trace, N1's check and counters, and the
// all-or-nothing commit. The device (device_api.hpp) only stores rows and runs the routes.
#include "ladder/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <new>
#include <utility>

#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/cuda/cuda_backend.hpp"
#include "ladder/fault_injection.hpp"

namespace ladder {

const char* device_name(Device d) {
  switch (d) {
    case Device::cpu: return "cpu";
    case Device::cuda: return "cuda";
  }
  return "?";
}

const char* memory_name(Memory m) {
  switch (m) {
    case Memory::host: return "host";
    case Memory::device: return "device";
  }
  return "?";
}

Status Engine::encode_token(int position, const TokenIO& io) {
  const SequenceToken t{0, position, io};
  return encode(std::span<const SequenceToken>(&t, 1));
}

Status Engine::fill_token(int position, const TokenIO& io) {
  const SequenceToken t{0, position, io};
  return fill(std::span<const SequenceToken>(&t, 1));
}

namespace {

Status bad(std::string m) { return make_error(ErrorCode::invalid_argument, std::move(m)); }

Status in_sequence(SequenceId id, const Status& st) {
  return make_error(st.code(), fmt::format("sequence {}: {}", id, st.message()));
}

Status in_layer(SequenceId id, int layer, const Status& st) {
  return make_error(st.code(), fmt::format("sequence {}, layer {}: {}", id, layer, st.message()));
}

// The layers one call covers: all of them (a whole token) or one (encode_layer).
struct LayerSpan {
  int first = 0;
  int count = 0;
};

// N1's opt-in check over one token of one sequence (TokenIO layout, the call's layers): q when
// the call attends.
Status check_token_finite(const Geometry& g, const TokenIO& io, bool with_q, LayerSpan layers) {
  const std::size_t q_layer = g.q_floats_per_layer();
  const std::size_t kv_layer = g.kv_floats_per_layer();
  for (int i = 0; i < layers.count; ++i) {
    const int layer = layers.first + i;
    const std::size_t l = static_cast<std::size_t>(i);
    Status s = with_q ? check_finite("q", io.q + l * q_layer, q_layer) : Status{};
    if (s.ok()) s = check_finite("k", io.k + l * kv_layer, kv_layer);
    if (s.ok()) s = check_finite("v", io.v + l * kv_layer, kv_layer);
    if (!s.ok()) return make_error(s.code(), fmt::format("layer {}: {}", layer, s.message()));
  }
  return {};
}

struct Sequence {
  std::unique_ptr<DeviceSequence> planes;
  std::vector<PlaneState> states;  // one per layer: the engine's record, committed after a run
  std::string broken;              // why the sequence is refused (a device failure), or ""
};

class DecodeEngine final : public Engine {
 public:
  DecodeEngine(const Geometry& g, const EngineOptions& opt, std::unique_ptr<DeviceBackend> dev)
      : g_(g), opt_(opt), sw_(opt.switches.with_env()), check_finite_(opt.check_finite || check_finite_from_env()),
        dev_(std::move(dev)) {
    for (int l = 0; l < g_.n_layers; ++l)
      cfgs_.push_back(PlaneConfig::for_layer(g_, g_.layer_class(l), opt_.initial_growing_capacity));
  }

  Status init() {
    for (const PlaneConfig& c : cfgs_) LADDER_TRY(c.validate());
    Result<SequenceId> first = add_sequence();
    return first ? Status{} : first.status();
  }

  Result<SequenceId> add_sequence() override {
    Result<std::unique_ptr<DeviceSequence>> planes = dev_->create_sequence(cfgs_);
    if (!planes) return planes.status();
    Sequence s;
    s.planes = std::move(planes).value();
    s.states.resize(cfgs_.size());
    for (std::size_t l = 0; l < cfgs_.size(); ++l) s.states[l].capacity = cfgs_[l].capacity;
    try {
      seqs_.emplace(next_id_, std::move(s));
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::out_of_memory, "cannot record a new sequence");
    }
    return next_id_++;
  }

  Status remove_sequence(SequenceId id) override {
    if (seqs_.erase(id) == 0) return bad(fmt::format("remove_sequence: no sequence {} in this engine", id));
    return {};
  }

  std::vector<SequenceId> sequences() const override {
    std::vector<SequenceId> ids;
    for (const auto& [id, s] : seqs_) ids.push_back(id);
    return ids;
  }

  Status encode(std::span<const SequenceToken> batch) override { return step(batch, true, all_layers()); }
  Status fill(std::span<const SequenceToken> batch) override { return step(batch, false, all_layers()); }
  Status encode_layer(int layer, std::span<const SequenceToken> batch) override {
    LADDER_TRY(check_layer_index(layer));
    return step(batch, true, LayerSpan{layer, 1});
  }
  Status fill_layer(int layer, std::span<const SequenceToken> batch) override {
    LADDER_TRY(check_layer_index(layer));
    return step(batch, false, LayerSpan{layer, 1});
  }
  Status fill_layer_rows(int layer, std::span<const SequenceRows> batch) override {
    LADDER_TRY(check_layer_index(layer));
    if (batch.empty()) return bad("a call needs at least one sequence");
    const std::size_t l = static_cast<std::size_t>(layer);
    const std::size_t kvn = g_.kv_floats_per_layer();
    int deepest = 0;
    for (const SequenceRows& s : batch) {
      if (s.count < 0) return in_sequence(s.sequence, bad(fmt::format("a row count must be >= 0, got {}", s.count)));
      deepest = std::max(deepest, s.count);
    }
    // Row r of every sequence that has one is one call (depth r); the first depth reserves each
    // sequence's growth for all its rows. Built once, from the positions checked on copies of the
    // states (and so the max context).
    struct Depth {
      std::vector<SequenceToken> call;
      std::vector<int> reserve;
      std::vector<std::size_t> owner;  // batch index of each token
    };
    std::vector<Depth> depths(static_cast<std::size_t>(deepest));
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const SequenceRows& s = batch[i];
      const auto it = seqs_.find(s.sequence);
      if (it == seqs_.end()) return bad(fmt::format("no sequence {} in this engine", s.sequence));
      PlaneState st = it->second.states[l];
      const int first = st.next_position;
      for (int r = 0; r < s.count; ++r) {
        const int room = r == 0 ? s.count : 1;
        Result<AppendPlan> p = plan_append(cfgs_[l], st, first + r, room);
        if (!p) return in_layer(s.sequence, layer, p.status());
        st = p->next;
        const std::size_t o = static_cast<std::size_t>(r) * kvn;
        const TokenIO io{nullptr, s.k == nullptr ? nullptr : s.k + o, s.v == nullptr ? nullptr : s.v + o, nullptr,
                         s.memory};
        Depth& d = depths[static_cast<std::size_t>(r)];
        d.call.push_back(SequenceToken{s.sequence, first + r, io});
        d.reserve.push_back(room);
        d.owner.push_back(i);
      }
    }
    // Every depth checked before the first row: the call (ids, arrays) and N1's inputs.
    const LayerSpan one{layer, 1};
    for (const Depth& d : depths) {
      LADDER_TRY(check_call(d.call, false));
      LADDER_TRY(check_inputs(d.call, false, one));
    }
    // Then the rows (all or nothing at the first depth, as any call; the later ones cannot run
    // out of memory).
    for (std::size_t r = 0; r < depths.size(); ++r) {
      const Depth& d = depths[r];
      LADDER_TRY(step(d.call, false, one, d.reserve, true));
      for (std::size_t j = 0; j < d.call.size(); ++j)
        if (int* slots = batch[d.owner[j]].slots; slots != nullptr)
          slots[r] = seqs_.at(d.call[j].sequence).states[l].physical(d.call[j].position);
    }
    return {};
  }

  const Geometry& geometry() const override { return g_; }
  Device device() const override { return dev_->device(); }
  std::string device_description() const override { return dev_->description(); }
  PlaneState plane_state(SequenceId id, int layer) const override {
    const auto it = seqs_.find(id);
    if (it == seqs_.end() || layer < 0 || layer >= g_.n_layers) return {};
    return it->second.states[static_cast<std::size_t>(layer)];
  }
  RangeStats range_stats() const override { return range_; }
  const std::vector<TraceEntry>& trace() const override { return trace_; }
  void clear_trace() override { trace_.clear(); }
  DeviceStats device_stats() const override { return dev_->stats(); }

 private:
  LayerSpan all_layers() const { return LayerSpan{0, g_.n_layers}; }
  Status check_layer_index(int layer) const {
    if (layer < 0 || layer >= g_.n_layers)
      return make_error(ErrorCode::out_of_range, fmt::format("layer {} outside 0..{}", layer, g_.n_layers - 1));
    return {};
  }

  // Everything a call is checked against before any plane is planned (then check_inputs, N1).
  Status check_call(std::span<const SequenceToken> batch, bool attend) const {
    if (batch.empty()) return bad("a call needs at least one sequence");
    std::vector<SequenceId> ids;
    const Memory memory = batch.front().io.memory;
    if (!dev_->accepts(memory))
      return bad(fmt::format("TokenIO in {} memory: the {} device does not read it", memory_name(memory),
                             device_name(dev_->device())));
    for (const SequenceToken& t : batch) {
      const auto it = seqs_.find(t.sequence);
      if (it == seqs_.end()) return bad(fmt::format("no sequence {} in this engine", t.sequence));
      if (!it->second.broken.empty())
        return make_error(ErrorCode::device_error,
                          fmt::format("sequence {} is unusable after a failed step ({}); remove it", t.sequence,
                                      it->second.broken));
      if (t.io.k == nullptr || t.io.v == nullptr)
        return in_sequence(t.sequence, bad("TokenIO: k and v must be non-null"));
      if (attend && (t.io.q == nullptr || t.io.out == nullptr))
        return in_sequence(t.sequence, bad("TokenIO: encode needs non-null q and out"));
      if (t.io.memory != memory)
        return in_sequence(t.sequence, bad(fmt::format("TokenIO in {} memory, another sequence of the call in {}: "
                                                       "one call's activations live in one kind of memory",
                                                       memory_name(t.io.memory), memory_name(memory))));
      ids.push_back(t.sequence);
    }
    std::sort(ids.begin(), ids.end());
    if (std::adjacent_find(ids.begin(), ids.end()) != ids.end())
      return bad("a call lists a sequence twice; one token per sequence per call");
    return {};
  }

  // N1's opt-in check over a checked call's activations, before any row is stored: the engine
  // reads host memory itself; the device reads device memory (DeviceBackend::check_finite_inputs).
  Status check_inputs(std::span<const SequenceToken> batch, bool attend, LayerSpan layers) const {
    if (!check_finite_) return {};
    for (const SequenceToken& t : batch) {
      Status fin;
      if (t.io.memory == Memory::host) {
        fin = check_token_finite(g_, t.io, attend, layers);
      } else {
        SequenceStep token;
        token.position = t.position;
        token.attend = attend;
        token.io = t.io;
        token.first_layer = layers.first;
        token.layers.resize(static_cast<std::size_t>(layers.count));
        fin = dev_->check_finite_inputs(token);
      }
      if (!fin.ok()) return in_sequence(t.sequence, fin);
    }
    return {};
  }

  // One sequence's plan: each of the call's layers' append and, when attending, its route (the
  // whole decision, predicates included, in `decisions` for the trace).
  // reserve_rows: plan_append's room for a prompt's rows (fill_layer_rows' first row).
  Status plan(const SequenceToken& t, bool attend, LayerSpan layers, SequenceStep& out,
              std::vector<RouteDecision>& decisions, int reserve_rows = 1) const {
    const Sequence& s = seqs_.at(t.sequence);
    out.position = t.position;
    out.reserve_rows = reserve_rows;
    out.attend = attend;
    out.io = t.io;
    out.first_layer = layers.first;
    out.layers.resize(static_cast<std::size_t>(layers.count));
    decisions.assign(out.layers.size(), RouteDecision{});
    for (std::size_t i = 0; i < out.layers.size(); ++i) {
      const int layer = layers.first + static_cast<int>(i);
      const std::size_t l = static_cast<std::size_t>(layer);
      Result<AppendPlan> p = plan_append(cfgs_[l], s.states[l], t.position, reserve_rows);
      if (!p) return in_layer(t.sequence, layer, p.status());
      LayerStep& ls = out.layers[i];
      ls.slot = p->slot;
      ls.next = p->next;
      if (attend) {
        decisions[i] = choose_route(g_.layer_class(layer), ls.next, opt_.caps, sw_);
        ls.route = decisions[i].route;
        // choose_route never picks what the admissibility rule refuses; a refusal is a bug.
        const Status admissible = check_route(ls.route, cfgs_[l], ls.next);
        if (!admissible.ok()) return in_layer(t.sequence, layer, make_error(ErrorCode::internal, admissible.message()));
      }
    }
    return {};
  }

  // reserve_rows: per token of `batch`, plan_append's room (empty: 1 each). checked: the call and
  // its inputs were checked already (fill_layer_rows checks every depth before the first).
  Status step(std::span<const SequenceToken> batch, bool attend, LayerSpan layers,
              std::span<const int> reserve_rows = {}, bool checked = false) {
    if (!checked) {
      LADDER_TRY(check_call(batch, attend));
      LADDER_TRY(check_inputs(batch, attend, layers));
    }
    std::vector<SequenceStep> steps(batch.size());
    std::vector<std::vector<RouteDecision>> decisions(batch.size());
    std::vector<DeviceSequence*> devs(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      LADDER_TRY(plan(batch[i], attend, layers, steps[i], decisions[i], reserve_rows.empty() ? 1 : reserve_rows[i]));
      devs[i] = seqs_.at(batch[i].sequence).planes.get();
    }
    // Room for this call's trace first: a trace that cannot grow refuses the call up front.
    if (attend && opt_.record_trace) {
      try {
        if (detail::injected_allocation_failure()) throw std::bad_alloc();
        trace_.reserve(trace_.size() + batch.size() * static_cast<std::size_t>(layers.count));
      } catch (const std::bad_alloc&) {
        return make_error(ErrorCode::out_of_memory, "cannot grow the trace");
      }
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const Status r = devs[i]->reserve(steps[i]);
      if (!r.ok()) {
        for (std::size_t j = 0; j < i; ++j) devs[j]->release();
        return in_sequence(batch[i].sequence, r);
      }
    }
    // The call's own resources next (scratch, staging, graphs): a failure here has stored
    // nothing either, so every sequence stays as it was and usable.
    const Status prepared = dev_->prepare(devs, steps);
    if (!prepared.ok()) {
      for (DeviceSequence* d : devs) d->release();
      return prepared;
    }
    const Status ran = dev_->run(devs, steps);
    if (!ran.ok()) {
      for (const SequenceToken& t : batch) seqs_.at(t.sequence).broken = ran.message();
      return ran;
    }
    for (std::size_t i = 0; i < batch.size(); ++i) commit(batch[i].sequence, steps[i], decisions[i]);
    if (dev_->counts_inputs()) range_ += dev_->last_run_counts();
    return {};
  }

  // Cannot fail: the trace's room was reserved before the run.
  void commit(SequenceId id, const SequenceStep& st, const std::vector<RouteDecision>& decisions) {
    Sequence& s = seqs_.at(id);
    for (std::size_t i = 0; i < st.layers.size(); ++i) {
      const int layer = st.first_layer + static_cast<int>(i);
      s.states[static_cast<std::size_t>(layer)] = st.layers[i].next;
      if (!st.attend || !opt_.record_trace) continue;
      TraceEntry e;
      e.sequence = id;
      e.position = st.position;
      e.layer = layer;
      e.cls = g_.layer_class(e.layer);
      e.decision = decisions[i];
      e.state = st.layers[i].next;
      e.visible = g_.visible(e.cls, st.position);
      e.schedule = dev_->schedule(e.visible);
      trace_.push_back(e);
    }
    if (dev_->counts_inputs()) return;  // the device counted what it read (step() adds it)
    const std::size_t n = st.layers.size();
    if (st.attend) count_range(st.io.q, n * g_.q_floats_per_layer(), range_, g_.kv_dtype);
    count_range(st.io.k, n * g_.kv_floats_per_layer(), range_, g_.kv_dtype);
    count_range(st.io.v, n * g_.kv_floats_per_layer(), range_, g_.kv_dtype);
  }

  Geometry g_;
  EngineOptions opt_;
  Switches sw_;
  bool check_finite_ = false;
  std::unique_ptr<DeviceBackend> dev_;
  std::vector<PlaneConfig> cfgs_;
  std::map<SequenceId, Sequence> seqs_;
  SequenceId next_id_ = 0;
  std::vector<TraceEntry> trace_;
  RangeStats range_;
};

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const Geometry& g, const EngineOptions& opt,
                                               std::unique_ptr<DeviceBackend> device) {
  LADDER_TRY(g.validate());
  if (opt.initial_growing_capacity < 0)
    return bad("initial_growing_capacity must be >= 0 (0 picks the default)");
  if (device == nullptr) return bad("Engine::create needs a device");
  auto e = std::make_unique<DecodeEngine>(g, opt, std::move(device));
  LADDER_TRY(e->init());
  return std::unique_ptr<Engine>(std::move(e));
}

Result<std::unique_ptr<Engine>> Engine::create(const Geometry& g, const EngineOptions& opt) {
  LADDER_TRY(g.validate());
  Result<std::unique_ptr<DeviceBackend>> dev = make_error(ErrorCode::invalid_argument, "unknown device");
  switch (opt.device) {
    case Device::cpu: dev = cpu::create_backend(g); break;
    case Device::cuda: dev = cuda::create_backend(g, cuda::default_engine_options()); break;
  }
  if (!dev) return dev.status();
  return create(g, opt, std::move(dev).value());
}

}  // namespace ladder
