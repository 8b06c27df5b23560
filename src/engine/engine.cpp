// Engine::create: validates the geometry once, then hands off to the device's engine.
#include "ladder/engine.hpp"

#include "engine/backends.hpp"

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

}  // namespace ladder
