// Internal: how the device-neutral entry points reach each device. The CUDA side is defined in
// src/cuda/ when the build has CUDA, and by src/nocuda/ (clear no_device errors) otherwise.
#pragma once

#include <memory>

#include "ladder/attention.hpp"
#include "ladder/engine.hpp"

namespace ladder::detail {

Result<std::unique_ptr<Engine>> create_cpu_engine(const Geometry& g, const EngineOptions& opt);
Result<std::unique_ptr<Engine>> create_cuda_engine(const Geometry& g, const EngineOptions& opt);
Status cuda_attend_layer(Route r, HostPlane& plane, int position, int slot, const HeadShape& shape,
                         const LayerIO& io);

}  // namespace ladder::detail
