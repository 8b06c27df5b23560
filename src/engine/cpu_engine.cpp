// The CPU decode engine (E1): one host plane per layer, one workspace sized for the worst route
// the ladder can pick (R5), and per token: validate the position for every layer, then per
// layer append -> choose_route -> run the CPU twin of that route.
#include <fmt/format.h>

#include <thread>
#include <utility>
#include <vector>

#include "engine/backends.hpp"
#include "ladder/cpu/cpu_backend.hpp"

namespace ladder {
namespace {

// Flags given in EngineOptions and the environment (R3) are merged: either one switches on.
Switches merged_switches(const Switches& given) {
  const Switches env = Switches::from_env();
  Switches s = given;
  s.strict = given.strict || env.strict;
  s.disable_vec = given.disable_vec || env.disable_vec;
  s.stage_wrapped_swa = given.stage_wrapped_swa || env.stage_wrapped_swa;
  return s;
}

Status check_io(const TokenIO& io, bool needs_attention) {
  if (io.k == nullptr || io.v == nullptr) return make_error(ErrorCode::invalid_argument, "TokenIO: k and v must be non-null");
  if (needs_attention && (io.q == nullptr || io.out == nullptr))
    return make_error(ErrorCode::invalid_argument, "TokenIO: encode_token needs non-null q and out");
  return {};
}

class CpuEngine final : public Engine {
 public:
  CpuEngine(Geometry g, EngineOptions opt, std::vector<HostPlane> planes)
      : g_(std::move(g)), opt_(opt), sw_(merged_switches(opt.switches)), planes_(std::move(planes)) {
    shape_.n_heads = g_.n_heads;
    shape_.n_kv_heads = g_.n_kv_heads;
    shape_.head_dim = g_.head_dim;
    shape_.scale = g_.scale();
  }

  Status reserve() {
    try {
      ws_.reserve(max_scratch_needs(g_));
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::out_of_memory, "cannot allocate the CPU engine's scratch");
    }
    return {};
  }

  Status encode_token(int position, const TokenIO& io) override {
    LADDER_TRY(check_io(io, true));
    if (detail::finite_check_on(opt_)) LADDER_TRY(detail::check_token_finite(g_, io, true));
    std::vector<PreparedAppend> appends;
    LADDER_TRY(prepare_all(position, appends));
    const std::size_t q_layer = static_cast<std::size_t>(g_.n_heads) * g_.head_dim;
    const std::size_t kv_layer = static_cast<std::size_t>(g_.n_kv_heads) * g_.head_dim;
    for (int layer = 0; layer < g_.n_layers; ++layer) {
      HostPlane& plane = planes_[static_cast<std::size_t>(layer)];
      const int slot = plane.commit_append(std::move(appends[static_cast<std::size_t>(layer)]));
      const LayerClass cls = g_.layer_class(layer);
      const RouteDecision decision = choose_route(cls, plane.state(), opt_.caps, sw_);
      if (opt_.record_trace) {
        TraceEntry e;
        e.position = position;
        e.layer = layer;
        e.cls = cls;
        e.decision = decision;
        e.state = plane.state();
        e.visible = g_.visible(cls, position);
        e.schedule = pinned_schedule(e.visible);
        trace_.push_back(e);
      }
      const LayerIO lio{io.q + layer * q_layer, io.k + layer * kv_layer, io.v + layer * kv_layer,
                        io.out + layer * q_layer};
      const Status st = cpu::run_route(decision.route, plane, position, slot, shape_, lio, ws_);
      if (!st.ok()) return with_layer(layer, st);
      plane.count_inputs(lio.q, q_layer, lio.k, lio.v);
    }
    return {};
  }

  Status fill_token(int position, const TokenIO& io) override {
    LADDER_TRY(check_io(io, false));
    if (detail::finite_check_on(opt_)) LADDER_TRY(detail::check_token_finite(g_, io, false));
    std::vector<PreparedAppend> appends;
    LADDER_TRY(prepare_all(position, appends));
    const std::size_t kv_layer = static_cast<std::size_t>(g_.n_kv_heads) * g_.head_dim;
    for (int layer = 0; layer < g_.n_layers; ++layer) {
      HostPlane& plane = planes_[static_cast<std::size_t>(layer)];
      const int slot = plane.commit_append(std::move(appends[static_cast<std::size_t>(layer)]));
      StoreParams p;
      p.n_kv_heads = g_.n_kv_heads;
      p.head_dim = g_.head_dim;
      p.k = io.k + layer * kv_layer;
      p.v = io.v + layer * kv_layer;
      p.plane_k = plane.k();
      p.plane_v = plane.v();
      p.strides = plane.strides();
      p.slot = slot;
      cpu::store_rows(p);
      plane.count_inputs(nullptr, 0, p.k, p.v);
    }
    return {};
  }

  const Geometry& geometry() const override { return g_; }
  Device device() const override { return Device::cpu; }
  std::string device_description() const override {
    return fmt::format("cpu ({} worker threads, {} hardware threads)", cpu::threads(),
                       std::thread::hardware_concurrency());
  }
  PlaneState plane_state(int layer) const override {
    if (layer < 0 || layer >= g_.n_layers) return {};
    return planes_[static_cast<std::size_t>(layer)].state();
  }
  RangeStats range_stats() const override {
    RangeStats total;
    for (const HostPlane& p : planes_) total += p.range_stats();
    return total;
  }
  const std::vector<TraceEntry>& trace() const override { return trace_; }
  void clear_trace() override { trace_.clear(); }

 private:
  // K4 across layers: every plane's append is prepared (planned, and grown rows allocated)
  // before any is committed, so a refused position or an allocation failure while a NoPE plane
  // grows leaves all of them as they were (not only the layer that failed).
  Status prepare_all(int position, std::vector<PreparedAppend>& out) const {
    out.clear();
    out.reserve(static_cast<std::size_t>(g_.n_layers));
    for (int layer = 0; layer < g_.n_layers; ++layer) {
      Result<PreparedAppend> p = planes_[static_cast<std::size_t>(layer)].prepare_append(position);
      if (!p) return with_layer(layer, p.status());
      out.push_back(std::move(*p));
    }
    return {};
  }

  static Status with_layer(int layer, const Status& st) {
    return make_error(st.code(), fmt::format("layer {}: {}", layer, st.message()));
  }

  Geometry g_;
  EngineOptions opt_;
  Switches sw_;
  HeadShape shape_;
  std::vector<HostPlane> planes_;
  cpu::Workspace ws_;
  std::vector<TraceEntry> trace_;
};

}  // namespace

namespace detail {

Result<std::unique_ptr<Engine>> create_cpu_engine(const Geometry& g, const EngineOptions& opt) {
  LADDER_TRY(g.validate());
  std::vector<HostPlane> planes;
  planes.reserve(static_cast<std::size_t>(g.n_layers));
  for (int layer = 0; layer < g.n_layers; ++layer) {
    const PlaneConfig cfg = PlaneConfig::for_layer(g, g.layer_class(layer), opt.initial_growing_capacity);
    Result<HostPlane> plane = HostPlane::create(cfg);
    if (!plane) return make_error(plane.status().code(), fmt::format("layer {}: {}", layer, plane.status().message()));
    planes.push_back(std::move(plane).value());
  }
  auto engine = std::make_unique<CpuEngine>(g, opt, std::move(planes));
  LADDER_TRY(engine->reserve());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace detail
}  // namespace ladder
