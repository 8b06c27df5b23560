#include "planes.hpp"

#include <fmt/format.h>

#include "device_rows.hpp"

namespace ladder::py {

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
  if (host_) {
    host_->write_row(slot, checked_f32(k, "k", dims, Where::cpu), checked_f32(v, "v", dims, Where::cpu));
    return;
  }
  // A device plane takes rows from host arrays or from CUDA tensors.
  const Where at = where_of(k, "k");
  device_->write_row(slot, checked_f32(k, "k", dims, at), checked_f32(v, "v", dims, at), at);
}

std::vector<std::uint16_t> Plane::copy_k() const {
  if (host_) return {host_->k(), host_->k() + host_->elements()};
  return device_->copy(false);
}
std::vector<std::uint16_t> Plane::copy_v() const {
  if (host_) return {host_->v(), host_->v() + host_->elements()};
  return device_->copy(true);
}

}  // namespace ladder::py
