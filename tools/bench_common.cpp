// Pieces of `ladder bench` shared by the GPU and CPU protocols.
#include <ctime>

#include <fmt/format.h>

#include "bench.hpp"

namespace ladder::bench {

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

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace ladder::bench
