// Errors are values (SPEC E4): every fallible call returns a Status or a Result<T>.
// A failed call leaves the object it was called on untouched.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace ladder {

enum class ErrorCode {
  ok = 0,
  invalid_argument,   // bad geometry, shape, flag value
  out_of_order,       // append of a repeated or skipped position
  out_of_range,       // position past max context, plane capacity exhausted
  unsupported,        // e.g. head_dim other than 128 on the GPU
  out_of_memory,      // host or device allocation failed
  no_device,          // CUDA requested but no usable GPU
  device_error,       // a CUDA call or kernel launch failed
  non_finite,         // a NaN or Inf input while the finite check is on (docs/nonfinite.md)
  internal,           // a broken invariant inside ladder (a bug)
};

const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::internal;
  std::string message;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit on purpose
  static Status success() { return {}; }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  ErrorCode code() const { return ok_ ? ErrorCode::ok : error_.code; }
  const std::string& message() const { return error_.message; }
  const Error& error() const { return error_; }
  // "<code name>: <message>", for printing.
  std::string to_string() const;

 private:
  Error error_{ErrorCode::ok, {}};
  bool ok_ = true;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT: implicit on purpose
  Result(Error error) : v_(std::move(error)) {}       // NOLINT
  Result(Status status) : v_(status.error()) {}       // NOLINT: only for failed statuses

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &std::get<T>(v_); }
  const T* operator->() const { return &std::get<T>(v_); }
  T& operator*() { return value(); }
  Status status() const { return ok() ? Status{} : Status{std::get<Error>(v_)}; }

 private:
  std::variant<T, Error> v_;
};

inline Error make_error(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

}  // namespace ladder

// Propagate a failed Status from an expression returning Status.
#define LADDER_TRY(expr)                    \
  do {                                      \
    ::ladder::Status ladder_try_s_ = (expr); \
    if (!ladder_try_s_.ok()) return ladder_try_s_; \
  } while (0)
