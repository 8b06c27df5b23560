// Device-neutral single-layer decode attention: the entry point the parity ledger, the tests
// and the Python binding use to run one route on one plane, on the CPU or the GPU.
#pragma once

#include "ladder/device_api.hpp"
#include "ladder/errors.hpp"
#include "ladder/kernel_params.hpp"
#include "ladder/ladder.hpp"
#include "ladder/plane.hpp"

namespace ladder {

// Runs route `r` for one layer whose plane already took this token's append (metadata) and
// returned `slot`: stores the current row (fused into the producer on the interleaved route),
// attends, reduces, writes io.out. On Device::cuda the plane is mirrored to device memory for
// the call and the stored row is written back, so `plane` ends in the same state either way.
// Threads: it writes the plane (the stored row), so one call per plane at a time; calls on
// different planes may run on different threads (docs/threads.md).
Status attend_layer(Device device, Route r, HostPlane& plane, int position, int slot, const HeadShape& shape,
                    const LayerIO& io);


}  // namespace ladder
