// Each heads-in-lanes kernel alone on cached rows, with and without a widen queue (change 56's forms).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "cpu/producer_fast_avx512.hpp"
using namespace ladder::cpu::detail;
using ladder::KvWord;
int main() {
  const int hd = 128, T = 64;
  std::vector<KvWord> K(64 * 128), V(64 * 128);
  for (auto& x : K) x = 0x3000 + rand() % 1024;
  for (auto& x : V) x = 0x3000 + rand() % 1024;
  alignas(64) static float qt[128 * 16], ktile[64 * 128 + 4096], other[32 * 128 + 4096], wt[64 * 16], o[16 * 128];
  for (auto& x : qt) x = (rand() % 1000) / 1000.0f - 0.5f;
  for (auto& x : ktile) x = 0.01f;
  for (auto& x : wt) x = (rand() % 1000) / 1000.0f;
  const KvWord* vrow[64];
  for (int i = 0; i < 64; ++i) vrow[i] = V.data() + i * 128;
  LineQueue none;
  const int reps = 20000;
  auto widen_of = [&](int rows, float* dst) { WidenQueue w; for (int i = 0; i < rows; ++i) { w.src[i] = K.data() + i * 128; w.dst[i] = dst + i * 128; } w.vectors = rows * WidenQueue::kVectorsPerRow; return w; };
  for (int round = 0; round < 3; ++round) {
    double r[9];
    for (int v = 0; v < 9; ++v) {
      const WidenQueue w0;
      const WidenQueue w16 = widen_of(16, ktile + 16 * 128);
      const WidenQueue w16v = widen_of(16, ktile);
      const WidenQueue w64 = widen_of(64, ktile);
      const WidenQueue w16o = widen_of(16, ktile + 16 * 128 + 16);
      const WidenQueue w16f = widen_of(16, ktile + 16 * 128 + 512);
      const WidenQueue w16x = widen_of(16, other + 16 * 128 + 544);
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) {
        if (v == 0) score_rows_heads_in_lanes(qt, hd, ktile, 0.088f, wt, none, w0);
        if (v == 1) score_rows_heads_in_lanes(qt, hd, ktile, 0.088f, wt, none, w16);
        if (v == 2) accumulate_rows_heads_in_lanes(o, hd, wt, vrow, T, nullptr, ladder::KvDtype::f16, none, w0);
        if (v == 3) accumulate_rows_heads_in_lanes(o, hd, wt, vrow, T, nullptr, ladder::KvDtype::f16, none, w16v);
        if (v == 4) accumulate_rows_heads_in_lanes(o, hd, wt, vrow, T, nullptr, ladder::KvDtype::f16, none, w64);
        if (v == 6) score_rows_heads_in_lanes(qt, hd, ktile, 0.088f, wt, none, w16o);
        if (v == 7) score_rows_heads_in_lanes(qt, hd, ktile, 0.088f, wt, none, w16f);
        if (v == 8) score_rows_heads_in_lanes(qt, hd, ktile, 0.088f, wt, none, w16x);
        if (v == 5) accumulate_rows_heads_in_lanes(o, hd, wt, vrow, T, nullptr, ladder::KvDtype::bf16, none, w0);
      }
      auto t1 = std::chrono::steady_clock::now();
      const double fmas = (v < 2 || v > 5 ? 16.0 * 16 * 128 : 16.0 * 128 * 64) * reps;
      r[v] = fmas / std::chrono::duration<double>(t1 - t0).count() / 1e9;
    }
    std::printf("score: %.1f, + 16 rows widened %.1f | V pass on rows: %.1f, + 16 rows widened %.1f, + 64 rows %.1f, bf16 rows %.1f | score + 16 rows at +64 B %.1f, +2 KiB %.1f, elsewhere %.1f [%g]\n",
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], o[5] + wt[3]);
  }
}
