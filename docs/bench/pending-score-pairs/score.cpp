// Score step forms on cached data: A = today's (16 token accumulators, q vector of 16 heads, one
// embedded 32-bit broadcast per FMA); B = pairs (lanes = 8 heads x 2 dims, a 64-bit broadcast
// shared by two head groups, 8 tokens x 2 head groups accumulators).
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
constexpr int HD = 128, T = 64, H = 16;
alignas(64) float qt[HD * H];     // [d][h]
alignas(64) float qp[HD / 2][2][16];  // [dpair][hgroup][h8 x 2]
alignas(64) float k[T * HD];       // [t][d]
alignas(64) float out[T * H];
__attribute__((target("avx512f"), noinline)) void formA() {
  for (int t0 = 0; t0 < T; t0 += 16) {
    __m512 acc[16];
    for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
    const float* kr = k + t0 * HD;
#pragma GCC unroll 4
    for (int d = 0; d < HD; ++d) {
      const __m512 q = _mm512_load_ps(qt + d * H);
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) acc[t] = _mm512_fmadd_ps(q, _mm512_set1_ps(kr[t * HD + d]), acc[t]);
    }
    for (int t = 0; t < 16; ++t) _mm512_store_ps(out + (t0 + t) * H, acc[t]);
  }
}
__attribute__((target("avx512f"), noinline)) void formB() {
  for (int t0 = 0; t0 < T; t0 += 8) {
    __m512 a0[8], a1[8];
    for (int t = 0; t < 8; ++t) a0[t] = a1[t] = _mm512_setzero_ps();
    const float* kr = k + t0 * HD;
#pragma GCC unroll 2
    for (int dp = 0; dp < HD / 2; ++dp) {
      const __m512 q0 = _mm512_load_ps(qp[dp][0]);
      const __m512 q1 = _mm512_load_ps(qp[dp][1]);
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) {
        const __m512 kb = _mm512_castpd_ps(_mm512_set1_pd(*reinterpret_cast<const double*>(kr + t * HD + 2 * dp)));
        a0[t] = _mm512_fmadd_ps(q0, kb, a0[t]);
        a1[t] = _mm512_fmadd_ps(q1, kb, a1[t]);
      }
    }
    for (int t = 0; t < 8; ++t) { _mm512_store_ps(out + (t0 + t) * H, a0[t]); _mm512_store_ps(out + (t0 + t) * H + 8 * 0, _mm512_add_ps(a0[t], a1[t])); }
  }
}
template <class F> double run(F f, int iters) {
  double best = 1e30;
  for (int r = 0; r < 30; ++r) {
    auto s = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) { f(); asm volatile("" ::: "memory"); }
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
    if (dt < best) best = dt;
  }
  return best;
}
__attribute__((target("avx512f"), noinline)) void peak(int n) {
  __m512 a[12]; for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(i);
  const __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.999f);
  for (int j = 0; j < n; ++j)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], x, y);
  float s = 0; for (int i = 0; i < 12; ++i) s += _mm512_reduce_add_ps(a[i]); if (s == 1234.5f) std::puts("x");
}
int main() {
  for (auto& v : qt) v = rand() / float(RAND_MAX);
  for (auto& v : qp[0][0]) v = rand() / float(RAND_MAX);
  for (int i = 0; i < (HD/2)*32; ++i) (&qp[0][0][0])[i] = rand() / float(RAND_MAX);
  for (auto& v : k) v = rand() / float(RAND_MAX);
  const int iters = 20000;
  const double fmas = double(T) * H * HD * iters;  // lane-FMAs
  double tp = run([] { peak(1000); }, 20);
  double peak_rate = 1000.0 * 12 * 16 * 20 / tp;
  double ta = run(formA, iters), tb = run(formB, iters);
  std::printf("peak %.1f GFMA/s; A %.1f (%.2f); B %.1f (%.2f)\n", peak_rate / 1e9, fmas / ta / 1e9, fmas / ta / peak_rate,
              fmas / tb / 1e9, fmas / tb / peak_rate);
}
