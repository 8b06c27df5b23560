// The step state of an engine call (input pointers and every entry's launch structs), fetched
// from pinned host memory into its device copy by a kernel: the step graph's first node. A copy
// node there cost 8-10 us of every call (the hand-off between the copy engine and the SMs;
// docs/perf.md, 2026-12-02); a kernel node keeps the call on the SMs. Each thread moves 16-byte
// words with ld.global.cv: the host rewrites these bytes before every launch, so no line cached
// by an earlier call may be reused.
//
// Shape at the boundary: host (device-mapped pinned memory) and dev, `words` 16-byte words each.
#include <algorithm>
#include <cstddef>

#include "cuda/common.cuh"
#include "cuda/kernels.hpp"
#include "cuda/timeline.cuh"

namespace ladder::cuda_detail {
namespace {

inline constexpr int kFetchThreads = 256;
// Enough CTAs that a whole-token call's state (52 layers x 16 sequences x 504 B: ~26,000 words)
// has a few words per thread in flight, few enough that a one-layer call launches one or two.
inline constexpr int kFetchMaxCtas = 32;

__global__ void __launch_bounds__(kFetchThreads) fetch_state_kernel(const uint4* host, uint4* dev, std::size_t words,
                                                                   unsigned debug_delay_ns) {
  TimelineCta timeline(cuda::TimelineKernel::fetch, dev);
  // The first layer's producer may be launched now (EntriesFrom::fetch_just_before): its CTAs
  // become resident while the words cross PCIe, and wait (griddepcontrol.wait: this grid
  // complete, its stores visible) before they read an entry.
  pdl_allow_dependents();
  if (debug_delay_ns > 0) debug_sleep_ns(debug_delay_ns);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kFetchThreads;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kFetchThreads) + threadIdx.x; i < words; i += stride)
    dev[i] = __ldcv(host + i);
  timeline.mark(cuda::TimelineEvent::exit);
}

}  // namespace

LADDER_TIMELINE_SINK(fetch)

cudaError_t launch_fetch_state(const void* host, void* dev, std::size_t bytes, cudaStream_t stream,
                               unsigned debug_delay_ns) {
  if (bytes % sizeof(uint4) != 0) return cudaErrorInvalidValue;
  const std::size_t words = bytes / sizeof(uint4);
  if (words == 0) return cudaSuccess;
  const std::size_t ctas = std::min<std::size_t>((words + kFetchThreads - 1) / kFetchThreads, kFetchMaxCtas);
  fetch_state_kernel<<<static_cast<unsigned>(ctas), kFetchThreads, 0, stream>>>(static_cast<const uint4*>(host),
                                                                              static_cast<uint4*>(dev), words, debug_delay_ns);
  return cudaGetLastError();
}

}  // namespace ladder::cuda_detail
