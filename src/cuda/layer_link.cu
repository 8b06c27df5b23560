// Benches only: the data dependency between consecutive layers that a real model has, so that a
// timed 52-layer step cannot overlap a layer's reads of q with the previous layer's work. One
// small kernel per link reads layer i's output and writes layer i+1's activations:
//   next.q[i] = base.q[i] + out[i]                 i < n_heads x 128
//   next.k[i] = base.k[i] + out[i], same for v     i < n_kv_heads x 128
// Launched with PDL it lets the next kernel start at once (its KV prefetch does not depend on
// this one) and waits for the previous kernel before it reads `out`.
#include "cuda/fused_tc.cuh"
#include "ladder/cuda/cuda_backend.hpp"
#include "cuda/dispatch.hpp"

namespace ladder::cuda_detail {
namespace {

inline constexpr int kLinkThreads = 256;

__global__ void __launch_bounds__(kLinkThreads) layer_link_kernel(cuda::LayerLink l, int n_q, int n_kv) {
  TimelineCta timeline(cuda::TimelineKernel::link, l.out);
  pdl_allow_dependents();
  pdl_wait();
  timeline.mark(cuda::TimelineEvent::waited);
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n_q;
       i += static_cast<int>(gridDim.x * blockDim.x)) {
    const float o = l.out[i];
    l.q[i] = l.base_q[i] + o;
    if (i < n_kv) {
      l.k[i] = l.base_k[i] + o;
      l.v[i] = l.base_v[i] + o;
    }
  }
  timeline.mark(cuda::TimelineEvent::exit);
}

}  // namespace

LADDER_TIMELINE_SINK(link)
}  // namespace ladder::cuda_detail

namespace ladder::cuda {

Status enqueue_layer_link(const LayerLink& link, const HeadShape& shape, void* stream, bool programmatic) {
  const int n_q = shape.n_heads * shape.head_dim;
  const int n_kv = shape.n_kv_heads * shape.head_dim;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cuda_detail::pdl_launch_config(
      attr, programmatic, dim3(static_cast<unsigned>((n_q + cuda_detail::kLinkThreads - 1) / cuda_detail::kLinkThreads)),
      dim3(cuda_detail::kLinkThreads), static_cast<cudaStream_t>(stream));
  return cuda_detail::cuda_status(cudaLaunchKernelEx(&cfg, cuda_detail::layer_link_kernel, link, n_q, n_kv),
                                  "launching the layer link kernel");
}

}  // namespace ladder::cuda
