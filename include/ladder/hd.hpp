// Host/device qualifier so the small shared headers (addressing, softmax state, schedule)
// compile unchanged into the CPU library and the CUDA kernels.
#pragma once
#if defined(__CUDACC__)
#define LADDER_HD __host__ __device__ __forceinline__
#else
#define LADDER_HD inline
#endif
