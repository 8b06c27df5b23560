// Host/device qualifier so the small shared headers (addressing, softmax state, schedule)
// compile unchanged into the CPU library and the CUDA kernels.
#pragma once
#if defined(__CUDACC__)
#define LADDER_HD __host__ __device__ __forceinline__
#else
#define LADDER_HD inline
#endif

// A loop a device caller needs fully unrolled (its operands live in registers, and a runtime
// index would put them in local memory); host compilers decide for themselves.
#if defined(__CUDA_ARCH__)
#define LADDER_UNROLL _Pragma("unroll")
#else
#define LADDER_UNROLL
#endif
