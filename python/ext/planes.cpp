#include "planes.hpp"

#include <fmt/format.h>

#include "device_rows.hpp"
#include "ladder/reference.hpp"
#include "tensors.hpp"

namespace ladder::py {

PlaneGuard::PlaneGuard(const Plane& p) : lock_(p.lock()) {
  if (lock_.try_lock()) return;
  nanobind::gil_scoped_release unlocked;
  lock_.lock();
}

std::vector<Dim> row_dims(const PlaneConfig& cfg) { return {{cfg.n_kv_heads, "n_kv_heads"}, {cfg.head_dim, "head_dim"}}; }

Plane::Plane(const PlaneConfig& cfg, Where where) : where_(where) {
  if (where == Where::cpu) {
    host_.emplace(take(HostPlane::create(cfg)));
  } else {
    device_ = make_device_rows(cfg);
  }
}
Plane::~Plane() = default;
Plane::Plane(Plane&&) noexcept = default;
Plane& Plane::operator=(Plane&&) noexcept = default;

const PlaneConfig& Plane::config() const { return host_ ? host_->config() : device_->config(); }
const PlaneState& Plane::state() const { return host_ ? host_->state() : device_->state(); }

int Plane::append(int position) { return host_ ? take(host_->append(position)) : device_->append(position); }

void Plane::write_row(int slot, const ArrayInfo& k, const ArrayInfo& v) {
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
  device_->write_row(slot, kf.data(), vf.data(), at);
}

std::vector<int> Plane::extend(const ArrayInfo& k, const ArrayInfo& v) {
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
  const float* kp = kf.data();
  const float* vp = vf.data();
  if (host_) {
    for (std::int64_t i = 0; i < n; ++i) host_->write_row(slots[i], kp + i * row, vp + i * row);
    return slots;
  }
  if (at == Where::cuda) {
    // Rows already in device memory go row by row through the device store.
    for (std::int64_t i = 0; i < n; ++i) device_->write_row(slots[i], kp + i * row, vp + i * row, at);
    return slots;
  }
  // Device plane: the rows are rounded and placed on the host, then the plane goes up in one copy.
  std::vector<KvWord> hk = device_->copy(false), hv = device_->copy(true);
  const PlaneStrides s = plane_strides(cfg.kind, state().capacity, cfg.n_kv_heads, cfg.head_dim);
  for (std::int64_t i = 0; i < n; ++i)
    for (int h = 0; h < cfg.n_kv_heads; ++h) {
      const std::int64_t at = s.offset(slots[i], h);
      const std::size_t src = i * row + static_cast<std::size_t>(h) * cfg.head_dim;
      for (int d = 0; d < cfg.head_dim; ++d) {
        hk[at + d] = kv_encode(kp[src + d], cfg.kv_dtype);  // the store's range rule (docs/nonfinite.md)
        hv[at + d] = kv_encode(vp[src + d], cfg.kv_dtype);
      }
    }
  device_->upload(false, hk);
  device_->upload(true, hv);
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
