// The device-neutral single-layer entry point: the CPU twins, or the CUDA device with the plane
// mirrored to device memory for the call (cuda::attend_layer_host).
#include <fmt/format.h>

#include "ladder/attention.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/cuda/cuda_backend.hpp"

namespace ladder {

namespace {
Status run_on(Device device, Route r, HostPlane& plane, int position, int slot, const HeadShape& shape,
              const LayerIO& io) {
  switch (device) {
    case Device::cpu: {
      // One workspace per calling thread, grown by run_route to scratch_needs(route, visible)
      // and kept, so a sweep of calls does not reallocate.
      thread_local cpu::Workspace ws;
      return cpu::run_route(r, plane, position, slot, shape, io, ws);
    }
    case Device::cuda:
      return cuda::attend_layer_host(r, plane, position, slot, shape, io);
  }
  return make_error(ErrorCode::invalid_argument, fmt::format("unknown device {}", static_cast<int>(device)));
}
}  // namespace

Status attend_layer(Device device, Route r, HostPlane& plane, int position, int slot, const HeadShape& shape,
                    const LayerIO& io) {
  LADDER_TRY(run_on(device, r, plane, position, slot, shape, io));
  // N1's counters: only a call that ran (a refused one read nothing).
  plane.count_inputs(io.q, static_cast<std::size_t>(shape.n_heads) * shape.head_dim, io.k, io.v);
  return {};
}

}  // namespace ladder
