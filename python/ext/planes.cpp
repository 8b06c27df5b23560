#include "planes.hpp"

#include <fmt/format.h>

#include "device_convert.hpp"
#include "device_plane.hpp"
#include "tensors.hpp"

namespace ladder::py {

GilSafeLock::GilSafeLock(std::mutex& m) : lock_(m) {
  if (lock_.try_lock()) return;
  nanobind::gil_scoped_release unlocked;
  lock_.lock();
}

std::vector<Dim> row_dims(const PlaneConfig& cfg) { return {{cfg.n_kv_heads, "n_kv_heads"}, {cfg.head_dim, "head_dim"}}; }

Plane::Plane(const PlaneConfig& cfg, Where where, int n_heads) : where_(where) {
  if (where == Where::cpu) {
    host_.emplace(take(HostPlane::create(cfg)));
    return;
  }
  if (!device_available())
    raise(error_types().no_device,
          has_cuda_build() ? "no usable CUDA device is present, so a device plane cannot be made"
                           : "this build of the ladder module has no CUDA support; rebuild it on a machine with nvcc "
                             "(pip install ./python) or use device='cpu' with numpy arrays");
  device_ = std::make_unique<DevicePlaneRows>(cfg, n_heads);
}
Plane::~Plane() = default;
Plane::Plane(Plane&&) noexcept = default;
Plane& Plane::operator=(Plane&&) noexcept = default;

const PlaneConfig& Plane::config() const { return host_ ? host_->config() : device_->config(); }
const PlaneState& Plane::state() const { return host_ ? host_->state() : device_->state(); }

int Plane::append(int position) { return host_ ? take(host_->append(position)) : device_->append(position); }

void Plane::write_row(int slot, const ArrayInfo& k, const ArrayInfo& v, std::uintptr_t stream) {
  const PlaneState& st = state();
  if (slot < 0 || slot >= st.capacity)
    raise(error_types().position, fmt::format("slot {} is outside the plane (capacity {} rows: 0..{})", slot,
                                              st.capacity, st.capacity - 1));
  const std::vector<Dim> dims = row_dims(config());
  // A device plane takes rows from host arrays or from CUDA tensors; a host plane from host arrays.
  const Where at = host_ ? Where::cpu : where_of(k, "k");
  F32In kf(k, "k", dims, at), vf(v, "v", dims, at);
  if (host_) {
    host_->write_row(slot, kf.data(), vf.data());
    return;
  }
  const float* kp = kf.data(stream);
  const float* vp = vf.data(stream);
  // The device runs on its own stream: what the caller's stream wrote (the rows, their
  // conversion) must be done first.
  if (at == Where::cuda) sync_stream(stream);
  device_->write_row(slot, kp, vp, at == Where::cuda ? Memory::device : Memory::host);
}

std::vector<int> Plane::extend(const ArrayInfo& k, const ArrayInfo& v, std::uintptr_t stream) {
  const PlaneConfig& cfg = config();
  if (k.shape.empty())
    raise(error_types().shape, fmt::format("k must have shape (n, {}, {}) = (rows, n_kv_heads, head_dim), got {}",
                                           cfg.n_kv_heads, cfg.head_dim, shape_of(k)));
  const std::int64_t n = k.shape[0];
  const std::vector<Dim> dims{{n, "rows"}, {cfg.n_kv_heads, "n_kv_heads"}, {cfg.head_dim, "head_dim"}};
  // Host arrays for either plane; CUDA tensors too for a device plane.
  const Where at = host_ ? Where::cpu : where_of(k, "k");
  F32In kf(k, "k", dims, at), vf(v, "v", dims, at);
  // Every append is planned before any is made (K4: a refusal leaves the plane untouched).
  PlaneState probe = state();
  const int first = probe.next_position;
  for (std::int64_t i = 0; i < n; ++i) probe = take(plan_append(cfg, probe, first + static_cast<int>(i))).next;
  const std::size_t row = static_cast<std::size_t>(cfg.n_kv_heads) * cfg.head_dim;
  std::vector<int> slots;
  slots.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) slots.push_back(append(first + static_cast<int>(i)));
  const float* kp = kf.data(stream);
  const float* vp = vf.data(stream);
  if (host_) {
    for (std::int64_t i = 0; i < n; ++i) host_->write_row(slots[i], kp + i * row, vp + i * row);
    return slots;
  }
  // Device plane: one store step of the library's device per row (from host memory through the
  // device's staging, or from device memory in place).
  if (at == Where::cuda && n > 0) sync_stream(stream);
  const Memory from = at == Where::cuda ? Memory::device : Memory::host;
  for (std::int64_t i = 0; i < n; ++i) device_->write_row(slots[i], kp + i * row, vp + i * row, from);
  return slots;
}

std::vector<KvWord> Plane::copy_k() const {
  if (host_) return {host_->k(), host_->k() + host_->elements()};
  return device_->copy(false);
}
std::vector<KvWord> Plane::copy_v() const {
  if (host_) return {host_->v(), host_->v() + host_->elements()};
  return device_->copy(true);
}

}  // namespace ladder::py
