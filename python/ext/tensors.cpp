#include "tensors.hpp"

#include <fmt/format.h>

#include <cstring>

#include "cpu/kv_convert.hpp"
#include "device_convert.hpp"
#include "ladder/reference.hpp"

namespace ladder::py {

namespace nb = nanobind;

const char* elem_name(Elem e) {
  switch (e) {
    case Elem::f32: return "float32";
    case Elem::f16: return "float16";
    case Elem::bf16: return "bfloat16";
  }
  return "?";
}

std::size_t elem_bytes(Elem e) { return e == Elem::f32 ? sizeof(float) : sizeof(std::uint16_t); }

Elem checked_float(const ArrayInfo& a, const char* name, const std::vector<Dim>& dims, Where where) {
  check_device(a, name, where);
  Elem e;
  if (a.dtype == nb::dtype<float>()) {
    e = Elem::f32;
  } else if (a.dtype.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float) && a.dtype.bits == 16 &&
             a.dtype.lanes == 1) {
    e = Elem::f16;
  } else if (a.dtype.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat) && a.dtype.bits == 16 &&
             a.dtype.lanes == 1) {
    e = Elem::bf16;
  } else {
    raise(error_types().dtype, fmt::format("{} must be float32, float16 or bfloat16 with shape {}, got {}", name,
                                           shape_text(dims), dtype_text(a.dtype)));
  }
  check_shape_layout(a, name, dims);
  return e;
}

namespace {
std::size_t elements(const std::vector<Dim>& dims) {
  std::size_t n = 1;
  for (const Dim& d : dims) n *= static_cast<std::size_t>(d.size);
  return n;
}
}  // namespace

void to_f32_host(const void* src, Elem e, float* dst, std::size_t n) {
  const auto* h = static_cast<const std::uint16_t*>(src);
  switch (e) {
    case Elem::f32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case Elem::f16:
      cpu::detail::widen_row<KvDtype::f16>(h, dst, static_cast<int>(n));
      return;
    case Elem::bf16:
      // bfloat16 (kv_dtype.hpp's conversions): the top half of a float32, widened exactly.
      cpu::detail::widen_row<KvDtype::bf16>(h, dst, static_cast<int>(n));
      return;
  }
}

void from_f32_host(const float* src, Elem e, void* dst, std::size_t n) {
  auto* h = static_cast<std::uint16_t*>(dst);
  switch (e) {
    case Elem::f32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case Elem::f16:
      for (std::size_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]);
      return;
    case Elem::bf16:
      for (std::size_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
      return;
  }
}

// ---- inputs -----------------------------------------------------------------------------------
F32In::F32In(const ArrayInfo& a, const char* name, const std::vector<Dim>& dims, Where where)
    : src_(a.data), elem_(checked_float(a, name, dims, where)), where_(where), n_(elements(dims)) {}
F32In::~F32In() = default;
F32In::F32In(F32In&&) noexcept = default;

const float* F32In::data(std::uintptr_t stream) {
  if (elem_ == Elem::f32) return static_cast<const float*>(src_);
  if (where_ == Where::cpu) {
    if (host_.empty() && n_ > 0) {
      host_.resize(n_);
      to_f32_host(src_, elem_, host_.data(), n_);
    }
    return host_.data();
  }
  if (!device_) {
    device_ = std::make_unique<DeviceScratch>(n_, stream);
    to_f32_device(src_, elem_, device_->data(), n_, stream);
  }
  return device_->data();
}

// ---- outputs ----------------------------------------------------------------------------------
F32Out::F32Out(const ArrayInfo& a, const char* name, const std::vector<Dim>& dims, Where where)
    : dst_(a.data), elem_(checked_float(a, name, dims, where)), where_(where), n_(elements(dims)) {}
F32Out::~F32Out() = default;
F32Out::F32Out(F32Out&&) noexcept = default;

float* F32Out::data(std::uintptr_t stream) {
  if (elem_ == Elem::f32) return static_cast<float*>(dst_);
  if (where_ == Where::cpu) {
    host_.resize(n_);
    return host_.data();
  }
  if (!device_) device_ = std::make_unique<DeviceScratch>(n_, stream);
  return device_->data();
}

void F32Out::finish(std::uintptr_t stream) {
  if (elem_ == Elem::f32) return;
  if (where_ == Where::cpu) {
    from_f32_host(host_.data(), elem_, dst_, n_);
    return;
  }
  from_f32_device(device_->data(), elem_, dst_, n_, stream);
}

}  // namespace ladder::py
