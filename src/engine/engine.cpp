// Engine::create: validates the geometry once, then hands off to the device's engine.
#include "ladder/engine.hpp"

#include "engine/backends.hpp"

#include <fmt/format.h>

namespace ladder {

const char* device_name(Device d) {
  switch (d) {
    case Device::cpu: return "cpu";
    case Device::cuda: return "cuda";
  }
  return "?";
}

Result<std::unique_ptr<Engine>> Engine::create(const Geometry& g, const EngineOptions& opt) {
  LADDER_TRY(g.validate());
  if (opt.initial_growing_capacity < 0)
    return make_error(ErrorCode::invalid_argument, "initial_growing_capacity must be >= 0 (0 picks the default)");
  switch (opt.device) {
    case Device::cpu: return detail::create_cpu_engine(g, opt);
    case Device::cuda: return detail::create_cuda_engine(g, opt);
  }
  return make_error(ErrorCode::invalid_argument, "unknown device");
}

namespace detail {
namespace {
std::size_t q_floats(const Geometry& g) { return static_cast<std::size_t>(g.n_layers) * g.n_heads * g.head_dim; }
std::size_t kv_floats(const Geometry& g) {
  return static_cast<std::size_t>(g.n_layers) * g.n_kv_heads * g.head_dim;
}
}  // namespace

Status check_token_finite(const Geometry& g, const TokenIO& io, bool with_q) {
  const std::size_t q_layer = static_cast<std::size_t>(g.n_heads) * g.head_dim;
  const std::size_t kv_layer = static_cast<std::size_t>(g.n_kv_heads) * g.head_dim;
  for (int layer = 0; layer < g.n_layers; ++layer) {
    const std::size_t l = static_cast<std::size_t>(layer);
    Status s = with_q ? check_finite("q", io.q + l * q_layer, q_layer) : Status{};
    if (s.ok()) s = check_finite("k", io.k + l * kv_layer, kv_layer);
    if (s.ok()) s = check_finite("v", io.v + l * kv_layer, kv_layer);
    if (!s.ok()) return make_error(s.code(), fmt::format("layer {}: {}", layer, s.message()));
  }
  return {};
}

void count_token_range(const Geometry& g, const TokenIO& io, bool with_q, RangeStats& stats) {
  if (with_q) count_range(io.q, q_floats(g), stats);
  count_range(io.k, kv_floats(g), stats);
  count_range(io.v, kv_floats(g), stats);
}

bool finite_check_on(const EngineOptions& opt) { return opt.check_finite || check_finite_from_env(); }

}  // namespace detail
}  // namespace ladder
