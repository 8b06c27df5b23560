// The CUDA conversion kernels of device_convert_cuda.cpp, with a plain C++ interface so that
// the host code needs no CUDA headers beyond the runtime's. Each launches one grid on `stream`
// (a cudaStream_t) and returns the launch's cudaError_t as an int (0: success).
#pragma once

#include <cstddef>

namespace ladder::py::kernels {

// element: 1 = float16, 2 = bfloat16 (Elem's 16-bit members).
int widen_to_f32(const void* src, int element, float* dst, std::size_t n, void* stream);
int narrow_from_f32(const float* src, int element, void* dst, std::size_t n, void* stream);

}  // namespace ladder::py::kernels
