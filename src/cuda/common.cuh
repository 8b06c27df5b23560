// Shared device-side helpers for the CUDA kernel families: lane layout, plane row loads and
// stores for either KV dtype (kv_dtype.hpp: a kernel is instantiated per dtype, chosen on the
// host from the plane's config), launch checks. Every kernel here is specialised for head_dim
// limits::kGpuHeadDim (the dispatcher refuses other head_dims with ErrorCode::unsupported before
// anything launches).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ladder/geometry.hpp"
#include "ladder/kernel_params.hpp"
#include "ladder/kv_dtype.hpp"
#include "ladder/nonfinite.hpp"
#include "ladder/softmax.hpp"
#include "cuda/kernels.hpp"
#include "cuda/timeline.cuh"

namespace ladder::cuda_detail {

// Programmatic dependent launch (PDL). A kernel launched with the programmatic attribute may start
// while the previous kernel of its stream still runs: pdl_wait blocks until that kernel has
// completed and its memory is visible (a no-op without the attribute). pdl_allow_dependents lets
// the next kernel start; every kernel here calls it only once every earlier kernel of its stream
// has completed (after its wait, or in a launch without the attribute), so a kernel that passed
// its wait knows the same.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void pdl_allow_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

// Tests only: the calling thread sleeps `ns` nanoseconds (arrival-order and PDL tests delay
// chosen CTAs). __nanosleep sleeps at most ~1 ms per call and may wake early: loop on the
// global timer.
__device__ inline void debug_sleep_ns(unsigned ns) {
  if (ns == 0) return;
  constexpr unsigned kMaxNap = 100000u;
  const unsigned long long t0 = global_timer_ns();
  do {
    __nanosleep(ns < kMaxNap ? ns : kMaxNap);
  } while (global_timer_ns() - t0 < ns);
}

// A launch of grid x block threads on `stream`, with PDL when `programmatic`, for
// cudaLaunchKernelEx. The config points at `attr`, which must outlive the launch call.
inline cudaLaunchConfig_t pdl_launch_config(cudaLaunchAttribute& attr, bool programmatic, dim3 grid, dim3 block,
                                            cudaStream_t stream) {
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = programmatic ? 1 : 0;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cfg;
}

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullMask = 0xffffffffu;
// The only head_dim the kernels support: 32 lanes x 4 dims (THE PRODUCER DAG, step 2).
inline constexpr int kHeadDim = limits::kGpuHeadDim;
inline constexpr int kDimsPerLane = kHeadDim / kWarpSize;
static_assert(kDimsPerLane == 4, "each lane owns one 4-dim chunk of a 128-dim row");

// The batched indirect form (kernels.hpp, BatchSpan): the parameter struct of grid slice z is
// `stride` bytes after slice z - 1's.
template <class T>
__device__ __forceinline__ const T& entry_at(const T* first, std::size_t stride, unsigned z) {
  return *reinterpret_cast<const T*>(reinterpret_cast<const char*>(first) + z * stride);
}
template <class T>
__device__ __forceinline__ const T& batch_entry(const T* first, std::size_t stride) {
  return entry_at(first, stride, blockIdx.z);
}
// The same entry, read after the PDL wait when the kernel just before is the state fetch that
// writes the entries (EntriesFrom), at once otherwise.
template <class T>
__device__ __forceinline__ T batch_entry_from(const T* first, std::size_t stride, EntriesFrom from) {
  if (from == EntriesFrom::fetch_just_before) pdl_wait();
  return batch_entry(first, stride);
}

struct Float4 {
  float x[kDimsPerLane];
};

// Four plane elements as loaded (8 bytes), widened later: lets a warp issue a whole block's
// loads before the first is used.
using RawRow = uint2;

__device__ __forceinline__ RawRow load_raw4(const KvWord* src) { return *reinterpret_cast<const uint2*>(src); }

// Four stored elements of dtype D as f32, exactly: f16 through the half intrinsics; bf16 is the
// top half of an f32, so each word moves into the upper 16 bits (the first element of a 32-bit
// pair is its low half).
template <KvDtype D>
__device__ __forceinline__ Float4 widen4(RawRow raw) {
  if constexpr (D == KvDtype::bf16) {
    constexpr unsigned kHigh = 0xffff0000u;
    constexpr int kHalfBits = 16;
    return Float4{{__uint_as_float(raw.x << kHalfBits), __uint_as_float(raw.x & kHigh),
                   __uint_as_float(raw.y << kHalfBits), __uint_as_float(raw.y & kHigh)}};
  } else {
    const __half2 lo = *reinterpret_cast<const __half2*>(&raw.x);
    const __half2 hi = *reinterpret_cast<const __half2*>(&raw.y);
    const float2 a = __half22float2(lo);
    const float2 b = __half22float2(hi);
    return Float4{{a.x, a.y, b.x, b.y}};
  }
}

__device__ __forceinline__ Float4 load_float4(const float* src) {
  const float4 f = *reinterpret_cast<const float4*>(src);
  return Float4{{f.x, f.y, f.z, f.w}};
}

// N1's range rule (nonfinite.hpp) with dtype D's bound on four f32 values read unrounded (q, the
// current token).
template <KvDtype D>
__device__ __forceinline__ Float4 in_range4(const Float4& f) {
  constexpr float r = KvTraits<D>::kRangeMax;
  return Float4{{kv_range(f.x[0], r), kv_range(f.x[1], r), kv_range(f.x[2], r), kv_range(f.x[3], r)}};
}

// The store: the range rule, then f32 -> D round to nearest even (ladder::kv_encode on the host).
// bf16 uses the host's own bit arithmetic (kv_dtype.hpp), so a stored NaN has the host's bits too.
template <KvDtype D>
__device__ __forceinline__ void store4(KvWord* dst, const Float4& f) {
  constexpr float r = KvTraits<D>::kRangeMax;
  uint2 raw;
  if constexpr (D == KvDtype::bf16) {
    constexpr int kHalfBits = 16;
    raw.x = static_cast<unsigned>(f32_to_bf16(kv_range(f.x[0], r))) |
            (static_cast<unsigned>(f32_to_bf16(kv_range(f.x[1], r))) << kHalfBits);
    raw.y = static_cast<unsigned>(f32_to_bf16(kv_range(f.x[2], r))) |
            (static_cast<unsigned>(f32_to_bf16(kv_range(f.x[3], r))) << kHalfBits);
  } else {
    const __half2 lo = __floats2half2_rn(kv_range(f.x[0], r), kv_range(f.x[1], r));
    const __half2 hi = __floats2half2_rn(kv_range(f.x[2], r), kv_range(f.x[3], r));
    raw.x = *reinterpret_cast<const unsigned*>(&lo);
    raw.y = *reinterpret_cast<const unsigned*>(&hi);
  }
  *reinterpret_cast<uint2*>(dst) = raw;
}

// Where a producer takes a route's current token (the row appended this step) from.
enum class CurrentRow {
  plane,    // the plane, like every row (splitk, vec: the store ran before the producer)
  split,    // the f32 activations, split hi + lo, never rounded to the plane's dtype; the
            // producer also stores the row into the plane (interleaved)
  rounded,  // the activations rounded to the plane's dtype as the store rounds them; the kernel
            // stores the row itself (fused.cu)
};

// The current token's K and V (cur_k/cur_v f32, the range rule, then dtype D) into the plane at
// store_slot: lane l stores dims 4l..4l+3 of KV head kvh (one warp per KV head).
template <KvDtype D>
__device__ __forceinline__ void store_current_row(const ProducerParams& p, int kvh, int lane) {
  const int d0 = lane * kDimsPerLane;
  const std::int64_t at = p.rows.strides.offset(p.store_slot, kvh) + d0;
  store4<D>(p.store_k + at, load_float4(p.cur_k + kvh * kHeadDim + d0));
  store4<D>(p.store_v + at, load_float4(p.cur_v + kvh * kHeadDim + d0));
}

__device__ __forceinline__ void store_zero4(KvWord* dst) { *reinterpret_cast<uint2*>(dst) = make_uint2(0u, 0u); }

// Copies 4 elements bit-exactly, either dtype (staging and padding never round).
__device__ __forceinline__ void copy4(KvWord* dst, const KvWord* src) {
  *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
}

}  // namespace ladder::cuda_detail
