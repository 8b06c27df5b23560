#include "ladder/kv_dtype.hpp"

#include <fmt/format.h>

namespace ladder {

const char* kv_dtype_name(KvDtype d) {
  switch (d) {
    case KvDtype::f16: return "f16";
    case KvDtype::bf16: return "bf16";
  }
  return "invalid";
}

Result<KvDtype> parse_kv_dtype(std::string_view name) {
  if (name == "f16") return KvDtype::f16;
  if (name == "bf16") return KvDtype::bf16;
  return make_error(ErrorCode::invalid_argument,
                    fmt::format("unknown KV dtype '{}': use f16 (the default) or bf16", name));
}

}  // namespace ladder
