// The FMA forms of the fast producer's heads-in-lanes kernels on one core: 16 accumulators,
// 16 FMAs per step, with register operands (the bench's FMA probe) or one broadcast load each
// (the kernels' form). g++ -O2 fma_forms.cpp -o fma_forms && ./fma_forms (docs/perf.md, 2026-12-04).
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <vector>
// 16 independent accumulators; per step 16 FMAs: (a) register operands, (b) one broadcast load each.
__attribute__((target("avx512f"), noinline)) float run_reg(int steps, const float* x) {
  __m512 acc[16]; for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  __m512 q = _mm512_set1_ps(1.0001f); __m512 k[16]; for (int i = 0; i < 16; ++i) k[i] = _mm512_set1_ps(x[i]);
  for (int s = 0; s < steps; ++s) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(q, k[i], acc[i]);
    asm volatile("" : "+v"(q));
  }
  __m512 t = acc[0]; for (int i = 1; i < 16; ++i) t = _mm512_add_ps(t, acc[i]);
  return _mm512_reduce_add_ps(t);
}
__attribute__((target("avx512f"), noinline)) float run_bcast(int steps, const float* x, int stride) {
  __m512 acc[16]; for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  __m512 q = _mm512_set1_ps(1.0001f);
  for (int s = 0; s < steps; ++s) {
    const float* kd = x + (s & 127);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(q, _mm512_set1_ps(kd[i * stride]), acc[i]);
  }
  __m512 t = acc[0]; for (int i = 1; i < 16; ++i) t = _mm512_add_ps(t, acc[i]);
  return _mm512_reduce_add_ps(t);
}
int main() {
  std::vector<float> x(16 * 136 + 256, 0.5f);
  const int steps = 20000000;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now(); float a = run_reg(steps, x.data());
    auto t1 = std::chrono::steady_clock::now(); float b = run_bcast(steps, x.data(), 136);
    auto t2 = std::chrono::steady_clock::now();
    double ra = 16.0 * 16 * steps / std::chrono::duration<double>(t1 - t0).count() / 1e9;
    double rb = 16.0 * 16 * steps / std::chrono::duration<double>(t2 - t1).count() / 1e9;
    std::printf("register operands %.1f GFMA/s, broadcast loads %.1f GFMA/s (%g %g)\n", ra, rb, a, b);
  }
}
