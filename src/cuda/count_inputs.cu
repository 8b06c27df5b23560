// N1's counters on the device: what the range rule (nonfinite.hpp) does to a call's q, k and v,
// counted where they live, so neither host copies nor a host scan are needed. One CTA per
// (slot, layer, array) writes its two counts to a fixed entry: no atomics, nothing to clear, and
// the counts of each layer are there for the opt-in finite check's message.
#include "cuda/common.cuh"
#include "cuda/kernels.hpp"

namespace ladder::cuda_detail {
namespace {

inline constexpr int kCountThreads = 256;
inline constexpr int kCountWarps = kCountThreads / kWarpSize;

__global__ void __launch_bounds__(kCountThreads)
    count_inputs_kernel(const SlotInputs* slots, int n_layers, int q_layer, int kv_layer, float range_max,
                        InputCount* out) {
  TimelineCta timeline(cuda::TimelineKernel::count, out);
  const int layer = static_cast<int>(blockIdx.x);
  const int array = static_cast<int>(blockIdx.y);  // InputArray
  const int slot = static_cast<int>(blockIdx.z);
  const SlotInputs in = slots[slot];
  const float* base = array == kInputQ ? in.q : (array == kInputK ? in.k : in.v);
  const int n = array == kInputQ ? q_layer : kv_layer;
  unsigned saturated = 0, nonfinite = 0;
  if (base != nullptr) {
    const float* x = base + static_cast<std::int64_t>(layer) * n;
    for (int i = static_cast<int>(threadIdx.x); i < n; i += kCountThreads) {
      const RangeClass c = range_class(x[i], range_max);
      saturated += c == RangeClass::saturated ? 1u : 0u;
      nonfinite += c == RangeClass::nonfinite ? 1u : 0u;
    }
  }
  saturated = __reduce_add_sync(kFullMask, saturated);
  nonfinite = __reduce_add_sync(kFullMask, nonfinite);
  __shared__ unsigned warp_sat[kCountWarps], warp_nf[kCountWarps];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  if (threadIdx.x % kWarpSize == 0) {
    warp_sat[warp] = saturated;
    warp_nf[warp] = nonfinite;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    InputCount c{0u, 0u};
    for (int w = 0; w < kCountWarps; ++w) {
      c.saturated += warp_sat[w];
      c.nonfinite += warp_nf[w];
    }
    out[(static_cast<std::int64_t>(slot) * n_layers + layer) * kInputArrays + array] = c;
  }
  timeline.mark(cuda::TimelineEvent::exit);
}

}  // namespace

LADDER_TIMELINE_SINK(count)

cudaError_t launch_count_inputs(const SlotInputs* slots, int count, int n_layers, int q_layer, int kv_layer,
                                float range_max, InputCount* out, cudaStream_t stream) {
  if (count <= 0 || n_layers <= 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(n_layers), kInputArrays, static_cast<unsigned>(count));
  count_inputs_kernel<<<grid, kCountThreads, 0, stream>>>(slots, n_layers, q_layer, kv_layer, range_max, out);
  return cudaGetLastError();
}

}  // namespace ladder::cuda_detail
