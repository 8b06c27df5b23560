// cuda::create_engine: the one engine on the CUDA device with the caller's device options.
#include "ladder/cuda_engine.hpp"

namespace ladder::cuda {

Result<std::unique_ptr<Engine>> create_engine(const Geometry& g, const EngineOptions& opt,
                                              const CudaEngineOptions& copt) {
  LADDER_TRY(g.validate());
  Result<std::unique_ptr<DeviceBackend>> dev = create_backend(g, copt);
  if (!dev) return dev.status();
  return Engine::create(g, opt, std::move(dev).value());
}

}  // namespace ladder::cuda
