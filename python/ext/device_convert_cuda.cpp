// Device scratch and conversions for CUDA tensors in float16 / bfloat16 (tensors.hpp): scratch
// is allocated and freed in stream order (cudaMallocAsync / cudaFreeAsync) on the caller's
// stream, and the conversion kernels run there too, so nothing waits on the host.
#include <cuda_runtime.h>

#include <fmt/format.h>

#include "convert_kernels.hpp"
#include "device_convert.hpp"
#include "ladder/cuda/cuda_backend.hpp"

namespace ladder::py {

namespace {
void check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // drop it, so the next launch's check does not report it again
  const ErrorTypes& t = error_types();
  raise(e == cudaErrorMemoryAllocation ? t.out_of_memory : t.device_error,
        fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

int element_code(Elem e) {
  constexpr int kF16 = 1, kBF16 = 2;
  return e == Elem::f16 ? kF16 : kBF16;
}

cudaStream_t as_stream(std::uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }
}  // namespace

DeviceScratch::DeviceScratch(std::size_t n, std::uintptr_t stream) : stream_(stream) {
  void* p = nullptr;
  check_cuda(cudaMallocAsync(&p, n * sizeof(float), as_stream(stream)), "allocating conversion scratch");
  data_ = static_cast<float*>(p);
}

DeviceScratch::~DeviceScratch() {
  if (data_ != nullptr) (void)cudaFreeAsync(data_, as_stream(stream_));
}

void to_f32_device(const void* src, Elem e, float* dst, std::size_t n, std::uintptr_t stream) {
  if (e == Elem::f32) {
    check_cuda(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, as_stream(stream)),
               "copying a float32 tensor");
    return;
  }
  check_cuda(static_cast<cudaError_t>(kernels::widen_to_f32(src, element_code(e), dst, n, as_stream(stream))),
             "converting a tensor to float32");
}

void sync_stream(std::uintptr_t stream) {
  check_cuda(cudaStreamSynchronize(as_stream(stream)), "waiting for the caller's stream");
}

void from_f32_device(const float* src, Elem e, void* dst, std::size_t n, std::uintptr_t stream) {
  if (e == Elem::f32) {
    check_cuda(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, as_stream(stream)),
               "copying a float32 tensor");
    return;
  }
  check_cuda(static_cast<cudaError_t>(kernels::narrow_from_f32(src, element_code(e), dst, n, as_stream(stream))),
             "converting the output from float32");
}

bool has_cuda_build() { return true; }

bool device_available() { return cuda_available(); }

std::string device_description() {
  Result<cuda::DeviceInfo> info = cuda::device_info();
  if (!info.ok()) return info.status().to_string();
  return fmt::format("{} (sm_{}{}, {} SMs, {} MB L2)", info->name, info->cc_major, info->cc_minor, info->sm_count,
                     info->l2_bytes / (1 << 20));
}

}  // namespace ladder::py
