// Shared device-side helpers for the CUDA kernel families: lane layout, f16 row loads and
// stores, launch checks. Every kernel here is specialised for head_dim 128 (the dispatcher
// refuses other head_dims with ErrorCode::unsupported before anything launches).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ladder/kernel_params.hpp"
#include "ladder/nonfinite.hpp"
#include "ladder/softmax.hpp"

namespace ladder::cuda_detail {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullMask = 0xffffffffu;
// The only head_dim the kernels support: 32 lanes x 4 dims (THE PRODUCER DAG, step 2).
inline constexpr int kHeadDim = 128;
inline constexpr int kDimsPerLane = kHeadDim / kWarpSize;
static_assert(kDimsPerLane == 4, "each lane owns one 4-dim chunk of a 128-dim row");

// The batched indirect form (kernels.hpp, BatchSpan): the parameter struct of grid slice z is
// `stride` bytes after slice z - 1's.
template <class T>
__device__ __forceinline__ const T& batch_entry(const T* first, std::size_t stride) {
  return *reinterpret_cast<const T*>(reinterpret_cast<const char*>(first) + blockIdx.z * stride);
}

struct Float4 {
  float x[kDimsPerLane];
};

// Four f16 plane elements as loaded (8 bytes), widened later: lets a warp issue a whole block's
// loads before the first is used.
using RawRow = uint2;

__device__ __forceinline__ RawRow load_raw4(const std::uint16_t* src) { return *reinterpret_cast<const uint2*>(src); }

__device__ __forceinline__ Float4 widen_half4(RawRow raw) {
  const __half2 lo = *reinterpret_cast<const __half2*>(&raw.x);
  const __half2 hi = *reinterpret_cast<const __half2*>(&raw.y);
  const float2 a = __half22float2(lo);
  const float2 b = __half22float2(hi);
  return Float4{{a.x, a.y, b.x, b.y}};
}

__device__ __forceinline__ Float4 load_float4(const float* src) {
  const float4 f = *reinterpret_cast<const float4*>(src);
  return Float4{{f.x, f.y, f.z, f.w}};
}

// N1's range rule (nonfinite.hpp) on four f32 values read unrounded (q, the current token).
__device__ __forceinline__ Float4 in_range4(const Float4& f) {
  return Float4{{kv_range(f.x[0]), kv_range(f.x[1]), kv_range(f.x[2]), kv_range(f.x[3])}};
}

// The store: the range rule, then f32 -> f16 round to nearest even (ladder::kv_to_f16 on the
// host).
__device__ __forceinline__ void store_half4(std::uint16_t* dst, const Float4& f) {
  const __half2 lo = __floats2half2_rn(kv_range(f.x[0]), kv_range(f.x[1]));
  const __half2 hi = __floats2half2_rn(kv_range(f.x[2]), kv_range(f.x[3]));
  uint2 raw;
  raw.x = *reinterpret_cast<const unsigned*>(&lo);
  raw.y = *reinterpret_cast<const unsigned*>(&hi);
  *reinterpret_cast<uint2*>(dst) = raw;
}

__device__ __forceinline__ void store_zero4(std::uint16_t* dst) { *reinterpret_cast<uint2*>(dst) = make_uint2(0u, 0u); }

// Copies 4 f16 elements bit-exactly (staging and padding never round).
__device__ __forceinline__ void copy_half4(std::uint16_t* dst, const std::uint16_t* src) {
  *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
}

}  // namespace ladder::cuda_detail
