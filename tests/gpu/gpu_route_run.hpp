// One route on the GPU over a copy of a host plane (the suites' unit of comparison): the
// append's slot taken on the copy, the output NaN-filled first so a value never written shows.
#pragma once

#include <vector>

#include "cpu/cpu_twin_helpers.hpp"
#include "ladder/cuda/cuda_backend.hpp"

namespace ladder::test {

struct GpuRun {
  Status status;
  std::vector<float> out;  // n_heads x head_dim
  HostPlane plane;         // `before` with the token appended at `position`
};

inline GpuRun run_gpu_on_copy(Route r, const HostPlane& before, int position, const HeadShape& shape,
                              const Token& tok, const cuda::LaunchTuning& tuning) {
  GpuRun run{Status{}, nan_filled(tok.q.size()), before};
  Result<int> slot = run.plane.append(position);
  if (!slot.ok()) {
    run.status = slot.status();
    return run;
  }
  const LayerIO io{tok.q.data(), tok.k.data(), tok.v.data(), run.out.data()};
  run.status = cuda::attend_layer_host(r, run.plane, position, *slot, shape, io, tuning);
  return run;
}

}  // namespace ladder::test
