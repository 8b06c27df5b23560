// Built when the library has no CUDA device: a CUDA tensor never gets this far (attend raises
// NoDeviceError first), so the conversions only guard against a future caller.
#include "device_convert.hpp"

namespace ladder::py {

namespace {
[[noreturn]] void no_cuda() {
  raise(error_types().no_device,
        "this build of the ladder module has no CUDA support, so it cannot convert CUDA tensors; rebuild it on a "
        "machine with nvcc (pip install ./python)");
}
}  // namespace

DeviceScratch::DeviceScratch(std::size_t, std::uintptr_t) { no_cuda(); }
DeviceScratch::~DeviceScratch() = default;
void to_f32_device(const void*, Elem, float*, std::size_t, std::uintptr_t) { no_cuda(); }
void from_f32_device(const float*, Elem, void*, std::size_t, std::uintptr_t) { no_cuda(); }
void sync_stream(std::uintptr_t) { no_cuda(); }

bool has_cuda_build() { return false; }
bool device_available() { return false; }
std::string device_description() { return "no CUDA support in this build"; }

}  // namespace ladder::py
