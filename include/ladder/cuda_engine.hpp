// The engine on the CUDA device with chosen device options (the benches and GPU tests compare
// graph replay with eager launches, and the producers).
#pragma once

#include <memory>

#include "ladder/cuda/cuda_backend.hpp"
#include "ladder/engine.hpp"

namespace ladder::cuda {

// Engine::create on create_backend(g, copt).
Result<std::unique_ptr<Engine>> create_engine(const Geometry& g, const EngineOptions& opt,
                                              const CudaEngineOptions& copt);

// Counters of the CUDA device's graph cache (for tests and benches); zero for other devices.
using GraphStats = DeviceStats;
inline GraphStats graph_stats(const Engine& engine) { return engine.device_stats(); }

}  // namespace ladder::cuda
