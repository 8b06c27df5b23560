// The read-only streaming kernel of the read-bandwidth probe (device.cpp times it).
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels.hpp"

namespace ladder::cuda_detail {
namespace {

inline constexpr int kReadThreads = 256;
// In-flight 16-byte loads per thread per iteration: enough independent loads to cover HBM
// latency on a read-only stream.
inline constexpr int kReadUnroll = 4;

// Reads every 16-byte word once; the xor only escapes when it equals `never` (a value the
// caller never passes), so the loads cannot be dropped and nothing is written in practice.
__global__ void __launch_bounds__(kReadThreads) read_stream_kernel(const uint4* src, std::int64_t n, unsigned never,
                                                                   unsigned* sink) {
  unsigned acc = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  for (; i + (kReadUnroll - 1) * stride < n; i += kReadUnroll * stride) {
    uint4 w[kReadUnroll];
#pragma unroll
    for (int u = 0; u < kReadUnroll; ++u) w[u] = __ldcs(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < kReadUnroll; ++u) acc ^= w[u].x ^ w[u].y ^ w[u].z ^ w[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 w = __ldcs(src + i);
    acc ^= w.x ^ w.y ^ w.z ^ w.w;
  }
  if (acc == never) sink[0] = acc;
}

}  // namespace

cudaError_t launch_read_stream(const void* src, std::int64_t bytes, unsigned blocks, unsigned never, unsigned* sink,
                               cudaStream_t stream) {
  const std::int64_t words = bytes / static_cast<std::int64_t>(sizeof(uint4));
  read_stream_kernel<<<blocks, kReadThreads, 0, stream>>>(static_cast<const uint4*>(src), words, never, sink);
  return cudaGetLastError();
}

}  // namespace ladder::cuda_detail
