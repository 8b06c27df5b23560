// G4 interleaved producer for growing head-major planes (never wrapped: row t holds token t).
// Current-token bypass: token visible-1 is read by every workgroup from the f32 activations
// cur_k/cur_v (after the range rule of nonfinite.hpp, as the store applies it), never
// round-tripped through the plane's dtype; one warp per KV head also stores it into the
// plane (fused store). Sibling query heads are scheduled together (all siblings of a KV head in
// one warp, see producer.cuh): a schedule choice, never a change in what any head computes.
#include "cuda/producers.cuh"

namespace ladder::cuda_detail {
namespace {

// A token's location: its plane row, or kCurrent for the current token.
template <KvDtype D>
struct InterleavedRows {
  static constexpr KernelFamily kFamily = KernelFamily::interleaved;
  static constexpr KvDtype kDtype = D;
  static constexpr CurrentRow kCurrentRow = CurrentRow::split;
  static constexpr int kCurrent = -1;
  __device__ static int current(const ProducerParams& p) { return p.visible - 1; }
  __device__ static int locate(const ProducerParams& p, int t) {
    return t == current(p) ? kCurrent : p.rows.row(t);
  }
  // The current token has no plane row to prefetch; its f32 values are read when widened.
  __device__ static RawRow load_k_raw(const ProducerParams& p, int loc, int kvh, int d0) {
    return loc == kCurrent ? RawRow{} : load_raw4(p.rows.k + p.rows.strides.offset(loc, kvh) + d0);
  }
  __device__ static RawRow load_v_raw(const ProducerParams& p, int loc, int kvh, int d0) {
    return loc == kCurrent ? RawRow{} : load_raw4(p.rows.v + p.rows.strides.offset(loc, kvh) + d0);
  }
  __device__ static Float4 widen_k(const ProducerParams& p, RawRow raw, int loc, int kvh, int d0) {
    return loc == kCurrent ? in_range4<D>(load_float4(p.cur_k + kvh * kHeadDim + d0)) : widen4<D>(raw);
  }
  __device__ static Float4 widen_v(const ProducerParams& p, RawRow raw, int loc, int kvh, int d0) {
    return loc == kCurrent ? in_range4<D>(load_float4(p.cur_v + kvh * kHeadDim + d0)) : widen4<D>(raw);
  }
  // The tensor-core producer never reads the current token's plane row (nullptr: zero-filled,
  // then filled from the activations).
  __device__ static const KvWord* k_row(const ProducerParams& p, int loc, int kvh) {
    return loc == kCurrent ? nullptr : p.rows.k + p.rows.strides.offset(loc, kvh);
  }
  __device__ static const KvWord* v_row(const ProducerParams& p, int loc, int kvh) {
    return loc == kCurrent ? nullptr : p.rows.v + p.rows.strides.offset(loc, kvh);
  }
};

}  // namespace

cudaError_t launch_interleaved(const ProducerParams& p, const ProducerParams* dp, const ProducerChoice& c,
                               cudaStream_t stream, BatchSpan batch) {
  return p.kv_dtype == KvDtype::bf16
             ? launch_producer_family<InterleavedRows<KvDtype::bf16>>(p, dp, c, stream, batch)
             : launch_producer_family<InterleavedRows<KvDtype::f16>>(p, dp, c, stream, batch);
}

}  // namespace ladder::cuda_detail
