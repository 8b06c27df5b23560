// Isolated rates of the heads-in-lanes kernels on cached tiles (no lines, no widening).
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdlib>
#include <cmath>
#include "cpu/producer_fast_avx512.hpp"
using namespace ladder::cpu::detail;
int main(int argc, char** argv) {
  const int hd = 128, T = 64;
  alignas(64) static float qt[128 * 16], ktile[64 * 128], vtile[64 * 128], wt[64 * 16], ot[128 * 16], m[16], s[16];
  for (auto& x : qt) x = (rand() % 1000) / 1000.0f - 0.5f;
  for (auto& x : ktile) x = (rand() % 1000) / 1000.0f - 0.5f;
  for (auto& x : vtile) x = (rand() % 1000) / 1000.0f - 0.5f;
  for (auto& x : ot) x = 0;
  for (int h = 0; h < 16; ++h) { m[h] = -INFINITY; s[h] = 0; }
  LineQueue lines; WidenQueue widen;
  const int reps = 20000;
  for (int round = 0; round < 3; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r)
      for (int b = 0; b < T; b += 16) score_rows_heads_in_lanes(qt, hd, ktile + b * 128, 0.088f, wt + b * 16, lines, widen);
    auto t1 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) accumulate_heads_in_lanes(ot, hd, wt, vtile, 128, T, lines, widen);
    auto t2 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) {
      for (int b = 0; b < T; b += 16) score_rows_heads_in_lanes(qt, hd, ktile + b * 128, 0.088f, wt + b * 16, lines, widen);
      fold_heads_in_lanes(wt, T, m, s, ot, hd);
      accumulate_heads_in_lanes(ot, hd, wt, vtile, 128, T, lines, widen);
    }
    auto t3 = std::chrono::steady_clock::now();
    double f = 16.0 * 128 * T * reps;
    auto g = [&](auto a, auto b, double n) { return n / std::chrono::duration<double>(b - a).count() / 1e9; };
    std::printf("score %.1f GFMA/s, accumulate %.1f GFMA/s, chunk (score+fold+acc) %.1f GFMA/s  [%g]\n", g(t0, t1, f), g(t1, t2, f), g(t2, t3, 2 * f), ot[5]);
  }
}
