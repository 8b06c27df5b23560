// Internal: owning device resources. A device array with Status-returning allocation and
// copies; handles of the runtime's streams, events and graphs, destroyed with their owner.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <fmt/format.h>
#include <utility>

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

// A runtime handle (stream, event, graph, executable graph) owned by one object: destroyed when
// it is, or when reset. Move-only. out() hands the runtime's create call the slot to fill,
// destroying what it held first.
template <class Handle, cudaError_t (*Destroy)(Handle)>
class CudaHandle {
 public:
  CudaHandle() = default;
  CudaHandle(const CudaHandle&) = delete;
  CudaHandle& operator=(const CudaHandle&) = delete;
  CudaHandle(CudaHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  CudaHandle& operator=(CudaHandle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  ~CudaHandle() { reset(); }

  void reset() {
    if (h_ != nullptr) Destroy(h_);
    h_ = nullptr;
  }
  Handle get() const { return h_; }
  Handle* out() {
    reset();
    return &h_;
  }

 private:
  Handle h_ = nullptr;
};

using StreamHandle = CudaHandle<cudaStream_t, cudaStreamDestroy>;
using EventHandle = CudaHandle<cudaEvent_t, cudaEventDestroy>;
using GraphHandle = CudaHandle<cudaGraph_t, cudaGraphDestroy>;
using GraphExecHandle = CudaHandle<cudaGraphExec_t, cudaGraphExecDestroy>;

}  // namespace ladder::cuda_detail
