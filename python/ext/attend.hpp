// ladder.attend: single-layer decode attention for one route on one plane.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>
#include <string>

#include "arrays.hpp"
#include "ladder/ladder.hpp"
#include "planes.hpp"

namespace ladder::py {

// Why `r` cannot run on a plane in state `st` (empty when it can). The kernels' contracts:
// vec reads one contiguous span of >= 32-row blocks and cannot pad a token-major (ring) row;
// interleaved is for growing head-major planes; staging reorders a ring.
std::string route_refusal(Route r, const PlaneConfig& cfg, const PlaneState& st);

void attend(const std::string& route, Plane& plane, int position, int slot, const InArray& q, const InArray& k,
            const InArray& v, const OutArray& out, std::optional<std::string> device, std::uintptr_t stream);

}  // namespace ladder::py
