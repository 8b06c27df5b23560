// Internal: route -> launches, shared by the standalone run_route, the single-layer host entry
// point and the GPU engine (eager and graph-captured).
#pragma once

#include <cuda_runtime.h>

#include <compare>
#include <cstdint>
#include <string>

#include "cuda/kernels.hpp"
#include "ladder/cuda/cuda_backend.hpp"

namespace ladder::cuda_detail {

// Status from a CUDA error code: out_of_memory for allocation failures, else device_error
// with cudaGetErrorString's text and what was being done.
Status cuda_status(cudaError_t e, const std::string& what);
// no_device unless a CUDA device is usable.
Status require_device();
// Every launch is checked with cudaGetLastError, which also returns an earlier call's
// non-sticky failure that nobody read (a caller's refused cudaMalloc, say), and would report it
// as this launch's. Called before a group of launches, it reads and drops such a leftover, so a
// launch reports only its own failure; a sticky error (a faulted context) is not cleared by it
// and still fails the launch.
void clear_stale_error();

// Everything one layer's route launches for one token, as parameter structs. In graph mode an
// array of these lives in pinned host memory and is copied to the device once per token; the
// captured kernels read their struct from the device copy.
struct RouteLaunch {
  Route route = Route::splitk;
  bool head_major = false;
  StoreParams store;
  RowCopyParams copy;  // vec: the ragged-tail pad (rows 0 when none); staged: the staging copy
  ProducerParams producer;
  ReduceParams reduce;
  FusedTail tail;  // the one-kernel form (GpuFusion::fused) of splitk and vec: out, counters
};

// Validates (fail-closed) and fills the launch structs for route `r` on `plane`, for the
// producer `producer` (which decides how many partials per workgroup the reducer merges).
Status plan_route(Route r, const cuda::DevicePlane& plane, int position, int slot, const HeadShape& shape,
                  const cuda::DeviceLayerIO& io, const cuda::DeviceWorkspace& ws, const ProducerChoice& producer,
                  RouteLaunch& out);

// Enqueues the kernels of `l` on `stream` (one route of one sequence, structs by value): the
// exact kernels this token needs.
Status enqueue_route(const RouteLaunch& l, const ProducerChoice& producer, cudaStream_t stream);

// E3: which kernels one layer of a batched step launches, over every sequence of the call.
// Decided by the entries' routes and plane kinds, never by per-token data, so one captured
// graph serves every token with the same route mix; an entry of another route skips the
// kernels it does not use (kernels.hpp, BatchSpan).
struct LayerKernels {
  enum Bit : std::uint8_t {
    store = 1,          // the separate store (every route but interleaved and the fused ones)
    copy = 2,           // pad (vec on a growing plane) or staging
    splitk = 4,
    vec = 8,            // vec and staged
    interleaved = 16,
    fused_splitk = 32,  // splitk with the store inside its producer (either fused form)
    reduce = 64,
    fused_vec = 128,    // vec likewise (no pad); `reduce` is set too unless the form merges itself
  };
  std::uint8_t bits = 0;
  int copy_rows = 0;    // the most rows a copy of this layer may write (bounds its grid)
  int max_visible = 0;  // the most rows the layer's plane can make visible (bounds the producers' grids)
  // The planes' element type, which picks the kernels' instantiation (one engine, one dtype).
  KvDtype kv_dtype = KvDtype::f16;
  bool operator==(const LayerKernels&) const = default;
  auto operator<=>(const LayerKernels&) const = default;
};
// What entry `l` (planned by plan_route) needs; `max_padded_rows`: the most rows a staged copy of
// its layer may write (the captured copy grid's bound, whatever this token's rows).
LayerKernels layer_kernels(const RouteLaunch& l, const ProducerChoice& producer, int max_padded_rows);
// The union of two entries' needs.
LayerKernels merge(LayerKernels a, const LayerKernels& b);
// An entry that launches nothing (an empty slot of a batch): every kernel skips it.
RouteLaunch empty_launch(const HeadShape& shape);
// Enqueues one layer of a batched step: each kernel of `k`, grid z over `batch.count` entries,
// entry z's RouteLaunch at `first` + z * batch.stride bytes (device memory). `grid_counter`: the
// grid form's barrier word (one per stream: the layers' launches are stream-ordered).
// batch.entries = EntriesFrom::fetch_just_before for a call's first layer in a graph that
// fetched the step state right before it (it applies to the layer's first launch only).
Status enqueue_layer_batch(const LayerKernels& k, const HeadShape& shape, const RouteLaunch* first, BatchSpan batch,
                           const ProducerChoice& producer, unsigned* grid_counter, cudaStream_t stream);

// The producer (and, for the exact DAG, the heads per warp) a shape runs with for a tuning.
ProducerChoice resolve_producer_choice(const HeadShape& shape, const cuda::LaunchTuning& t);

}  // namespace ladder::cuda_detail
