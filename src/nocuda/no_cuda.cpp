// Built only without CUDA: every GPU entry point the engine reaches answers with a clear
// no_device error.
#include "ladder/cuda/cuda_backend.hpp"

namespace ladder {

bool cuda_available() { return false; }
bool cuda_default_uses_tensor_cores() { return false; }

namespace {
Error no_cuda() {
  return make_error(ErrorCode::no_device,
                    "this build of ladder has no CUDA device support (configure with -DLADDER_CUDA=ON on a "
                    "machine with nvcc); use --device cpu");
}
}  // namespace

namespace cuda {

CudaEngineOptions default_engine_options() { return {}; }
Result<std::unique_ptr<DeviceBackend>> create_backend(const Geometry&, const CudaEngineOptions&) { return no_cuda(); }
Status attend_layer_host(Route, HostPlane&, int, int, const HeadShape&, const LayerIO&, LaunchTuning) {
  return no_cuda();
}

}  // namespace cuda
}  // namespace ladder
