// Python exceptions of the ladder module and the one way C++ code raises them. Every failure
// the library reports as a Status becomes a Python exception whose class says what went wrong
// (ValueError subclasses for bad arguments, RuntimeError subclasses for device trouble).
#pragma once

#include <Python.h>

#include <string>

#include "ladder/errors.hpp"

namespace ladder::py {

struct ErrorTypes {
  PyObject* base = nullptr;              // LadderError(RuntimeError)
  PyObject* invalid_argument = nullptr;  // InvalidArgumentError(LadderError, ValueError)
  PyObject* shape = nullptr;             // ShapeError(InvalidArgumentError)
  PyObject* dtype = nullptr;             // DTypeError(InvalidArgumentError)
  PyObject* device_mismatch = nullptr;   // DeviceMismatchError(InvalidArgumentError)
  PyObject* position = nullptr;          // PositionError(InvalidArgumentError)
  PyObject* route = nullptr;             // RouteError(InvalidArgumentError)
  PyObject* unsupported = nullptr;       // UnsupportedError(LadderError)
  PyObject* no_device = nullptr;         // NoDeviceError(LadderError)
  PyObject* device_error = nullptr;      // DeviceError(LadderError)
  PyObject* out_of_memory = nullptr;     // OutOfMemoryError(LadderError, MemoryError)
};
ErrorTypes& error_types();

// A pending Python exception; the module's translator turns it into PyErr_SetString.
struct Raise {
  PyObject* type;
  std::string message;
};

[[noreturn]] inline void raise(PyObject* type, std::string message) { throw Raise{type, std::move(message)}; }
// Raises the exception class that matches the status's error code.
void check(const Status& s);
template <class T>
T take(Result<T>&& r) {
  if (!r.ok()) check(r.status());
  return std::move(r).value();
}

}  // namespace ladder::py
