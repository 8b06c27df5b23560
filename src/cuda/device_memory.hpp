// Internal: owning device resources. A device array (a cuda::DeviceBuffer with Status-returning
// allocation and copies); handles of the runtime's streams, events and graphs, destroyed with
// their owner.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <fmt/format.h>
#include <string_view>
#include <utility>

#include "ladder/cuda/cuda_backend.hpp"

#include "cuda/dispatch.hpp"

namespace ladder::cuda_detail {

// cudaMalloc of n elements of T, owned from the moment it exists; n <= 0 gives an empty buffer.
// `what` names the memory in the error (which buffer of which object ran out).
template <class T>
Status allocate_device_buffer(cuda::DeviceBuffer<T>& buffer, std::int64_t n, std::string_view what) {
  buffer = {};
  if (n <= 0) return {};
  void* raw = nullptr;
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
  LADDER_TRY(cuda_status(cudaMalloc(&raw, bytes),
                         fmt::format("allocating {} bytes of device memory for {}", bytes, what)));
  buffer = cuda::DeviceBuffer<T>(static_cast<T*>(raw), n);
  return {};
}

// A DeviceBuffer with Status-returning allocation and synchronous copies. Ownership is the
// buffer's (rule of zero): move-only, freed when destroyed, reset or moved over.
template <class T>
class DeviceArray {
 public:
  Status allocate(std::size_t n, std::string_view what) {
    return allocate_device_buffer(buf_, static_cast<std::int64_t>(n), what);
  }
  Status upload(const T* src, std::size_t n) {
    return cuda_status(cudaMemcpy(get(), src, n * sizeof(T), cudaMemcpyHostToDevice), "copying to the device");
  }
  Status download(T* dst, std::size_t n) const { return download_range(dst, 0, n); }
  Status download_range(T* dst, std::size_t offset, std::size_t n) const {
    return cuda_status(cudaMemcpy(dst, get() + offset, n * sizeof(T), cudaMemcpyDeviceToHost),
                       "copying from the device");
  }
  void reset() { buf_ = {}; }
  T* get() const { return buf_.get(); }
  std::size_t size() const { return static_cast<std::size_t>(buf_.size()); }

 private:
  cuda::DeviceBuffer<T> buf_;
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
