// Pieces of `ladder bench` shared by the GPU and CPU protocols.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <random>

#include <fmt/format.h>

#include "bench.hpp"
#include "ladder/reference.hpp"

namespace ladder::bench {

namespace {
// Enough sets to pass 4x L2 at depth 2048 (2 MB per plane) without a runaway graph.
constexpr int kMaxRotationSets = 256;
}  // namespace

std::string case_name(const LayerCase& c) { return fmt::format("{}/{}", route_name(c.route), plane_kind_name(c.plane)); }

std::vector<LayerCase> all_layer_cases() {
  return {{Route::splitk, PlaneKind::ring},
          {Route::vec, PlaneKind::ring},
          {Route::staged, PlaneKind::ring},
          {Route::vec, PlaneKind::growing},
          {Route::interleaved, PlaneKind::growing}};
}

std::int64_t layer_bytes(const Geometry& g, int visible) {
  const std::int64_t row = g.kv_bytes_per_token_layer();  // K and V, f16, all KV heads
  const std::int64_t q_out = std::int64_t{2} * g.n_heads * g.head_dim * 4;
  const std::int64_t cur_kv = std::int64_t{2} * g.n_kv_heads * g.head_dim * 4;
  return row * visible + row + q_out + cur_kv;
}

PlaneConfig layer_plane_config(const Geometry& g, PlaneKind kind, int depth) {
  PlaneConfig cfg;
  cfg.kind = kind;
  cfg.n_kv_heads = g.n_kv_heads;
  cfg.head_dim = g.head_dim;
  cfg.capacity = depth;
  cfg.window = kind == PlaneKind::ring ? depth : 0;
  cfg.max_context = 2 * depth + 1;  // room for the ring to wrap past `depth`
  return cfg;
}

// A quarter window past full: the ring has wrapped, its origin is mid-plane.
int layer_position(PlaneKind kind, int depth) { return kind == PlaneKind::ring ? depth + depth / 4 : depth - 1; }

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::vector<std::uint16_t> random_halfs(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::uint16_t> h(n);
  for (auto& x : h) x = f32_to_f16(u(gen));
  return h;
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> f(n);
  for (auto& x : f) x = u(gen);
  return f;
}

int rotation_sets(std::int64_t set_bytes, std::int64_t cache_bytes, double factor) {
  const double need = factor * static_cast<double>(cache_bytes) / static_cast<double>(std::max<std::int64_t>(set_bytes, 1));
  return std::clamp(static_cast<int>(std::ceil(need)), 1, kMaxRotationSets);
}

}  // namespace ladder::bench
