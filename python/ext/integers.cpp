#include "integers.hpp"

#include <fmt/format.h>

#include <climits>
#include <string>

#include "ladder/geometry.hpp"

namespace ladder::py {

namespace nb = nanobind;

namespace {
std::string python_type(nb::handle h) { return Py_TYPE(h.ptr())->tp_name; }
std::string repr_of(nb::handle h) {
  PyObject* r = PyObject_Repr(h.ptr());
  if (r == nullptr) {
    PyErr_Clear();
    return "<unprintable>";
  }
  const char* text = PyUnicode_AsUTF8(r);
  std::string out = text != nullptr ? text : "<unprintable>";
  if (text == nullptr) PyErr_Clear();
  Py_DECREF(r);
  return out;
}
}  // namespace

int int_arg(nb::handle h, const char* name, PyObject* range_error) {
  // bool is an int subclass in Python, but True as a position is a caller's mistake.
  if (PyBool_Check(h.ptr()))
    raise(error_types().invalid_argument, fmt::format("{} must be an integer, got a bool ({})", name, repr_of(h)));
  PyObject* index = PyNumber_Index(h.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    raise(error_types().invalid_argument,
          fmt::format("{} must be an integer, got {} ({})", name, python_type(h), repr_of(h)));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
  const bool failed = v == -1 && PyErr_Occurred() != nullptr;
  if (failed) PyErr_Clear();
  Py_DECREF(index);
  if (overflow != 0 || failed || v < INT_MIN || v > INT_MAX)
    raise(range_error, fmt::format("{} {} is out of range: ladder positions, slots and sizes fit in 32 bits and "
                                   "stay below 2**30 (max context {})",
                                   name, repr_of(h), limits::kMaxContext));
  return static_cast<int>(v);
}

std::vector<int> int_list_arg(nb::handle h, const char* name, PyObject* range_error) {
  if (PyUnicode_Check(h.ptr()) || PyBytes_Check(h.ptr()))
    raise(error_types().invalid_argument,
          fmt::format("{} must be a sequence of integers, got {}", name, python_type(h)));
  PyObject* seq = PySequence_Fast(h.ptr(), "");
  if (seq == nullptr) {
    PyErr_Clear();
    raise(error_types().invalid_argument,
          fmt::format("{} must be a sequence of integers, got {}", name, python_type(h)));
  }
  std::vector<int> out;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  out.reserve(static_cast<std::size_t>(n));
  try {
    for (Py_ssize_t i = 0; i < n; ++i) {
      const std::string item = fmt::format("{}[{}]", name, i);
      out.push_back(int_arg(PySequence_Fast_GET_ITEM(seq, i), item.c_str(), range_error));
    }
  } catch (...) {
    Py_DECREF(seq);
    throw;
  }
  Py_DECREF(seq);
  return out;
}

}  // namespace ladder::py
