// The Python Plane: a KV plane in host memory (the library's HostPlane) or, in CUDA builds, in
// device memory (the library's own device plane, device_plane.hpp). Its metadata (explicit
// origins, append rule) is the library's; only where the rows live differs.
//
// Threads: every binding that reads or changes a Plane holds its lock (PlaneGuard) for the whole
// call, so calls on one plane from several Python threads are serialized. attend releases the
// GIL while it computes but keeps the plane's lock, so another thread's append cannot grow (and
// free) the rows being read; calls on different planes run in parallel.
#pragma once

#include <memory>
#include <mutex>
#include <optional>

#include "arrays.hpp"
#include "ladder/plane.hpp"

namespace ladder::py {

class DevicePlaneRows;  // device_plane.hpp

class Plane {
 public:
  // n_heads: the query heads of a device plane's attend calls (its device is sized for them);
  // 0 for a host plane, which takes any multiple of n_kv_heads per call.
  Plane(const PlaneConfig& cfg, Where where, int n_heads = 0);
  ~Plane();
  Plane(Plane&&) noexcept;
  Plane& operator=(Plane&&) noexcept;

  Where where() const { return where_; }
  const PlaneConfig& config() const;
  const PlaneState& state() const;
  // Metadata append (K4: a refused append raises and leaves the plane untouched); the slot.
  int append(int position);
  // Stores one token's f32 K/V ([n_kv_heads][head_dim] each) at a physical slot, rounded to the plane's dtype.
  // stream: for CUDA tensors, the cudaStream_t that wrote them (conversions run on it and the
  // device's store waits for it); host arrays ignore it.
  void write_row(int slot, const ArrayInfo& k, const ArrayInfo& v, std::uintptr_t stream = 0);
  // Appends next_position, next_position+1, ... with one row each from k, v ([n][n_kv_heads]
  // [head_dim]; host arrays, or CUDA tensors for a device plane); all appends are checked
  // first, so a refusal changes nothing.
  // Returns the slots. stream: as for write_row.
  std::vector<int> extend(const ArrayInfo& k, const ArrayInfo& v, std::uintptr_t stream = 0);
  // The stored rows (words of the plane's dtype) in storage layout, copied to host memory.
  std::vector<KvWord> copy_k() const;
  std::vector<KvWord> copy_v() const;

  HostPlane& host() { return *host_; }
  DevicePlaneRows& device() { return *device_; }
  std::mutex& lock() const { return *lock_; }

 private:
  Where where_;
  // Behind a pointer so that Plane stays movable (nanobind returns Plane.for_layer by value).
  std::unique_ptr<std::mutex> lock_ = std::make_unique<std::mutex>();
  std::optional<HostPlane> host_;
  std::unique_ptr<DevicePlaneRows> device_;
};

// Holds an object's lock (a plane's, an engine's) for one binding call; constructed with the GIL
// held. When another thread holds the object (a call computing with the GIL released), it waits
// with the GIL released, so that thread can take the GIL back and finish: no thread ever blocks
// on an object while holding the GIL, which is what keeps the two locks free of deadlock.
class GilSafeLock {
 public:
  explicit GilSafeLock(std::mutex& m);
  ~GilSafeLock() { lock_.unlock(); }
  GilSafeLock(const GilSafeLock&) = delete;
  GilSafeLock& operator=(const GilSafeLock&) = delete;

 private:
  std::mutex& lock_;
};

class PlaneGuard : public GilSafeLock {
 public:
  explicit PlaneGuard(const Plane& p) : GilSafeLock(p.lock()) {}
};

// The element count of one row argument and its expected shape text, shared by the bindings.
std::vector<Dim> row_dims(const PlaneConfig& cfg);

}  // namespace ladder::py
