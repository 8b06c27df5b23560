#include "arrays.hpp"

#include <fmt/format.h>
#include <nanobind/stl/string.h>

namespace ladder::py {

const char* where_name(Where w) { return w == Where::cpu ? "cpu" : "cuda"; }

Where where_of(const ArrayInfo& a, const char* name) {
  const int type = a.device_type;
  if (type == nb::device::cpu::value) return Where::cpu;
  if (type == nb::device::cuda::value) return Where::cuda;
  raise(error_types().device_mismatch,
        fmt::format("{} lives on a device ladder cannot read (DLPack device type {}); pass a CPU array "
                    "(numpy) or a CUDA tensor",
                    name, type));
}

std::string shape_text(const std::vector<Dim>& dims) {
  std::string sizes, labels;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const char* sep = i == 0 ? "" : ", ";
    sizes += fmt::format("{}{}", sep, dims[i].size);
    labels += fmt::format("{}{}", sep, dims[i].label);
  }
  if (dims.size() == 1) {
    sizes += ",";
    labels += ",";
  }
  return fmt::format("({}) = ({})", sizes, labels);
}

std::string shape_of(const ArrayInfo& a) {
  std::string s = "(";
  for (std::size_t i = 0; i < a.shape.size(); ++i) s += fmt::format("{}{}", i == 0 ? "" : ", ", a.shape[i]);
  if (a.shape.size() == 1) s += ",";
  return s + ")";
}

std::string dtype_text(const nb::dlpack::dtype& t) {
  const char* kind = "?";
  switch (static_cast<nb::dlpack::dtype_code>(t.code)) {
    case nb::dlpack::dtype_code::Int: kind = "int"; break;
    case nb::dlpack::dtype_code::UInt: kind = "uint"; break;
    case nb::dlpack::dtype_code::Float: kind = "float"; break;
    case nb::dlpack::dtype_code::Bfloat: kind = "bfloat"; break;
    case nb::dlpack::dtype_code::Complex: kind = "complex"; break;
    case nb::dlpack::dtype_code::Bool: kind = "bool"; break;
    default: break;
  }
  return fmt::format("{}{}", kind, t.bits);
}

bool c_contiguous(const ArrayInfo& a) {
  // An empty array addresses no element, whatever strides its producer reported.
  for (const std::int64_t extent : a.shape)
    if (extent == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t i = a.shape.size(); i-- > 0;) {
    // A dimension of extent 1 may carry any stride: it is never stepped over.
    if (a.shape[i] != 1 && a.strides[i] != expected) return false;
    expected *= a.shape[i];
  }
  return true;
}

namespace {
// Why `h` could not be taken as an array: the most specific reason found.
[[noreturn]] void refuse_array(nb::handle h, const char* name, bool writable) {
  std::string dtype_name;
  bool byte_swapped = false, read_only = false;
  try {
    if (nb::hasattr(h, "dtype")) {
      const nb::object dt = h.attr("dtype");
      dtype_name = nb::cast<std::string>(nb::str(dt));
      if (nb::hasattr(dt, "isnative")) byte_swapped = !nb::cast<bool>(dt.attr("isnative"));
    }
    if (writable && nb::hasattr(h, "flags")) {
      const nb::object flags = h.attr("flags");
      if (nb::hasattr(flags, "writeable")) read_only = !nb::cast<bool>(flags.attr("writeable"));
    }
  } catch (const nb::python_error&) {
    // An object whose attributes raise is diagnosed by its type alone, below.
  } catch (const nb::cast_error&) {
  }
  if (byte_swapped)
    raise(error_types().dtype, fmt::format("{} is byte-swapped (dtype {}); ladder reads and writes native-endian "
                                           "float32, float16 or bfloat16 in place (e.g. {}.astype(numpy.float32))",
                                           name, dtype_name, name));
  if (read_only)
    raise(error_types().invalid_argument,
          fmt::format("{} is read-only and ladder writes the result into it: pass a writable array (e.g. "
                      "numpy.empty_like(q)) or out=None",
                      name));
  raise(error_types().invalid_argument,
        fmt::format("{} must be a float32 array (or float16 / bfloat16: numpy, torch, any DLPack CPU array or CUDA "
                    "tensor), got {}{}",
                    name,
                    Py_TYPE(h.ptr())->tp_name, dtype_name.empty() ? "" : " of dtype " + dtype_name));
}

template <class Array>
ArrayInfo take_array(nb::handle h, const char* name, bool writable) {
  Array a;
  if (!nb::try_cast(h, a)) refuse_array(h, name, writable);
  ArrayInfo i = info_of(a);
  i.keep = std::make_shared<Array>(std::move(a));
  return i;
}
}  // namespace

ArrayInfo in_array(nb::handle h, const char* name) { return take_array<InArray>(h, name, false); }
ArrayInfo out_array(nb::handle h, const char* name) { return take_array<OutArray>(h, name, true); }

void check_device(const ArrayInfo& a, const char* name, Where where) {
  const Where at = where_of(a, name);
  if (at != where)
    raise(error_types().device_mismatch,
          fmt::format("{} is on {} but this call runs on {}: every array of one call must live on the same "
                      "device as the plane",
                      name, where_name(at), where_name(where)));
}

void check_shape_layout(const ArrayInfo& a, const char* name, const std::vector<Dim>& dims) {
  bool same = a.shape.size() == dims.size();
  for (std::size_t i = 0; same && i < dims.size(); ++i) same = a.shape[i] == dims[i].size;
  if (!same)
    raise(error_types().shape,
          fmt::format("{} must have shape {}, got {}", name, shape_text(dims), shape_of(a)));
  if (!c_contiguous(a))
    raise(error_types().shape, fmt::format("{} must be C-contiguous (row-major, unit stride); copy it first, e.g. "
                                           "numpy.ascontiguousarray({}) or {}.contiguous()",
                                           name, name, name));
}

float* checked_f32(const ArrayInfo& a, const char* name, const std::vector<Dim>& dims, Where where) {
  check_device(a, name, where);
  if (a.dtype != nb::dtype<float>())
    raise(error_types().dtype, fmt::format("{} must be float32 with shape {}, got {}", name, shape_text(dims),
                                           dtype_text(a.dtype)));
  check_shape_layout(a, name, dims);
  return static_cast<float*>(a.data);
}

}  // namespace ladder::py
