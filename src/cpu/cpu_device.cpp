// The CPU device behind the engine (device_api.hpp): one HostPlane per layer per sequence, the
// appends prepared at reserve() (a growing plane's larger rows allocated and filled there), the
// call's scratch at prepare(), and the appends committed at run(), where the routes of every
// sequence of the call run as one job of the worker pool per layer, or per group of consecutive
// layers for a call of one sequence.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <thread>
#include <utility>

#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/fault_injection.hpp"
#include "ladder/heuristics.hpp"

namespace ladder::cpu {
namespace {

Status in_layer(int layer, const Status& st) {
  return make_error(st.code(), fmt::format("layer {}: {}", layer, st.message()));
}

class CpuSequence final : public DeviceSequence {
 public:
  explicit CpuSequence(std::vector<HostPlane> planes) : planes_(std::move(planes)) {}

  Status reserve(const SequenceStep& step) override {
    std::vector<PreparedAppend> prepared;
    try {
      if (detail::injected_allocation_failure()) throw std::bad_alloc();
      prepared.reserve(planes_.size());
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::out_of_memory, "cannot hold a step's prepared appends");
    }
    for (std::size_t i = 0; i < step.layers.size(); ++i) {
      const std::size_t l = static_cast<std::size_t>(step.first_layer) + i;
      Result<PreparedAppend> p = planes_[l].prepare_append(step.position, step.reserve_rows);
      if (!p) return in_layer(static_cast<int>(l), p.status());
      // The engine planned the same append from its own record of the state; they must agree.
      if (p->plan.slot != step.layers[i].slot || !(p->plan.next == step.layers[i].next))
        return in_layer(static_cast<int>(l), make_error(ErrorCode::internal, "the plane's state and the engine's differ"));
      prepared.push_back(std::move(p).value());
    }
    pending_ = std::move(prepared);
    return {};
  }

  void release() override { pending_.clear(); }

  std::vector<HostPlane>& planes() { return planes_; }
  std::vector<PreparedAppend>& pending() { return pending_; }

 private:
  std::vector<HostPlane> planes_;
  std::vector<PreparedAppend> pending_;
};

class CpuBackend final : public DeviceBackend {
 public:
  explicit CpuBackend(const Geometry& g) : g_(g) {
    shape_.n_heads = g.n_heads;
    shape_.n_kv_heads = g.n_kv_heads;
    shape_.head_dim = g.head_dim;
    shape_.scale = g.scale();
  }

  Status init() {
    try {
      ws_.resize(1);
      ws_[0].reserve(max_scratch_needs(g_));
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::out_of_memory, "cannot allocate the CPU device's scratch");
    }
    return {};
  }

  Device device() const override { return Device::cpu; }
  std::string description() const override {
    const UsableCpus u = usable_cpus();
    return fmt::format("cpu ({} worker threads, {} usable CPUs: {})", threads(), u.count, u.limited_by);
  }

  Result<std::unique_ptr<DeviceSequence>> create_sequence(const std::vector<PlaneConfig>& cfgs) override {
    std::vector<HostPlane> planes;
    try {
      if (detail::injected_allocation_failure()) throw std::bad_alloc();
      planes.reserve(cfgs.size());
      for (std::size_t l = 0; l < cfgs.size(); ++l) {
        Result<HostPlane> p = HostPlane::create(cfgs[l]);
        if (!p) return in_layer(static_cast<int>(l), p.status());
        planes.push_back(std::move(p).value());
      }
      return std::unique_ptr<DeviceSequence>(std::make_unique<CpuSequence>(std::move(planes)));
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::out_of_memory, "cannot allocate a sequence's planes");
    }
  }

  // Everything run() allocates, before any append is committed: the producer choice, the
  // layer groups, the scratch of every work of every group. Running out here leaves every plane
  // as it was.
  Status prepare(std::span<DeviceSequence* const> seqs, std::span<const SequenceStep> steps) override {
    call_.ready = false;
    // The producer choice matters (and is read, LADDER_CPU_PRODUCER included) only when a step
    // attends: a pure append never depends on it.
    bool fast = true;
    if (std::any_of(steps.begin(), steps.end(), [](const SequenceStep& st) { return st.attend; })) {
      Result<CpuProducer> which = producer();
      if (!which.ok()) return which.status();
      fast = *which == CpuProducer::fast;
    }
    // Every step of a call covers the same layers (the engine's one span): call layer j is plane
    // first_layer + j.
    const std::size_t layers = steps[0].layers.size();
    // Each group of layers is one pool job (run_layers) over every sequence of the call. A call
    // of up to kCpuGroupLayersUpToBatch sequences groups consecutive layers while their
    // partials fit kCpuJobPartialFloats (one wake-up and one end-of-job barrier per group, not
    // per layer); a larger call runs one job per layer, whose tasks the batch already
    // multiplies (heuristics.hpp: measured both ways).
    try {
      if (detail::injected_allocation_failure()) throw std::bad_alloc();
      call_.pending.resize(seqs.size());
      call_.group_end.clear();
      std::int64_t floats = 0;
      std::size_t works_in_group = 0, most_works = 0;
      for (std::size_t l = 0; l < layers; ++l) {
        std::int64_t layer_floats = 0;
        for (const SequenceStep& st : steps)
          if (st.attend) layer_floats += needs(st, l, fast).partial_floats;
        const bool grouped = seqs.size() <= static_cast<std::size_t>(kCpuGroupLayersUpToBatch);
        if (l > 0 && (!grouped || floats + layer_floats > kCpuJobPartialFloats)) {
          call_.group_end.push_back(l);
          floats = 0;
          works_in_group = 0;
        }
        floats += layer_floats;
        works_in_group += seqs.size();
        most_works = std::max(most_works, works_in_group);
      }
      call_.group_end.push_back(layers);
      // Work k of a group uses workspace k.
      if (ws_.size() < most_works) ws_.resize(most_works);
      if (works_.size() < most_works) works_.resize(most_works);
      std::size_t first = 0;
      for (const std::size_t end : call_.group_end) {
        std::size_t k = 0;
        for (std::size_t l = first; l < end; ++l)
          for (std::size_t i = 0; i < seqs.size(); ++i, ++k)
            if (steps[i].attend) ws_[k].reserve(needs(steps[i], l, fast));
        first = end;
      }
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::out_of_memory,
                        fmt::format("cannot allocate the CPU scratch of a call of {} sequences", seqs.size()));
    }
    call_.ready = true;
    return {};
  }

  Status run(std::span<DeviceSequence* const> seqs, std::span<const SequenceStep> steps) override {
    if (!call_.ready) return make_error(ErrorCode::internal, "the CPU device ran a call it had not prepared");
    call_.ready = false;
    const std::size_t first_layer = static_cast<std::size_t>(steps[0].first_layer);
    std::vector<std::vector<PreparedAppend>>& pending = call_.pending;
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      CpuSequence& s = static_cast<CpuSequence&>(*seqs[i]);
      pending[i] = std::move(s.pending());
      s.pending().clear();
    }
    // A sequence's bits depend on its own plane and visible length only (P4): its tasks are the
    // ones it has alone, whatever else a job holds.
    std::size_t first = 0;
    for (const std::size_t end : call_.group_end) {
      std::size_t n_works = 0, k = 0;
      for (std::size_t l = first; l < end; ++l) {
        for (std::size_t i = 0; i < seqs.size(); ++i, ++k) {
          CpuSequence& s = static_cast<CpuSequence&>(*seqs[i]);
          const SequenceStep& step = steps[i];
          HostPlane& plane = s.planes()[first_layer + l];
          const int slot = plane.commit_append(std::move(pending[i][l]));
          const float* kr = step.io.k + l * g_.kv_floats_per_layer();
          const float* vr = step.io.v + l * g_.kv_floats_per_layer();
          if (!step.attend) {
            store_row(plane, slot, kr, vr);
            continue;
          }
          const LayerIO io{step.io.q + l * g_.q_floats_per_layer(), kr, vr, step.io.out + l * g_.q_floats_per_layer()};
          const Status st = prepare_route(step.layers[l].route, plane, step.position, slot, shape_, io, ws_[k],
                                          works_[n_works]);
          if (!st.ok()) return in_layer(static_cast<int>(first_layer + l), st);
          ++n_works;
        }
      }
      const Status st = run_layers(std::span<const LayerWork>(works_.data(), n_works));
      if (!st.ok())
        return make_error(st.code(),
                          fmt::format("layers {}..{}: {}", first_layer + first, first_layer + end - 1, st.message()));
      first = end;
    }
    return {};
  }

 private:
  // The scratch call layer l (plane first_layer + l) of one sequence's step needs with the
  // chosen producer.
  ScratchNeeds needs(const SequenceStep& step, std::size_t l, bool fast) const {
    const LayerStep& ls = step.layers[l];
    return route_scratch_needs(ls.route, shape_, ls.next.len, fast);
  }

  void store_row(HostPlane& plane, int slot, const float* k, const float* v) const {
    StoreParams p;
    p.kv_dtype = plane.config().kv_dtype;
    p.n_kv_heads = g_.n_kv_heads;
    p.head_dim = g_.head_dim;
    p.k = k;
    p.v = v;
    p.plane_k = plane.k();
    p.plane_v = plane.v();
    p.strides = plane.strides();
    p.slot = slot;
    store_rows(p);
  }

  // What prepare() settled for the run() that follows it.
  struct PreparedCall {
    bool ready = false;  // prepare() succeeded and run() has not yet consumed it
    std::vector<std::size_t> group_end;                 // each pool job's end layer (call layers)
    std::vector<std::vector<PreparedAppend>> pending;   // per sequence, its reserved appends
  };

  Geometry g_;
  HeadShape shape_;
  std::vector<Workspace> ws_;     // one per work of the largest job so far
  std::vector<LayerWork> works_;  // the works of one job: its layers of every sequence
  PreparedCall call_;
};

}  // namespace

Result<std::unique_ptr<DeviceBackend>> create_backend(const Geometry& g) {
  LADDER_TRY(g.validate());
  auto b = std::make_unique<CpuBackend>(g);
  LADDER_TRY(b->init());
  return std::unique_ptr<DeviceBackend>(std::move(b));
}

}  // namespace ladder::cpu
