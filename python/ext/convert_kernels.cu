// Elementwise float16 / bfloat16 <-> float32 conversion in device memory, on the caller's
// stream: how a model-dtype CUDA tensor reaches the float32 routes without a trip to the host.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "convert_kernels.hpp"

namespace ladder::py::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kF16 = 1;

__global__ void widen(const void* src, int element, float* dst, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  dst[i] = element == kF16 ? __half2float(static_cast<const __half*>(src)[i])
                           : __bfloat162float(static_cast<const __nv_bfloat16*>(src)[i]);
}

__global__ void narrow(const float* src, int element, void* dst, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (element == kF16) {
    static_cast<__half*>(dst)[i] = __float2half_rn(src[i]);
  } else {
    static_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(src[i]);
  }
}

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

int widen_to_f32(const void* src, int element, float* dst, std::size_t n, void* stream) {
  if (n == 0) return 0;
  widen<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(src, element, dst, n);
  return static_cast<int>(cudaGetLastError());
}

int narrow_from_f32(const float* src, int element, void* dst, std::size_t n, void* stream) {
  if (n == 0) return 0;
  narrow<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(src, element, dst, n);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace ladder::py::kernels
