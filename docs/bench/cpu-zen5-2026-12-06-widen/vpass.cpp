// V pass forms: (a) the library's heads-in-lanes pass on widened rows (+ widening the next K rows
// inside it), (b) heads in registers, each V vector converted from the f16 row in the FMA's loop.
#include <immintrin.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "cpu/producer_fast_avx512.hpp"
using namespace ladder::cpu::detail;
using ladder::KvWord;
// o [16][128] head-major; w [64][16] token-major; v rows f16 [n][128].
__attribute__((target("avx512f,f16c"), noinline)) void vpass_rows(float* o, const float* wt, const KvWord* v, int n) {
  for (int d0 = 0; d0 < 128; d0 += 16) {
    __m512 acc[16];
#pragma GCC unroll 16
    for (int h = 0; h < 16; ++h) acc[h] = _mm512_loadu_ps(o + h * 128 + d0);
#pragma GCC unroll 2
    for (int t = 0; t < n; ++t) {
      const __m512 vv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + t * 128 + d0)));
      const float* w = wt + t * 16;
#pragma GCC unroll 16
      for (int h = 0; h < 16; ++h) acc[h] = _mm512_fmadd_ps(_mm512_set1_ps(w[h]), vv, acc[h]);
    }
#pragma GCC unroll 16
    for (int h = 0; h < 16; ++h) _mm512_storeu_ps(o + h * 128 + d0, acc[h]);
  }
}
int main(int argc, char** argv) {
  const long tokens = std::atol(argv[1]);
  std::vector<KvWord> K(tokens * 128), V(tokens * 128);
  for (auto& x : K) x = 0x3000 + rand() % 1024;
  for (auto& x : V) x = 0x3000 + rand() % 1024;
  alignas(64) static float tiles[2 * 64 * 128], wt[64 * 16], ot[128 * 16], o[16 * 128];
  float* ktile = tiles; float* vtile = tiles + 64 * 128;
  for (auto& x : tiles) x = 0.01f;
  for (auto& x : wt) x = (rand() % 1000) / 1000.0f;
  const long chunks = tokens / 64, total = 4096;
  for (int round = 0; round < 3; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (long cc = 0; cc < total; ++cc) {
      const long c = cc % chunks, nc = (cc + 1) % chunks;
      LineQueue lines; WidenQueue widen;
      const KvWord* kn = K.data() + nc * 64 * 128;
      for (int i = 0; i < 64; ++i) { widen.src[i] = kn + i * 128; widen.dst[i] = ktile + i * 128; }
      widen.vectors = 64 * WidenQueue::kVectorsPerRow;
      accumulate_heads_in_lanes(ot, 128, wt, vtile, 128, 64, lines, widen);
    }
    auto t1 = std::chrono::steady_clock::now();
    for (long cc = 0; cc < total; ++cc) {
      const long c = cc % chunks;
      LineQueue lines; WidenQueue widen;
      accumulate_heads_in_lanes(ot, 128, wt, vtile, 128, 64, lines, widen);
    }
    auto t2 = std::chrono::steady_clock::now();
    for (long cc = 0; cc < total; ++cc) {
      const long c = cc % chunks;
      vpass_rows(o, wt, V.data() + c * 64 * 128, 64);
    }
    auto t3 = std::chrono::steady_clock::now();
    const double f = 16.0 * 128 * 64 * total;
    auto g = [&](auto a, auto b) { return f / std::chrono::duration<double>(b - a).count() / 1e9; };
    std::printf("tokens %ld: lanes+widen K %.1f, lanes no widen %.1f, rows cvt %.1f GFMA/s [%g %g]\n", tokens, g(t0, t1), g(t1, t2), g(t2, t3), ot[7], o[9]);
  }
}
