// Internal: host-side launchers of the CUDA kernel families (one .cu file each). Each takes the
// family's one parameter struct. Direct form (`dp == nullptr`): the struct is passed by value
// and the grid is exactly the one this token needs. Indirect form (`dp` a device pointer): the
// kernel reads its struct from device memory and the grid is the worst case for the plane, so
// a captured graph can be replayed token after token while a captured copy refreshes `*dp`.
// Ordering between launches is stream order only.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstddef>

#include "ladder/cuda/cuda_backend.hpp"
#include "ladder/heuristics.hpp"
#include "ladder/kernel_params.hpp"
#include "ladder/ladder.hpp"

namespace ladder::cuda_detail {

// Largest power of two <= `requested` (and <= 16) that divides heads_per_kv: how many sibling
// query heads one warp carries. It is a schedule choice only; every value gives the same bits.
int heads_per_warp_for(int heads_per_kv, int requested);

// Which producer a launch runs: the tensor-core producer (producer_tc.cuh, the default) or the
// exact-DAG producer (producer.cuh, the CPU twins' bits) with its sibling heads per warp.
struct ProducerChoice {
  bool tensor_core = true;
  int heads_per_warp = 1;
  // How many kernels the splitk and vec routes launch, resolved (fused, grid, store_fused or
  // separate, never automatic): separate whenever the exact-DAG producer runs, since only the
  // tensor-core kernels take the store in (resolve_producer_choice).
  GpuFusion fusion = kGpuFusionDefault;
  // Launch the fused kernel with programmatic dependent launch (it may start while the previous
  // kernel of the stream runs; it waits for it before reading q).
  bool programmatic = false;
  const unsigned* arrival_delay_ns = nullptr;  // FusedTail::delay_ns
  int tc_slots_per_cta = 0;                    // LaunchTuning::tc_slots_per_cta
  cuda::ReduceForm reduce_form = cuda::ReduceForm::automatic;  // LaunchTuning::reduce_form
  // LaunchTuning::tc_tiles or LADDER_GPU_TILES; automatic: heuristics.hpp's rule per launch,
  // read through tiles_direct / tiles_batched, the one place that decides.
  TcTiles tiles = TcTiles::automatic;
  TcTiles tiles_direct(int visible) const { return tiles != TcTiles::automatic ? tiles : tc_tiles_direct(visible); }
  TcTiles tiles_batched(int sequences) const {
    return tiles != TcTiles::automatic ? tiles : tc_tiles_batched(sequences);
  }
  // The CUDA device the launches go to, asked once when the choice is resolved: the occupancy
  // caches (resident_ctas) are per device, and a batched launch needs no runtime call to find it.
  int device = 0;
  // The direct reducer behind a store-fused producer is launched with PDL, and that producer
  // allows it once each CTA's last slot is folded (ProducerParams::early_dependents), so the
  // reducer's launch overlaps the producers' pair merges and partial writes: -0.4 us per batch-1
  // layer at 2,048 and 8,192, -0.3 to -0.6 at 131,072, the 52-layer step at 2,048 -4 to -6 %
  // (docs/perf.md, change 26). Read through reducer_behind_pdl, the one place that decides.
  bool reduce_programmatic = false;

  // Whether the reducer of a launch covering `sequences` sequences goes behind its store-fused
  // producer with PDL: a direct launch is one sequence; a batched one only up to
  // kBatchedReducerPdlUpToBatch (heuristics.hpp, the measurements beside it).
  bool reducer_behind_pdl(int sequences) const {
    return reduce_programmatic && sequences <= kBatchedReducerPdlUpToBatch;
  }

  // Whether route r's producer stores the current row itself, taking it from the activations
  // (splitk and vec in either fused form): no store launch.
  bool fuses_store(Route r) const {
    return (r == Route::splitk || r == Route::vec) && fusion != GpuFusion::separate;
  }
  // Whether it also merges the split-K partials and writes the output in its own launch (the
  // last CTA to finish merges, fused_tc.cuh): no reduce launch either. The grid form merges in
  // its launch too, but only where the grid fits the device (launch_store_fused_route says), so
  // its layers keep the reduce launch for the batches where it does not.
  bool merges_in_producer(Route r) const { return fuses_store(r) && fusion == GpuFusion::fused; }
  // The partition this producer folds a layer of `visible` tokens by: the tensor-core kernels'
  // own (tc_schedule), the exact DAG's the pinned one its CPU twins share.
  Schedule schedule(int visible, const HeadShape& shape) const;
};

// What the fused one-kernel-per-layer route (fused_tc.cuh) needs beyond ProducerParams: where
// it writes, its arrival counters (a workspace's `arrivals`, all zero between launches) and a
// test hook.
// Arrival counters per group (KV head x 16-head tile) of the fused kernel: the group's
// workgroup counter, then one per workgroup.
inline constexpr int kFusedArrivalsPerGroup = 1 + kMaxWorkgroups;
// The grid form's barrier: one counter word (producer_tc.cuh, grid_arrive).
inline constexpr int kGridBarrierWords = 1;

struct FusedTail {
  float* out = nullptr;
  unsigned* arrivals = nullptr;
  // Tests only (nullptr otherwise): device array [kMaxWorkgroups * kMaxWarpsPerWorkgroup] of
  // nanoseconds the CTA of flat warp slot f sleeps after writing its partial and before it
  // arrives, to force a chosen arrival order.
  const unsigned* delay_ns = nullptr;
  // The grid form's barrier counter (producer_tc.cuh, grid_arrive): one word, zero when
  // allocated, never reset. In a batched launch the host's struct carries it for every entry.
  unsigned* grid_counter = nullptr;
};

// Which kernel wrote a batched launch's entries. The step state fetch (the first kernel of an
// engine call's graph) lets the next kernel start while it still copies (fetch_state.cu), so a
// launch right behind it reads its entries only after its PDL wait; behind any later kernel the
// fetch has long finished, and the entries may be read at entry, before the wait (a store-fused
// producer then prefetches its plane rows while the previous layer finishes).
enum class EntriesFrom { earlier_kernel, fetch_just_before };

// What a batched tensor-core producer's walking CTA writes: each slot's partial (the reducer's
// step 4 folds a fold group's slots), or, where tc_folded_groups_per_cta (kernel_params.hpp)
// says the entry folds, whole fold groups folded by the CTA itself, one partial each (parts 1):
// a batch-16 layer paid 4-7 % for the per-slot partials' traffic at 8,192 and deeper (docs/perf.md,
// probe 49 and change 49), and 10 % at 2,048 for one partial per workgroup (probe 50).
enum class TcPartials { per_slot, per_group };

// The indirect form over a batch: `count` parameter structs, the first at `dp` and each next one
// `stride` bytes further (grid z = count). An entry with nothing to do exits at once: a store
// with n_kv_heads 0, a copy with rows 0, a reduce with groups 0, a producer struct of another
// KernelFamily. The default is one struct.
// max_visible bounds the producers' grids: the most rows any entry's layer can see (its schedule
// at that length has the most workgroups and warps); 0 = the worst case of every schedule.
struct BatchSpan {
  std::size_t stride = 0;
  int count = 1;
  int max_visible = 0;
  // fetch_just_before: this launch is the first of the call, right behind the state fetch. A
  // tensor-core producer (store-fused, fused or grid form) then reads its entry only after its
  // PDL wait, so with ProducerChoice::programmatic its CTAs may start while the fetch runs
  // (docs/perf.md change 38); every other kernel is launched plainly and never sees the fetch
  // running.
  EntriesFrom entries = EntriesFrom::earlier_kernel;
  // Batched tensor-core producers: CTAs per (entry, tile group) along y, set once per layer
  // (tc_batched_ctas) so that every family's launch of the layer and its reducer agree (0: the
  // launch picks its own), and what their CTAs write. With TcPartials::per_group the reducer
  // reads each entry's parts through reduce_parts_after_fold(entry, tc_ctas).
  unsigned tc_ctas = 0;
  TcPartials tc_partials = TcPartials::per_slot;
};
// The indirect producer grid's y extent: warp slots (tensor-core and fused) or workgroups
// (exact DAG) of the largest schedule `batch` can reach.
unsigned indirect_slots(const BatchSpan& batch);
unsigned indirect_workgroups(const BatchSpan& batch);
// The y extent of a batched tensor-core producer launch over `batch` (its count, max_visible):
// c.tc_slots_per_cta slots per CTA when given, else tc_walk_extent's rule over the CTAs the
// device holds at once (one occupancy for every family and tile layout: shared memory admits
// exactly kTcCtasPerSm of each, and 128 threads cannot run out of registers at two).
unsigned tc_batched_ctas(const HeadShape& shape, const BatchSpan& batch, const ProducerChoice& c);

cudaError_t launch_store(const StoreParams& p, const StoreParams* dp, cudaStream_t stream, BatchSpan batch = {});
// Pad and staging. max_rows bounds the indirect grid (the largest `rows` any token may need).
cudaError_t launch_copy_rows(const RowCopyParams& p, const RowCopyParams* dp, int max_rows, cudaStream_t stream,
                             BatchSpan batch = {});
cudaError_t launch_splitk(const ProducerParams& p, const ProducerParams* dp, const ProducerChoice& c,
                          cudaStream_t stream, BatchSpan batch = {});
cudaError_t launch_vec(const ProducerParams& p, const ProducerParams* dp, const ProducerChoice& c,
                       cudaStream_t stream, BatchSpan batch = {});
cudaError_t launch_interleaved(const ProducerParams& p, const ProducerParams* dp, const ProducerChoice& c,
                               cudaStream_t stream, BatchSpan batch = {});
// Route r (splitk or vec, pad included) with the store inside its tensor-core producer, in the
// form c.fusion says (c.fuses_store(r) must hold; else cudaErrorInvalidValue):
//  * fused: store + producer + reduce as one kernel, the last CTA merging (fused_tc.cuh); it
//    writes the output through `tail`;
//  * store_fused: the tensor-core producer kernel with the store inside, writing the warp-slot
//    partials for the reducer launched after it (`tail` unused);
//  * grid: that producer, then a grid-wide barrier and the reducer's merge inside the same
//    launch (`r`/`dr` its reduce structs, `tail.grid_counter` the barrier's word), where the
//    grid fits the device; else the store-fused producer alone.
// `merged` says whether the launch wrote the outputs (fused, and grid where it fit): when false
// the caller launches the reducer. The same bits as the separate kernels. c.programmatic
// launches it with PDL (its plane prefetch before the wait). Batched: the producer, reduce and
// tail structs of entry z are each `batch.stride` bytes apart.
cudaError_t launch_store_fused_route(Route r, const ProducerParams& p, const ProducerParams* dp, const ReduceParams& rp,
                                     const ReduceParams* drp, const FusedTail& tail, const FusedTail* dtail,
                                     const ProducerChoice& c, cudaStream_t stream, bool& merged, BatchSpan batch = {});
// The warp-partial counts the reducer is instantiated for (reduce.cuh, reduce_head_by_parts):
// nsg's values, 1, 2 and kMaxWarpsPerWorkgroup. plan_route refuses an entry with any other, and
// launch_reduce a direct launch.
constexpr bool reducer_takes_parts(int parts) { return parts == 1 || parts == 2 || parts == kMaxWarpsPerWorkgroup; }
// c: its reduce_form (how a batched launch loads the partials; a direct launch is always one
// pass) and device (the automatic form's occupancy query).
// programmatic: launched with PDL (ProducerChoice::reducer_behind_pdl says when); it waits for the
// producer grid before it reads a partial.
cudaError_t launch_reduce(const ReduceParams& p, const ReduceParams* dp, const ProducerChoice& c, cudaStream_t stream,
                          BatchSpan batch = {}, bool programmatic = false);
// Fills n words with the quiet NaN of `dtype` (unwritten rows poison whoever reads them).
cudaError_t launch_poison(KvWord* dst, std::int64_t n, KvDtype dtype, cudaStream_t stream);

// N1's counters over a call's activations in device memory (count_inputs.cu). Slot z's q, k, v
// hold [n_layers][q_layer] / [n_layers][kv_layer] / [n_layers][kv_layer] floats; a null pointer
// (no q in a fill, an empty slot) counts nothing; range_max is the plane dtype's bound
// (kv_range_max). out: [count][n_layers][kInputArrays], every entry written (device memory, or
// pinned host memory through its device mapping: the engine's counts go straight to the host).
enum InputArray : int { kInputQ = 0, kInputK = 1, kInputV = 2, kInputArrays = 3 };
struct SlotInputs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
};
struct InputCount {
  unsigned saturated = 0;
  unsigned nonfinite = 0;
};
// CTAs of `kernel` (`threads` threads, `smem` bytes of dynamic shared memory) CUDA device
// `device` (the current one: the launch's, ProducerChoice::device) holds at once: SMs x
// occupancy, asked once per device (a process may drive several GPUs of different sizes) and
// kept in `cache`, one per kernel; 0 when unknown.
struct ResidentCache {
  static constexpr int kDevices = 64;
  std::array<std::atomic<long long>, kDevices> per_device{};  // 0: not asked yet; -1: unknown
};
long long resident_ctas(const void* kernel, int threads, std::size_t smem, ResidentCache& cache, int device);

// An engine call's step state, `bytes` (a multiple of 16) from device-mapped pinned host memory
// (`host`: the device's pointer to it) into device memory `dev` (fetch_state.cu). It allows its
// dependents at once (EntriesFrom). debug_delay_ns (tests only; 0 otherwise): how long its CTAs
// sleep after allowing them, before they copy.
cudaError_t launch_fetch_state(const void* host, void* dev, std::size_t bytes, cudaStream_t stream,
                               unsigned debug_delay_ns = 0);
cudaError_t launch_count_inputs(const SlotInputs* slots, int count, int n_layers, int q_layer, int kv_layer,
                                float range_max, InputCount* out, cudaStream_t stream);

// The read-bandwidth probe: streams `bytes` (a multiple of 16) with 16-byte loads.
cudaError_t launch_read_stream(const void* src, std::int64_t bytes, unsigned blocks, unsigned never, unsigned* sink,
                               cudaStream_t stream);

}  // namespace ladder::cuda_detail
