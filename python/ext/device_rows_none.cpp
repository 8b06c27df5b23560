// Built when the library has no CUDA device: every GPU use raises NoDeviceError.
#include "device_rows.hpp"

namespace ladder::py {

namespace {
[[noreturn]] void no_cuda() {
  raise(error_types().no_device,
        "this build of the ladder module has no CUDA support; rebuild it on a machine with nvcc "
        "(pip install ./python) or use device='cpu' with numpy arrays");
}
}  // namespace

std::unique_ptr<DeviceRows> make_device_rows(const PlaneConfig&) { no_cuda(); }
bool device_available() { return false; }
std::string device_description() { return "no CUDA support in this build"; }

}  // namespace ladder::py
