// Arrays in the model's dtype: float32, float16 or bfloat16 (torch tensors, numpy arrays, any
// DLPack producer), read in place and converted here, in C++, to the float32 the library's
// routes take. A float32 array is used as is (no copy); a float16 or bfloat16 one is converted
// into scratch memory on the array's side (host memory, or device memory on the caller's stream)
// and, for an output, converted back into the caller's array after the call.
//
// Every check runs when the view is built, before any conversion or any change to a plane, so a
// bad argument raises its typed error (DTypeError, ShapeError, DeviceMismatchError) with
// nothing changed.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "arrays.hpp"

namespace ladder::py {

enum class Elem { f32, f16, bf16 };
const char* elem_name(Elem e);
std::size_t elem_bytes(Elem e);

// The element type of `a` when it is one of the three (DTypeError naming `name` and the expected
// shape otherwise), after the same shape, C-contiguity and device checks as checked_f32.
Elem checked_float(const ArrayInfo& a, const char* name, const std::vector<Dim>& dims, Where where);

// Host conversions (round to nearest even on the way down; exact on the way up).
void to_f32_host(const void* src, Elem e, float* dst, std::size_t n);
void from_f32_host(const float* src, Elem e, void* dst, std::size_t n);

class DeviceScratch;  // device_convert.hpp

// A checked input array seen as float32 elements.
class F32In {
 public:
  F32In(const ArrayInfo& a, const char* name, const std::vector<Dim>& dims, Where where);
  ~F32In();
  F32In(F32In&&) noexcept;
  F32In(const F32In&) = delete;
  F32In& operator=(const F32In&) = delete;
  // The float32 data (converting on first use; on CUDA on `stream`, a cudaStream_t as an integer).
  const float* data(std::uintptr_t stream = 0);
  Elem elem() const { return elem_; }
  std::size_t size() const { return n_; }

 private:
  const void* src_;
  Elem elem_;
  Where where_;
  std::size_t n_;
  std::vector<float> host_;
  std::unique_ptr<DeviceScratch> device_;
};

// A checked, writable output array seen as float32: data() is the array itself when float32,
// else scratch that finish() converts into the caller's array.
class F32Out {
 public:
  F32Out(const ArrayInfo& a, const char* name, const std::vector<Dim>& dims, Where where);
  ~F32Out();
  F32Out(F32Out&&) noexcept;
  F32Out(const F32Out&) = delete;
  F32Out& operator=(const F32Out&) = delete;
  float* data(std::uintptr_t stream = 0);
  // Writes the scratch into the caller's array (no-op for float32).
  void finish(std::uintptr_t stream = 0);

 private:
  void* dst_;
  Elem elem_;
  Where where_;
  std::size_t n_;
  std::vector<float> host_;
  std::unique_ptr<DeviceScratch> device_;
};

}  // namespace ladder::py
