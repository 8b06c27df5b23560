// A single-threaded driver for instruction counts of the CPU producers (issue 11): one Muse
// Glimmer layer (32 query heads, 2 KV heads, head_dim 128) at DEPTH visible tokens, attended
// REPS times through attend_layer on one worker, on a cached plane. Run it under
// `valgrind --tool=callgrind --toggle-collect='ladder::attend_layer*'` (bench/cpu_count.sh) so
// the count covers the attention calls only; wall time is printed too but is not the measure.
//
//   cpu_fast_count DEPTH vec|splitk|interleaved REPS fast|exact
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ladder/attention.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/reference.hpp"

int main(int argc, char** argv) {
  using namespace ladder;
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DEPTH vec|splitk|interleaved REPS fast|exact\n", argv[0]);
    return 2;
  }
  constexpr int kHeads = 32, kKvHeads = 2, kHeadDim = 128;
  const int depth = std::atoi(argv[1]);
  const std::string route_name = argv[2];
  const int reps = std::atoi(argv[3]);
  const Route route = route_name == "splitk" ? Route::splitk : route_name == "interleaved" ? Route::interleaved : Route::vec;
  Result<cpu::CpuProducer> prod = cpu::parse_cpu_producer(argv[4]);
  if (depth < 2 || reps < 1 || !prod.ok()) return 2;
  cpu::set_producer(*prod);
  if (!cpu::set_threads(1).ok()) return 1;

  // Growing plane filled to depth for vec and interleaved; a ring wrapped a quarter past full
  // for splitk (the bench's layer cases).
  const bool ring = route == Route::splitk;
  PlaneConfig cfg;
  cfg.kind = ring ? PlaneKind::ring : PlaneKind::growing;
  cfg.n_kv_heads = kKvHeads;
  cfg.head_dim = kHeadDim;
  cfg.capacity = depth;
  cfg.window = ring ? depth : 0;
  cfg.max_context = 2 * depth + 1;
  const int position = ring ? depth + depth / 4 : depth - 1;
  HostPlane plane = HostPlane::create(cfg).value();
  for (int p = 0; p < position; ++p)
    if (!plane.append(p).ok()) return 1;
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (std::size_t i = 0; i < plane.elements(); ++i) {
    plane.k()[i] = f32_to_f16(u(gen));
    plane.v()[i] = f32_to_f16(u(gen));
  }
  const int slot = plane.append(position).value();
  std::vector<float> acts((kHeads + 2 * kKvHeads) * kHeadDim);
  for (float& x : acts) x = u(gen);
  std::vector<float> out(kHeads * kHeadDim);
  const HeadShape shape{kHeads, kKvHeads, kHeadDim, 1.0f / std::sqrt(static_cast<float>(kHeadDim))};
  const LayerIO io{acts.data(), acts.data() + kHeads * kHeadDim, acts.data() + (kHeads + kKvHeads) * kHeadDim,
                   out.data()};
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!attend_layer(Device::cpu, route, plane, position, slot, shape, io).ok()) return 1;
    best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  const double fmas = 2.0 * kHeads * depth * kHeadDim;
  std::printf("depth %d %s %s: best of %d %.1f us, %.0f FMAs per call (%.0f 8-wide FMA instructions), out[0] %g\n",
              depth, route_name.c_str(), argv[4], reps, best, fmas, fmas / 8, out[0]);
  return 0;
}
