// The module's one CUDA seam: device-side conversions for tensors.hpp, stream waits and what the
// build has. The CUDA build (device_convert_cuda.cpp + convert_kernels.cu) allocates float32
// scratch with cudaMallocAsync and converts on the caller's stream; device_convert_none.cpp
// raises NoDeviceError for every use. Device planes are the library's own (device_plane.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tensors.hpp"

namespace ladder::py {

// `n` floats of device memory, allocated and freed in stream order on `stream`.
class DeviceScratch {
 public:
  DeviceScratch(std::size_t n, std::uintptr_t stream);
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  float* data() const { return data_; }

 private:
  float* data_ = nullptr;
  std::uintptr_t stream_ = 0;
};

// dst[i] = float(src[i]) for i < n, in device memory, on `stream`.
void to_f32_device(const void* src, Elem e, float* dst, std::size_t n, std::uintptr_t stream);
// dst[i] = round_to_nearest_even(src[i]) for i < n, in device memory, on `stream`.
void from_f32_device(const float* src, Elem e, void* dst, std::size_t n, std::uintptr_t stream);
// Waits until everything queued on `stream` has run (the engine reads the caller's tensors on
// its own stream, so what the caller's stream wrote must be done first).
void sync_stream(std::uintptr_t stream);

// Whether the module was built with CUDA; whether a CUDA device is usable; a one-line
// description of it.
bool has_cuda_build();
bool device_available();
std::string device_description();

}  // namespace ladder::py
