// G1 stores: one token's f32 K/V activations ([n_kv_heads][128] each) rounded to the plane's
// dtype (StoreParams::kv_dtype: one kernel instance per dtype) into the plane row `slot`. The token-major row store (SWA ring: the row is all KV heads of one token)
// and the head-major batch store (NoPE growing plane: one row per KV head, capacity rows apart)
// are the same kernel; PlaneStrides carries the layout.
#include "cuda/kernels.hpp"
#include "cuda/common.cuh"

namespace ladder::cuda_detail {
namespace {

// One thread per (KV head, 4-dim chunk): 8-byte element stores, 16-byte f32 loads.
inline constexpr int kStoreThreads = 128;
inline constexpr int kPoisonThreads = 256;

template <KvDtype D>
__device__ void store_rows(const StoreParams& p) {
  const int items = p.n_kv_heads * kWarpSize;
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < items;
       i += static_cast<int>(gridDim.x * blockDim.x)) {
    const int kvh = i / kWarpSize;
    const int d = (i % kWarpSize) * kDimsPerLane;
    const std::int64_t at = p.strides.offset(p.slot, kvh) + d;
    store4<D>(p.plane_k + at, load_float4(p.k + kvh * kHeadDim + d));
    store4<D>(p.plane_v + at, load_float4(p.v + kvh * kHeadDim + d));
  }
}

template <KvDtype D>
__global__ void __launch_bounds__(kStoreThreads) store_kernel(StoreParams p) { store_rows<D>(p); }
template <KvDtype D>
__global__ void __launch_bounds__(kStoreThreads) store_kernel_indirect(const StoreParams* pp, std::size_t stride) {
  const StoreParams p = batch_entry(pp, stride);
  store_rows<D>(p);  // n_kv_heads 0 (an entry without a store): no items
}

__global__ void __launch_bounds__(kPoisonThreads) poison_kernel(KvWord* dst, std::int64_t n, KvWord nan) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    dst[i] = nan;
}

template <KvDtype D>
cudaError_t launch_store_as(const StoreParams& p, const StoreParams* dp, cudaStream_t stream, BatchSpan batch) {
  const int items = p.n_kv_heads * kWarpSize;
  const unsigned blocks = static_cast<unsigned>((items + kStoreThreads - 1) / kStoreThreads);
  if (dp == nullptr)
    store_kernel<D><<<blocks, kStoreThreads, 0, stream>>>(p);
  else
    store_kernel_indirect<D><<<dim3(blocks, 1, static_cast<unsigned>(batch.count)), kStoreThreads, 0, stream>>>(
        dp, batch.stride);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_store(const StoreParams& p, const StoreParams* dp, cudaStream_t stream, BatchSpan batch) {
  // A batch holds one engine's sequences: one geometry, one dtype (the host struct's).
  return p.kv_dtype == KvDtype::bf16 ? launch_store_as<KvDtype::bf16>(p, dp, stream, batch)
                                     : launch_store_as<KvDtype::f16>(p, dp, stream, batch);
}

cudaError_t launch_poison(KvWord* dst, std::int64_t n, KvDtype dtype, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  // Enough blocks to cover a large plane in a few grid-stride passes.
  constexpr std::int64_t kMaxBlocks = 4096;
  const std::int64_t want = (n + kPoisonThreads - 1) / kPoisonThreads;
  const unsigned blocks = static_cast<unsigned>(want < kMaxBlocks ? want : kMaxBlocks);
  // Unwritten rows hold a quiet NaN of the plane's dtype: whoever reads one is poisoned.
  poison_kernel<<<blocks, kPoisonThreads, 0, stream>>>(dst, n, kv_quiet_nan(dtype));
  return cudaGetLastError();
}

}  // namespace ladder::cuda_detail
