// Integer arguments taken from Python objects with the module's typed errors. nanobind's own
// int conversion answers a value past 32 bits (2**31, a position a caller computed in int64)
// with a TypeError about the function's signature; these name the argument and raise the
// ladder error the value deserves instead.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>
#include <vector>

#include "errors.hpp"

namespace ladder::py {

// Any object with __index__ (int, numpy integers) as an int. Not an integer: InvalidArgumentError
// naming it; an integer outside int's range: `range_error` (PositionError for positions and
// slots, InvalidArgumentError for sizes), naming the value and the library's limits.
int int_arg(nanobind::handle h, const char* name, PyObject* range_error);
// A sequence of integers, each checked like int_arg.
std::vector<int> int_list_arg(nanobind::handle h, const char* name, PyObject* range_error);

}  // namespace ladder::py
