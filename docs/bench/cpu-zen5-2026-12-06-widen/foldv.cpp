// The fold's exps apart (a loop before the V pass), or inside the V pass's first dim block: each at
// the step that reads its weights, or eight tokens ahead of it.
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
__attribute__((target("avx512f"), always_inline)) inline __m512 exp16(__m512 x) {
  const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __mmask16 too_small = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.f), _CMP_NGE_UQ);
  const __m512 xc = _mm512_min_ps(x, _mm512_setzero_ps());
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682e-6f), r);
  const float c[8] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f};
  __m512 p = _mm512_set1_ps(c[0]);
  for (int k = 1; k < 8; ++k) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c[k]));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
  y = _mm512_mask_blend_ps(too_small, y, _mm512_setzero_ps());
  return _mm512_mask_blend_ps(is_nan, y, x);
}
enum class Exps { apart, at_step, ahead };
template <Exps kWhere>
__attribute__((target("avx512f,f16c"), noinline)) void chunk(float* o, float* wt, const float* scores, const uint16_t* v, float* sums) {
  const __m512 m = _mm512_set1_ps(1.0f);
  __m512 lane[8];
  for (int l = 0; l < 8; ++l) lane[l] = _mm512_setzero_ps();
  constexpr bool kInside = kWhere != Exps::apart;
  constexpr int kAhead = kWhere == Exps::ahead ? 8 : 0;
  for (int t = 0; t < (kInside ? kAhead : 64); ++t) { const __m512 w = exp16(_mm512_sub_ps(_mm512_loadu_ps(scores + t * 16), m)); _mm512_storeu_ps(wt + t * 16, w); lane[t % 8] = _mm512_add_ps(lane[t % 8], w); }
  for (int d0 = 0; d0 < 128; d0 += 16) {
    __m512 acc[16];
    for (int h = 0; h < 16; ++h) acc[h] = _mm512_loadu_ps(o + h * 128 + d0);
#pragma GCC unroll 8
    for (int t = 0; t < 64; ++t) {
      if (kInside && d0 == 0 && t + kAhead < 64) { const int u = t + kAhead; const __m512 w = exp16(_mm512_sub_ps(_mm512_loadu_ps(scores + u * 16), m)); _mm512_storeu_ps(wt + u * 16, w); lane[u % 8] = _mm512_add_ps(lane[u % 8], w); }
      const __m512 vv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(v + t * 128 + d0)));
      const float* w = wt + t * 16;
#pragma GCC unroll 16
      for (int h = 0; h < 16; ++h) acc[h] = _mm512_fmadd_ps(_mm512_set1_ps(w[h]), vv, acc[h]);
    }
    for (int h = 0; h < 16; ++h) _mm512_storeu_ps(o + h * 128 + d0, acc[h]);
  }
  __m512 tot = _mm512_setzero_ps();
  for (int l = 0; l < 8; ++l) tot = _mm512_add_ps(tot, lane[l]);
  _mm512_storeu_ps(sums, _mm512_add_ps(_mm512_loadu_ps(sums), tot));
}
template <Exps kWhere> double rate(float* o, float* wt, const float* sc, const uint16_t* v, float* sums) {
  const int reps = 100000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) chunk<kWhere>(o, wt, sc, v, sums);
  auto t1 = std::chrono::steady_clock::now();
  return 16.0 * 128 * 64 * reps / std::chrono::duration<double>(t1 - t0).count() / 1e9;
}
int main() {
  alignas(64) static float o[16 * 128], wt[64 * 16], sc[64 * 16], sums[16];
  alignas(64) static uint16_t v[64 * 128];
  for (auto& x : sc) x = -0.001f * (rand() % 3000);
  for (auto& x : v) x = 0x3000 + rand() % 512;
  for (int r = 0; r < 3; ++r)
    std::printf("V pass GFMA/s with the exps apart %.1f, inside its first dim block at their steps %.1f, 8 tokens ahead %.1f [%g]\n",
                rate<Exps::apart>(o, wt, sc, v, sums), rate<Exps::at_step>(o, wt, sc, v, sums),
                rate<Exps::ahead>(o, wt, sc, v, sums), o[3] + sums[1]);
}
