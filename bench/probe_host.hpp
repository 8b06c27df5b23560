// Host side of both GPU probes (bench/gpu_stream_probe.cu, bench/gpu_wgmma_probe.cu): a CUDA
// call checked or the probe exits, the driver's tensor-map encoder, a token-major plane's 2-D
// tensor map, and the median time of a launch.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#define PROBE_CHECK(x)                                                                                    \
  do {                                                                                                    \
    cudaError_t e_ = (x);                                                                                 \
    if (e_ != cudaSuccess) {                                                                              \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));            \
      std::exit(1);                                                                                       \
    }                                                                                                     \
  } while (0)

namespace probe_host {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled through the runtime (no link against the driver library); exits if absent.
inline EncodeTiled get_encode() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  PROBE_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || fn == nullptr) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
    std::exit(1);
  }
  return reinterpret_cast<EncodeTiled>(fn);
}

// A token-major plane of `rows` rows of `row_elems` 2-byte elements (all KV heads of a token side
// by side), read in boxes of box_cols elements x box_rows rows with the 128-byte swizzle.
inline CUtensorMap token_major_map(EncodeTiled encode, CUtensorMapDataType type, const void* base, std::int64_t rows,
                                   int row_elems, int box_cols, int box_rows) {
  constexpr int kElemBytes = 2;
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(row_elems), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_elems) * kElemBytes};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t unit[2] = {1, 1};
  const CUresult r = encode(&map, type, 2, const_cast<void*>(base), dims, strides, box, unit,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", static_cast<int>(r));
    std::exit(1);
  }
  return map;
}

// The median over `reps` of one launch's time between two events, after one untimed launch.
// `launch` takes the launch's index (0 the untimed one; a probe rotates its buffers by it) or
// nothing.
template <typename Launch>
float median_us(int reps, Launch launch) {
  const auto run = [&](int i) {
    if constexpr (std::is_invocable_v<Launch, int>)
      launch(i);
    else
      launch();
  };
  cudaEvent_t a, b;
  PROBE_CHECK(cudaEventCreate(&a));
  PROBE_CHECK(cudaEventCreate(&b));
  run(0);
  PROBE_CHECK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    PROBE_CHECK(cudaEventRecord(a));
    run(i + 1);
    PROBE_CHECK(cudaEventRecord(b));
    PROBE_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    PROBE_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0f);
  }
  PROBE_CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  PROBE_CHECK(cudaEventDestroy(a));
  PROBE_CHECK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

}  // namespace probe_host
