// Internal: an owning device array with Status-returning allocation and copies.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <fmt/format.h>

#include "cuda/dispatch.hpp"

namespace ladder::cuda_detail {

template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  ~DeviceArray() { reset(); }

  Status allocate(std::size_t n, const char* what) {
    reset();
    if (n == 0) return {};
    void* raw = nullptr;
    LADDER_TRY(cuda_status(cudaMalloc(&raw, n * sizeof(T)),
                           fmt::format("allocating {} bytes of device memory for {}", n * sizeof(T), what)));
    p_ = static_cast<T*>(raw);
    n_ = n;
    return {};
  }
  Status upload(const T* src, std::size_t n) {
    return cuda_status(cudaMemcpy(p_, src, n * sizeof(T), cudaMemcpyHostToDevice), "copying to the device");
  }
  Status download(T* dst, std::size_t n) const {
    return cuda_status(cudaMemcpy(dst, p_, n * sizeof(T), cudaMemcpyDeviceToHost), "copying from the device");
  }
  Status download_range(T* dst, std::size_t offset, std::size_t n) const {
    return cuda_status(cudaMemcpy(dst, p_ + offset, n * sizeof(T), cudaMemcpyDeviceToHost),
                       "copying from the device");
  }
  void reset() {
    if (p_ != nullptr) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace ladder::cuda_detail
