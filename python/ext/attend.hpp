// ladder.attend: single-layer decode attention for one route on one plane.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>
#include <string>

#include "arrays.hpp"
#include "ladder/ladder.hpp"
#include "planes.hpp"

namespace ladder::py {

// The query heads q carries, checked (ShapeError): q is (n_heads, head_dim) with n_heads a
// positive multiple of the plane's KV heads (M1: n_heads is whatever q carries).
int query_heads(const ArrayInfo& q, const PlaneConfig& cfg);

// position and slot are Python integers, q/k/v/out any array objects: each is converted here so
// that a bad one raises a typed ladder error (integers.hpp, arrays.hpp). Holds the plane's lock
// for the whole call, computing with the GIL released (planes.hpp).
void attend(const std::string& route, Plane& plane, nanobind::handle position, nanobind::handle slot,
            nanobind::handle q, nanobind::handle k, nanobind::handle v, nanobind::handle out,
            std::optional<std::string> device, std::uintptr_t stream);

}  // namespace ladder::py
