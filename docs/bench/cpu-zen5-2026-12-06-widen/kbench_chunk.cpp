// run_chunk_lanes' pattern for one KV head on a growing plane, widening and asks inside the kernels.
// Built as it is: change 56's (K widened inside the kernels, the V pass on the plane rows, o
// heads-major), against a library of change 56 or later. With -DLADDER_BEFORE_CHANGE56: main's at
// cde8184 (the scores widen their V rows, the V pass the next chunk's K rows from a V tile), against
// that commit's library. Arguments: tokens [ask 0|1] [widen 0|1] [pad floats between K sub-blocks].
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "cpu/producer_fast_avx512.hpp"
using namespace ladder::cpu::detail;
using ladder::KvWord;
int main(int argc, char** argv) {
  const long tokens = std::atol(argv[1]);  // plane rows walked (cycled)
  const int askmode = argc > 2 ? std::atoi(argv[2]) : 1;  // 0: no asks, 1: L1 asks
  const int widenmode = argc > 3 ? std::atoi(argv[3]) : 1;  // 0: no widening
  const int pad = argc > 4 ? std::atoi(argv[4]) : 0;  // floats between sub-blocks of the K tile
  const int hd = 128, T = 64;
  std::vector<KvWord> K(tokens * 128), V(tokens * 128);
  for (auto& x : K) x = 0x3000 + rand() % 1024;
  for (auto& x : V) x = 0x3000 + rand() % 1024;
  alignas(64) static float qt[128 * 16], tiles[2 * 64 * 128 + 4 * 4096], wt[64 * 16], ot[128 * 16], m[16], s[16];
  float* ktile = tiles; float* vtile = tiles + 64 * 128;
  for (auto& x : qt) x = (rand() % 1000) / 1000.0f - 0.5f;
  for (auto& x : tiles) x = 0.01f;
  for (auto& x : ot) x = 0;
  for (int h = 0; h < 16; ++h) { m[h] = -INFINITY; s[h] = 0; }
  const long chunks = tokens / T;
  const long total_chunks = 4 * 65536 / T;  // 262144 tokens processed
  for (int round = 0; round < 3; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (long cc = 0; cc < total_chunks; ++cc) {
      const long c = cc % chunks, nc = (cc + 1) % chunks;
      const KvWord* kc = K.data() + c * T * 128; const KvWord* vc = V.data() + c * T * 128;
      const KvWord* kn = K.data() + nc * T * 128; const KvWord* vn = V.data() + nc * T * 128;
      LineQueue lines; lines.into_l1 = true; WidenQueue widen;
      const KvWord* vrow[64];
      for (int i = 0; i < 64; ++i) vrow[i] = vc + i * 128;
      (void)vrow, (void)vtile;
      for (int b = 0; b < T; b += 16) {
        lines.count = 0;
        if (askmode) {
          const KvWord* src = b + 16 < T ? vc + (b + 16) * 128 : kn;
          for (int i = 0; i < 16; ++i) lines.rows[i] = src + i * 128;
          lines.count = 16 * LineQueue::kLinesPerRow;
        }
        widen.vectors = 0;
#if defined(LADDER_BEFORE_CHANGE56)
        if (widenmode) {
          for (int i = 0; i < 16; ++i) { widen.src[i] = vc + (b + i) * 128; widen.dst[i] = vtile + (b + i) * 128; }
          widen.vectors = 16 * WidenQueue::kVectorsPerRow;
        }
#else
        if (widenmode && b + 16 < T) {
          for (int i = 0; i < 16; ++i) { widen.src[i] = kc + (b + 16 + i) * 128; widen.dst[i] = ktile + (b + 16 + i) * 128 + (b / 16 + 1) * pad; }
          widen.vectors = 16 * WidenQueue::kVectorsPerRow;
        }
#endif
        score_rows_heads_in_lanes(qt, hd, ktile + b * 128 + b / 16 * pad, 0.088f, wt + b * 16, lines, widen);
      }
#if defined(LADDER_BEFORE_CHANGE56)
      fold_heads_in_lanes(wt, T, m, s, ot, hd);
#else
      fold_heads_in_lanes(wt, T, m, s, ot, hd, LaneO::heads_major);
#endif
      lines.count = 0; widen.vectors = 0;
      if (askmode) {
        for (int i = 0; i < 48; ++i) lines.rows[i] = kn + (16 + i) * 128;
        for (int i = 0; i < 16; ++i) lines.rows[48 + i] = vn + i * 128;
        lines.count = 64 * LineQueue::kLinesPerRow;
      }
#if defined(LADDER_BEFORE_CHANGE56)
      constexpr int kNextRows = 64;  // the whole next chunk's K rows
#else
      constexpr int kNextRows = 16;  // its first sub-block's
#endif
      if (widenmode) {
        for (int i = 0; i < kNextRows; ++i) { widen.src[i] = kn + i * 128; widen.dst[i] = ktile + i * 128; }
        widen.vectors = kNextRows * WidenQueue::kVectorsPerRow;
      }
#if defined(LADDER_BEFORE_CHANGE56)
      accumulate_heads_in_lanes(ot, hd, wt, vtile, 128, T, lines, widen);
#else
      accumulate_rows_heads_in_lanes(ot, hd, wt, vrow, T, nullptr, ladder::KvDtype::f16, lines, widen);
#endif
    }
    auto t1 = std::chrono::steady_clock::now();
    double f = 2.0 * 16 * 128 * T * total_chunks;
    double sec = std::chrono::duration<double>(t1 - t0).count();
    std::printf("tokens %ld ask %d widen %d: %.1f GFMA/s, %.1f GB/s of rows  [%g]\n", tokens, askmode, widenmode, f / sec / 1e9,
                512.0 * T * total_chunks / sec / 1e9, ot[3] + s[2]);
  }
}
