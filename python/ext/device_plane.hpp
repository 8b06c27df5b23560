// The device half of a Python Plane (planes.hpp): the library's own device plane, a one-layer
// sequence of the CUDA device (cuda::create_backend, device_api.hpp), driven the way the engine
// drives it. The plane's state lives here, on the host (the engine keeps its sequences' states
// the same way); the rows live in the device sequence. Every write or attend is one step of
// that sequence: the row stored (a fill) or the named route run over it (an attend), on the
// device's own stream, returning once it is done.
//
// What follows from using the library's plane rather than a copy of it:
//   - A device plane is made for one query-head count, n_heads (the device's scratch and launch
//     grid are sized from it); attend with another count is a ShapeError.
//   - head_dim must be the kernels' (128): another is refused when the plane is made
//     (UnsupportedError).
//   - A growing plane's device rows are allocated at max_context rows up front (the CUDA
//     device's rule: no device copy on growth); its state still grows as on the host.
// In a build without CUDA, making one raises NoDeviceError.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "arrays.hpp"
#include "ladder/device_api.hpp"
#include "ladder/plane.hpp"

namespace ladder::py {

class DevicePlaneRows {
 public:
  DevicePlaneRows(const PlaneConfig& cfg, int n_heads);
  ~DevicePlaneRows();

  const PlaneConfig& config() const { return cfg_; }
  const PlaneState& state() const { return state_; }
  int n_heads() const { return n_heads_; }
  // Metadata append with the library's rule (plan_append); the slot. A refusal changes nothing.
  int append(int position);
  // One token's f32 rows ([n_kv_heads][head_dim] each, host or device memory) stored at `slot`
  // in the plane's dtype by the device's store (range rule, round to nearest even).
  void write_row(int slot, const float* k, const float* v, Memory from);
  // Route `r` for the last append (position at slot) with q, k, v, out in device memory:
  // q, out [n_heads][head_dim]; k, v [n_kv_heads][head_dim].
  void attend(Route r, int position, int slot, const float* q, const float* k, const float* v, float* out);
  // K (values=false) or V words in the storage layout of a host plane in state(), on the host.
  std::vector<KvWord> copy(bool values) const;

 private:
  // Reserves and runs one step of the plane's sequence; a failure raises its typed error.
  void run(const SequenceStep& step);

  PlaneConfig cfg_;
  PlaneState state_;
  int n_heads_ = 0;
  std::unique_ptr<DeviceBackend> device_;
  std::unique_ptr<DeviceSequence> rows_;  // declared after device_: released first
};

}  // namespace ladder::py
