// Internal: how the device-neutral entry points reach each device. The CUDA side is defined in
// src/cuda/ when the build has CUDA, and by src/nocuda/ (clear no_device errors) otherwise.
#pragma once

#include <memory>

#include "ladder/attention.hpp"
#include "ladder/engine.hpp"

namespace ladder::detail {

Result<std::unique_ptr<Engine>> create_cpu_engine(const Geometry& g, const EngineOptions& opt);
Result<std::unique_ptr<Engine>> create_cuda_engine(const Geometry& g, const EngineOptions& opt);
// N1 for a whole token (TokenIO layout, engine.hpp): the opt-in finite check over q (when
// with_q), k and v of every layer, and the range counters of the same values.
Status check_token_finite(const Geometry& g, const TokenIO& io, bool with_q);
void count_token_range(const Geometry& g, const TokenIO& io, bool with_q, RangeStats& stats);
// Whether an engine created with `opt` runs the finite check.
bool finite_check_on(const EngineOptions& opt);

Status cuda_attend_layer(Route r, HostPlane& plane, int position, int slot, const HeadShape& shape,
                         const LayerIO& io);

}  // namespace ladder::detail
