// The CPU device: twins of every kernel family (G7) with the same block partition and merge
// order as the CUDA kernels, multi-threaded over (KV head, workgroup) and vectorised.
#pragma once

#include <cstdint>
#include <vector>

#include "ladder/attention.hpp"
#include "ladder/errors.hpp"
#include "ladder/kernel_params.hpp"
#include "ladder/ladder.hpp"
#include "ladder/plane.hpp"

namespace ladder::cpu {

// Kernel twins. Each is deterministic: the result never depends on the thread count.
void store_rows(const StoreParams& p);
void copy_rows(const RowCopyParams& p);  // pad and staging
void produce_splitk(const ProducerParams& p);
void produce_vec(const ProducerParams& p);
void produce_interleaved(const ProducerParams& p);
void reduce_partials(const ReduceParams& p);

// Per-layer scratch, sized through scratch_needs()/max_scratch_needs() (R5).
struct Workspace {
  std::vector<float> partials;
  std::vector<std::uint16_t> pad;    // k then v
  std::vector<std::uint16_t> stage;  // k then v
  void reserve(const ScratchNeeds& n);
};


// Run route `r` for one layer whose plane already took this token's append (metadata) and
// returned `slot`: stores the row (or fuses the store, interleaved), attends, reduces.
Status run_route(Route r, HostPlane& plane, int position, int slot, const HeadShape& shape,
                 const LayerIO& io, Workspace& ws);

// Worker threads used by the twins (default: hardware concurrency). Not thread-safe to change
// while kernels run.
void set_threads(int n);
int threads();

}  // namespace ladder::cpu
