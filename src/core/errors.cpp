#include "ladder/errors.hpp"

namespace ladder {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::ok: return "ok";
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::out_of_order: return "out of order";
    case ErrorCode::out_of_range: return "out of range";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::out_of_memory: return "out of memory";
    case ErrorCode::no_device: return "no device";
    case ErrorCode::device_error: return "device error";
    case ErrorCode::non_finite: return "non-finite input";
    case ErrorCode::internal: return "internal error";
  }
  return "unknown error";
}

std::string Status::to_string() const {
  if (ok_) return "ok";
  return std::string(error_code_name(error_.code)) + ": " + error_.message;
}

}  // namespace ladder
