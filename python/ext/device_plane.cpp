#include "device_plane.hpp"

#include <fmt/format.h>

#include "ladder/cuda/cuda_backend.hpp"
#include "ladder/ladder.hpp"

namespace ladder::py {

namespace {

// The smallest window: what a growing plane's geometry states (below).
constexpr int kNoRingWindow = 1;

// The one-layer geometry of a plane's device: the plane's heads, dtype and max context and, for a
// ring, its window and slack, so that the device's scratch (max_scratch_needs) covers every
// route at every length the plane can reach. A growing plane's geometry has the smallest window:
// the window sizes only the staged route's scratch (whole copies of the window's rows), and
// staged never runs on a growing plane (route_refusal), while the partials every other route
// uses are sized by vec and interleaved at max_context. Window 0 would read as unbounded and
// size that staging for max_context rows (1 GiB at 2^20 rows of 2 x 128 heads).
Geometry plane_geometry(const PlaneConfig& cfg, int n_heads) {
  Geometry g;
  g.name = "python-plane";
  g.n_layers = 1;
  g.n_heads = n_heads;
  g.n_kv_heads = cfg.n_kv_heads;
  g.head_dim = cfg.head_dim;
  g.max_context = cfg.max_context;
  g.kv_dtype = cfg.kv_dtype;
  if (cfg.kind == PlaneKind::ring) {
    g.window = cfg.window;
    g.ring_slack = cfg.capacity - Geometry::ring_rows(cfg.window, cfg.max_context);
    g.layer_classes = {LayerClass::swa};
  } else {
    g.window = kNoRingWindow;
    g.layer_classes = {LayerClass::nope};
  }
  return g;
}

}  // namespace

DevicePlaneRows::DevicePlaneRows(const PlaneConfig& cfg, int n_heads) : cfg_(cfg), n_heads_(n_heads) {
  check(cfg.validate());
  if (n_heads <= 0 || n_heads % cfg.n_kv_heads != 0)
    raise(error_types().invalid_argument,
          fmt::format("a device plane needs n_heads, the query heads of its attend calls: a positive multiple of "
                      "n_kv_heads ({}), got {}",
                      cfg.n_kv_heads, n_heads));
  state_.capacity = cfg.capacity;
  // Eager launches: a standalone plane runs whichever route each call names, one call at a
  // time, so a captured graph would rarely be replayed.
  cuda::CudaEngineOptions copt = cuda::default_engine_options();
  copt.use_graph = false;
  Result<std::unique_ptr<DeviceBackend>> device = cuda::create_backend(plane_geometry(cfg, n_heads), copt);
  if (!device) check(device.status());
  device_ = std::move(device).value();
  Result<std::unique_ptr<DeviceSequence>> rows = device_->create_sequence({cfg});
  if (!rows) check(rows.status());
  rows_ = std::move(rows).value();
}

DevicePlaneRows::~DevicePlaneRows() = default;

int DevicePlaneRows::append(int position) {
  const AppendPlan plan = take(plan_append(cfg_, state_, position));
  state_ = plan.next;
  return plan.slot;
}

void DevicePlaneRows::run(const SequenceStep& step) {
  check(rows_->reserve(step));
  DeviceSequence* const seqs[] = {rows_.get()};
  const Status prepared = device_->prepare(seqs, std::span<const SequenceStep>(&step, 1));
  if (!prepared.ok()) {
    rows_->release();
    check(prepared);
  }
  const Status s = device_->run(seqs, std::span<const SequenceStep>(&step, 1));
  if (!s.ok()) rows_->release();
  check(s);
}

void DevicePlaneRows::write_row(int slot, const float* k, const float* v, Memory from) {
  SequenceStep step;
  step.position = state_.next_position - 1;
  step.attend = false;
  step.io = TokenIO{nullptr, k, v, nullptr, from};
  step.layers = {LayerStep{Route::splitk, slot, state_}};  // a fill reads no route
  run(step);
}

void DevicePlaneRows::attend(Route r, int position, int slot, const float* q, const float* k, const float* v,
                             float* out) {
  SequenceStep step;
  step.position = position;
  step.attend = true;
  step.io = TokenIO{q, k, v, out, Memory::device};
  step.layers = {LayerStep{r, slot, state_}};
  run(step);
}

std::vector<KvWord> DevicePlaneRows::copy(bool values) const {
  std::vector<KvWord> out(static_cast<std::size_t>(state_.capacity) * cfg_.n_kv_heads * cfg_.head_dim);
  check(rows_->copy_rows(0, state_, values, out));
  return out;
}

}  // namespace ladder::py
