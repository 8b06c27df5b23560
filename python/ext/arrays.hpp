// Checked views of caller arrays. Every array crossing into ladder is taken in place (no copy):
// numpy (or any DLPack CPU array) on the host, any DLPack CUDA tensor on the GPU. A mismatch
// raises a Python exception naming the expected shape, dtype, layout and device.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "errors.hpp"

namespace ladder::py {

namespace nb = nanobind;

// Inputs may be read-only arrays; outputs must be writable.
using InArray = nb::ndarray<nb::ro>;
using OutArray = nb::ndarray<>;

enum class Where { cpu, cuda };
const char* where_name(Where w);

// One dimension of an expected shape with the name that explains it, e.g. {32, "n_heads"}.
struct Dim {
  std::int64_t size;
  const char* label;
};

// "(32, 128) = (n_heads, head_dim)"
std::string shape_text(const std::vector<Dim>& dims);

// What the checks need to know about an array, read once from its DLPack description.
struct ArrayInfo {
  int device_type = 0;
  nb::dlpack::dtype dtype{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  void* data = nullptr;
  std::shared_ptr<void> keep;  // the imported array, when taken by in_array / out_array
};
template <class Array>
ArrayInfo info_of(const Array& a) {
  ArrayInfo i;
  i.device_type = a.device_type();
  i.dtype = a.dtype();
  for (std::size_t d = 0; d < a.ndim(); ++d) {
    i.shape.push_back(static_cast<std::int64_t>(a.shape(d)));
    i.strides.push_back(static_cast<std::int64_t>(a.stride(d)));
  }
  i.data = const_cast<void*>(static_cast<const void*>(a.data()));
  return i;
}

// An array argument taken as any Python object, so that what cannot be read in place raises a
// typed ladder error naming the argument instead of nanobind's TypeError about the signature:
// byte-swapped (big-endian) data is a DTypeError, a read-only output an InvalidArgumentError,
// anything that is not an array (no DLPack, no buffer) an InvalidArgumentError. Strided and
// other layouts are taken and then refused by checked_f32 (ShapeError).
ArrayInfo in_array(nb::handle h, const char* name);
ArrayInfo out_array(nb::handle h, const char* name);

// The device an array lives on (raises DeviceMismatchError for anything but CPU or CUDA).
Where where_of(const ArrayInfo& a, const char* name);
std::string shape_of(const ArrayInfo& a);

// "float32", "bfloat16", ...: a DLPack dtype as its users name it.
std::string dtype_text(const nb::dlpack::dtype& t);
// Whether the array is row-major with unit stride (extent-1 dimensions may carry any stride; an
// empty array is).
bool c_contiguous(const ArrayInfo& a);
// DeviceMismatchError unless the array lives on `where`.
void check_device(const ArrayInfo& a, const char* name, Where where);
// ShapeError unless the array has exactly `dims` and is C-contiguous.
void check_shape_layout(const ArrayInfo& a, const char* name, const std::vector<Dim>& dims);

// Checks dtype float32, exact shape, C-contiguity and device; returns the data pointer.
float* checked_f32(const ArrayInfo& a, const char* name, const std::vector<Dim>& dims, Where where);

template <class Array>
float* f32_view(const Array& a, const char* name, const std::vector<Dim>& dims, Where where) {
  return checked_f32(info_of(a), name, dims, where);
}

}  // namespace ladder::py
