// The producer a launch runs, for one row-access policy `Rows` (splitk, vec, interleaved): the
// tensor-core template (producer_tc.cuh, the default) or the exact-DAG template (producer.cuh).
#pragma once

#include "cuda/kernels.hpp"
#include "cuda/producer.cuh"
#include "cuda/producer_tc.cuh"

namespace ladder::cuda_detail {

template <class Rows>
cudaError_t launch_producer_family(const ProducerParams& p, const ProducerParams* dp, const ProducerChoice& c,
                                   cudaStream_t stream, BatchSpan batch) {
  if (c.tensor_core) return launch_producer_tc<Rows>(p, dp, c, stream, batch);
  return launch_producer<Rows>(p, dp, p.shape, c.heads_per_warp, stream, batch);
}

}  // namespace ladder::cuda_detail
