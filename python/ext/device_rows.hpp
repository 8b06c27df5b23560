// Device storage of a CUDA plane, behind one seam so that the module builds without CUDA too:
// device_rows_cuda.cpp implements it over the CUDA backend's raw-pointer API, and
// device_rows_none.cpp raises NoDeviceError for every use.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "arrays.hpp"
#include "ladder/kernel_params.hpp"
#include "ladder/ladder.hpp"
#include "ladder/plane.hpp"

namespace ladder::py {

class DeviceRows {
 public:
  virtual ~DeviceRows() = default;
  virtual const PlaneConfig& config() const = 0;
  virtual const PlaneState& state() const = 0;
  // Metadata append with the library's rule (plan_append); growth keeps the rows. Returns the slot.
  virtual int append(int position) = 0;
  // One token's f32 rows from host memory or device memory, stored in the plane's dtype at `slot`.
  virtual void write_row(int slot, const float* k, const float* v, Where from) = 0;
  // The plane's K (values=false) or V rows in storage layout, copied to the host.
  virtual std::vector<KvWord> copy(bool values) const = 0;
  // Replaces the plane's K (values=false) or V rows with `data` (storage layout, same size).
  virtual void upload(bool values, const std::vector<KvWord>& data) = 0;
  // Runs `r` for this token on `stream` (a cudaStream_t as an integer; 0 = the default stream)
  // with q, k, v, out in device memory. Synchronous with respect to the stream only.
  virtual void attend(Route r, int position, int slot, const HeadShape& shape, const float* q, const float* k,
                      const float* v, float* out, std::uintptr_t stream) = 0;
};

std::unique_ptr<DeviceRows> make_device_rows(const PlaneConfig& cfg);

// Whether this build can use a CUDA device, and a one-line description of it.
bool device_available();
std::string device_description();

}  // namespace ladder::py
