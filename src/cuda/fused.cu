// The splitk and vec routes as one kernel per layer (fused_tc.cuh's last-CTA merge, or the
// producer's grid form: GpuFusion::grid), or as the store-fused tensor-core producer followed by
// the reducer (GpuFusion::store_fused). Both walk the window in
// logical order like splitk.cu and vec.cu (token t is state.physical(logical_start + t)), so the
// current token is the last one, t = visible - 1, on both; they differ only in the family a
// batched launch matches. The current token's row is taken from the activations (rounded to the
// plane's dtype as the store rounds it) instead of the plane, and stored by the kernel itself.
#include "cuda/fused_tc.cuh"
#include "cuda/kernels.hpp"

namespace ladder::cuda_detail {
namespace {

// Where a row lives: its plane row, or kCurrent for the current token. Both routes read the
// plane through p.rows (ring_logical); F is the family of the route's batch entries.
template <KernelFamily F, KvDtype D>
struct FusedRows {
  static constexpr KernelFamily kFamily = F;
  static constexpr KvDtype kDtype = D;
  static constexpr CurrentRow kCurrentRow = CurrentRow::rounded;
  static constexpr int kCurrent = -1;
  // The current token is the newest visible one: last in logical order.
  __device__ static int current(const ProducerParams& p) { return p.visible - 1; }
  __device__ static int locate(const ProducerParams& p, int t) { return t == current(p) ? kCurrent : p.rows.row(t); }
  // nullptr: the copy zero-fills the row and reads nothing; the kernel writes it afterwards.
  __device__ static const KvWord* k_row(const ProducerParams& p, int loc, int kvh) {
    return loc == kCurrent ? nullptr : p.rows.k + p.rows.strides.offset(loc, kvh);
  }
  __device__ static const KvWord* v_row(const ProducerParams& p, int loc, int kvh) {
    return loc == kCurrent ? nullptr : p.rows.v + p.rows.strides.offset(loc, kvh);
  }
};

// Family F's rows in dtype D, in the form c.fusion says: the one kernel that merges itself
// (fused), the producer that merges after a grid-wide barrier (grid, where the grid fits), or
// the tensor-core producer kernel with the store inside, the merge left to the reducer
// (store_fused).
template <KernelFamily F, KvDtype D>
cudaError_t launch_family(const ProducerParams& p, const ProducerParams* dp, const ReduceParams& rp,
                          const ReduceParams* drp, const FusedTail& tail, const FusedTail* dtail,
                          const ProducerChoice& c, cudaStream_t stream, bool& merged, BatchSpan batch) {
  merged = c.fusion == GpuFusion::fused;
  if (c.fusion == GpuFusion::fused)
    return launch_fused_tc<FusedRows<F, D>>(p, dp, tail, dtail, c.programmatic, stream, batch);
  if (c.fusion == GpuFusion::grid)
    return launch_producer_tc_grid<FusedRows<F, D>>(p, dp, rp, drp, tail.grid_counter, c, stream, batch, merged);
  // Right behind the state fetch (batch.entries), the kernel reads its entry after its PDL wait;
  // whether it may start before the fetch ends is c.programmatic's to say, as for every form.
  return launch_producer_tc<FusedRows<F, D>>(p, dp, c, stream, batch, c.programmatic);
}

template <KernelFamily F>
cudaError_t launch_family(const ProducerParams& p, const ProducerParams* dp, const ReduceParams& rp,
                          const ReduceParams* drp, const FusedTail& tail, const FusedTail* dtail,
                          const ProducerChoice& c, cudaStream_t stream, bool& merged, BatchSpan batch) {
  return p.kv_dtype == KvDtype::bf16
             ? launch_family<F, KvDtype::bf16>(p, dp, rp, drp, tail, dtail, c, stream, merged, batch)
             : launch_family<F, KvDtype::f16>(p, dp, rp, drp, tail, dtail, c, stream, merged, batch);
}

}  // namespace

LADDER_TIMELINE_SINK(fused)

unsigned tc_batched_ctas(const HeadShape& shape, const BatchSpan& batch, const ProducerChoice& c) {
  // Any family stands for all (kernels.hpp: one occupancy); the tile layout is the launch's.
  using Any = FusedRows<KernelFamily::splitk_fused, KvDtype::f16>;
  return c.tiles_batched(batch.count) == TcTiles::swizzled ? tc_walk_ctas<Any, TcSwizzledTile>(shape, batch, c)
                                                           : tc_walk_ctas<Any, TcPaddedTile>(shape, batch, c);
}

cudaError_t launch_store_fused_route(Route r, const ProducerParams& p, const ProducerParams* dp, const ReduceParams& rp,
                                     const ReduceParams* drp, const FusedTail& tail, const FusedTail* dtail,
                                     const ProducerChoice& c, cudaStream_t stream, bool& merged, BatchSpan batch) {
  merged = false;
  if (!c.fuses_store(r)) return cudaErrorInvalidValue;
  return r == Route::splitk
             ? launch_family<KernelFamily::splitk_fused>(p, dp, rp, drp, tail, dtail, c, stream, merged, batch)
             : launch_family<KernelFamily::vec_fused>(p, dp, rp, drp, tail, dtail, c, stream, merged, batch);
}

}  // namespace ladder::cuda_detail
