// The score loop (16 tokens x 128 dims, heads in lanes) with one extra op group per dim step.
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
template <int kMode>
__attribute__((target("avx512f,f16c"), noinline)) void score(const float* qt, const float* krows, float* wt,
                                                            const uint16_t* src, float* dst, __m512& sink) {
  __m512 acc[16];
  for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
  __m512 x = sink;
#pragma GCC unroll 2
  for (int d = 0; d < 128; ++d) {
    if constexpr (kMode == 1) _mm512_storeu_ps(dst + d * 16, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(src + d * 16))));
    if constexpr (kMode == 2) x = _mm512_add_ps(x, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(src + d * 16))));
    if constexpr (kMode == 3) _mm256_storeu_si256((__m256i*)(dst + d * 16), _mm256_loadu_si256((const __m256i*)(src + d * 16)));
    if constexpr (kMode == 4) _mm512_storeu_ps(dst + d * 16, x);
    if constexpr (kMode == 5) x = _mm512_add_ps(x, _mm512_castsi512_ps(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(src + d * 16)))));
    if constexpr (kMode == 6) _mm256_storeu_ps(dst + d * 16, _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i*)(src + d * 16))));
    if constexpr (kMode == 7) { _mm256_storeu_ps(dst + d * 16, _mm512_castps512_ps256(x)); _mm256_storeu_ps(dst + d * 16 + 8, _mm512_castps512_ps256(x)); }
    const __m512 q = _mm512_loadu_ps(qt + d * 16);
    const float* kd = krows + d;
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t) acc[t] = _mm512_fmadd_ps(q, _mm512_set1_ps(kd[t * 128]), acc[t]);
  }
  for (int t = 0; t < 16; ++t) _mm512_storeu_ps(wt + t * 16, acc[t]);
  sink = x;
}
template <int kMode>
double rate(const float* qt, const float* krows, float* wt, const uint16_t* src, float* dst) {
  __m512 sink = _mm512_setzero_ps();
  const int reps = 200000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) score<kMode>(qt, krows, wt, src, dst, sink);
  auto t1 = std::chrono::steady_clock::now();
  float s[16]; _mm512_storeu_ps(s, sink); if (s[0] == 12345.f) std::printf("!");
  return 16.0 * 16 * 128 * reps / std::chrono::duration<double>(t1 - t0).count() / 1e9;
}
int main() {
  alignas(64) static float qt[128 * 16], krows[16 * 128], wt[256], dst[128 * 16 + 64];
  alignas(64) static uint16_t src[128 * 16];
  for (auto& x : qt) x = 0.001f * (rand() % 100);
  for (auto& x : krows) x = 0.001f * (rand() % 100);
  for (auto& x : src) x = 0x3000 + rand() % 512;
  for (int r = 0; r < 3; ++r)
    std::printf("none %.1f | load+cvt+store64 %.1f | load+cvt %.1f | load+store32 %.1f | store64 %.1f | load+zext %.1f | load+store32(ps) %.1f | 2 x store32 %.1f GFMA/s\n",
                rate<0>(qt, krows, wt, src, dst), rate<1>(qt, krows, wt, src, dst), rate<2>(qt, krows, wt, src, dst),
                rate<3>(qt, krows, wt, src, dst), rate<4>(qt, krows, wt, src, dst), rate<5>(qt, krows, wt, src, dst),
                rate<6>(qt, krows, wt, src, dst), rate<7>(qt, krows, wt, src, dst));
}
