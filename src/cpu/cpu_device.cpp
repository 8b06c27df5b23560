// The CPU device behind the engine (device_api.hpp): one HostPlane per layer per sequence, the
// appends prepared at reserve() (a growing plane's larger rows allocated and filled there) and
// committed at run(), where each layer's route runs on the worker pool.
#include <fmt/format.h>

#include <new>
#include <thread>
#include <utility>

#include "ladder/cpu/cpu_backend.hpp"

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
      prepared.reserve(planes_.size());
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::out_of_memory, "cannot hold a step's prepared appends");
    }
    for (std::size_t i = 0; i < step.layers.size(); ++i) {
      const std::size_t l = static_cast<std::size_t>(step.first_layer) + i;
      Result<PreparedAppend> p = planes_[l].prepare_append(step.position);
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
      ws_.reserve(max_scratch_needs(g_));
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::out_of_memory, "cannot allocate the CPU device's scratch");
    }
    return {};
  }

  Device device() const override { return Device::cpu; }
  std::string description() const override {
    return fmt::format("cpu ({} worker threads, {} hardware threads)", threads(), std::thread::hardware_concurrency());
  }

  Result<std::unique_ptr<DeviceSequence>> create_sequence(const std::vector<PlaneConfig>& cfgs) override {
    std::vector<HostPlane> planes;
    try {
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

  Status run(std::span<DeviceSequence* const> seqs, std::span<const SequenceStep> steps) override {
    // Sequences in call order, each layer's work spread over the pool: a sequence's bits depend
    // on its own plane and visible length only (P4), whatever else the call holds.
    for (std::size_t i = 0; i < seqs.size(); ++i) LADDER_TRY(run_one(static_cast<CpuSequence&>(*seqs[i]), steps[i]));
    return {};
  }

 private:
  Status run_one(CpuSequence& s, const SequenceStep& step) {
    const std::size_t q_layer = static_cast<std::size_t>(g_.n_heads) * g_.head_dim;
    const std::size_t kv_layer = static_cast<std::size_t>(g_.n_kv_heads) * g_.head_dim;
    std::vector<PreparedAppend> pending = std::move(s.pending());
    s.pending().clear();
    // Layer first_layer + i of the plane set; its activations at offset i of the step's io.
    for (std::size_t i = 0; i < step.layers.size(); ++i) {
      const std::size_t l = static_cast<std::size_t>(step.first_layer) + i;
      HostPlane& plane = s.planes()[l];
      const int slot = plane.commit_append(std::move(pending[i]));
      const float* k = step.io.k + i * kv_layer;
      const float* v = step.io.v + i * kv_layer;
      if (step.attend) {
        const LayerIO io{step.io.q + i * q_layer, k, v, step.io.out + i * q_layer};
        const Status st = run_route(step.layers[i].route, plane, step.position, slot, shape_, io, ws_);
        if (!st.ok()) return in_layer(static_cast<int>(l), st);
      } else {
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
    }
    return {};
  }

  Geometry g_;
  HeadShape shape_;
  Workspace ws_;
};

}  // namespace

Result<std::unique_ptr<DeviceBackend>> create_backend(const Geometry& g) {
  LADDER_TRY(g.validate());
  auto b = std::make_unique<CpuBackend>(g);
  LADDER_TRY(b->init());
  return std::unique_ptr<DeviceBackend>(std::move(b));
}

}  // namespace ladder::cpu
