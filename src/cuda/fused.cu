// The splitk and vec routes as one kernel per layer (fused_tc.cuh), or as the store-fused
// producer followed by the reducer. splitk is ring-native like
// splitk.cu (token t is state.physical(logical_start + t)); vec walks one contiguous span from
// row 0 like vec.cu. In both the current token's row is taken from the activations (rounded to
// the plane's dtype as the store rounds it) instead of the plane, and stored by the kernel itself.
#include "cuda/fused_tc.cuh"
#include "cuda/kernels.hpp"

namespace ladder::cuda_detail {
namespace {

// Where a row lives: its plane row, or kCurrent for the current token. Both routes read the
// plane through p.rows (ring_logical for splitk, contiguous for vec).
template <class Order, KvDtype D>
struct FusedRows {
  static constexpr KernelFamily kFamily = Order::kFamily;
  static constexpr KvDtype kDtype = D;
  static constexpr CurrentRow kCurrentRow = CurrentRow::rounded;
  static constexpr int kCurrent = -1;
  __device__ static int current(const ProducerParams& p) { return Order::current(p); }
  __device__ static int locate(const ProducerParams& p, int t) {
    return t == Order::current(p) ? kCurrent : p.rows.row(t);
  }
  // nullptr: the copy zero-fills the row and reads nothing; the kernel writes it afterwards.
  __device__ static const KvWord* k_row(const ProducerParams& p, int loc, int kvh) {
    return loc == kCurrent ? nullptr : p.rows.k + p.rows.strides.offset(loc, kvh);
  }
  __device__ static const KvWord* v_row(const ProducerParams& p, int loc, int kvh) {
    return loc == kCurrent ? nullptr : p.rows.v + p.rows.strides.offset(loc, kvh);
  }
};

// splitk: the current token is the last visible one in logical order.
struct LogicalOrder {
  static constexpr KernelFamily kFamily = KernelFamily::splitk_fused;
  __device__ static int current(const ProducerParams& p) { return p.visible - 1; }
};
// vec: the span is physical rows 0 .. visible-1 and the current token sits at its slot (a full
// ring that has wrapped holds it anywhere; a growing plane at visible - 1).
struct PhysicalOrder {
  static constexpr KernelFamily kFamily = KernelFamily::vec_fused;
  __device__ static int current(const ProducerParams& p) { return p.store_slot; }
};

}  // namespace

int fused_groups(const HeadShape& shape) {
  return shape.n_kv_heads * ((shape.heads_per_kv() + kTcHeads - 1) / kTcHeads);
}

cudaError_t launch_splitk_fused(const ProducerParams& p, const ProducerParams* dp, const FusedTail& tail,
                                const FusedTail* dtail, bool programmatic, cudaStream_t stream, BatchSpan batch) {
  return p.kv_dtype == KvDtype::bf16
             ? launch_fused_tc<FusedRows<LogicalOrder, KvDtype::bf16>>(p, dp, tail, dtail, programmatic, stream, batch)
             : launch_fused_tc<FusedRows<LogicalOrder, KvDtype::f16>>(p, dp, tail, dtail, programmatic, stream, batch);
}

cudaError_t launch_vec_fused(const ProducerParams& p, const ProducerParams* dp, const FusedTail& tail,
                             const FusedTail* dtail, bool programmatic, cudaStream_t stream, BatchSpan batch) {
  return p.kv_dtype == KvDtype::bf16
             ? launch_fused_tc<FusedRows<PhysicalOrder, KvDtype::bf16>>(p, dp, tail, dtail, programmatic, stream, batch)
             : launch_fused_tc<FusedRows<PhysicalOrder, KvDtype::f16>>(p, dp, tail, dtail, programmatic, stream, batch);
}

// The same families through the tensor-core producer kernel: the store inside, the merge left
// to the reducer (FusedMerge::reducer).
cudaError_t launch_splitk_store_fused(const ProducerParams& p, const ProducerParams* dp, const ProducerChoice& c,
                                      cudaStream_t stream, BatchSpan batch) {
  return p.kv_dtype == KvDtype::bf16
             ? launch_producer_tc<FusedRows<LogicalOrder, KvDtype::bf16>>(p, dp, p.shape, c.tc_slots_per_cta, stream,
                                                                          batch, c.programmatic)
             : launch_producer_tc<FusedRows<LogicalOrder, KvDtype::f16>>(p, dp, p.shape, c.tc_slots_per_cta, stream,
                                                                         batch, c.programmatic);
}

cudaError_t launch_vec_store_fused(const ProducerParams& p, const ProducerParams* dp, const ProducerChoice& c,
                                   cudaStream_t stream, BatchSpan batch) {
  return p.kv_dtype == KvDtype::bf16
             ? launch_producer_tc<FusedRows<PhysicalOrder, KvDtype::bf16>>(p, dp, p.shape, c.tc_slots_per_cta, stream,
                                                                           batch, c.programmatic)
             : launch_producer_tc<FusedRows<PhysicalOrder, KvDtype::f16>>(p, dp, p.shape, c.tc_slots_per_cta, stream,
                                                                          batch, c.programmatic);
}

}  // namespace ladder::cuda_detail
