// Built only without CUDA: every GPU entry point answers with a clear no_device error.
#include "engine/backends.hpp"

namespace ladder {

bool cuda_available() { return false; }
bool cuda_default_uses_tensor_cores() { return false; }

namespace detail {
namespace {
Error no_cuda() {
  return make_error(ErrorCode::no_device,
                    "this build of ladder has no CUDA device support (configure with -DLADDER_CUDA=ON on a "
                    "machine with nvcc); use --device cpu");
}
}  // namespace

Result<std::unique_ptr<Engine>> create_cuda_engine(const Geometry&, const EngineOptions&) { return no_cuda(); }
Status cuda_attend_layer(Route, HostPlane&, int, int, const HeadShape&, const LayerIO&) { return no_cuda(); }

}  // namespace detail
}  // namespace ladder
