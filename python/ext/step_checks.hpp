// Checks of one decode step (append + attend) on a plane without taking it: step_checks.cpp.
#pragma once

#include <nanobind/nanobind.h>

#include "device_rows.hpp"
#include "planes.hpp"

namespace ladder::py {

// Raises what attend(plane.next_position) with these arrays would raise about the arrays or the
// append (typed errors); changes nothing.
void check_step(const Plane& plane, nanobind::handle q, nanobind::handle k, nanobind::handle v, nanobind::handle out);

}  // namespace ladder::py
