// G2 splitk producer: ring-native. Token t of the window is logical logical_start + t, found
// through PlaneState::physical (the one logical -> physical accessor), so a wrapped or partially
// wrapped token-major ring is read in logical order with no staging.
#include "cuda/producers.cuh"

namespace ladder::cuda_detail {
namespace {

template <KvDtype D>
struct SplitKRows {
  static constexpr KernelFamily kFamily = KernelFamily::splitk;
  static constexpr KvDtype kDtype = D;
  static constexpr CurrentRow kCurrentRow = CurrentRow::plane;
  __device__ static int locate(const ProducerParams& p, int t) { return p.rows.row(t); }
  __device__ static RawRow load_k_raw(const ProducerParams& p, int row, int kvh, int d0) {
    return load_raw4(p.rows.k + p.rows.strides.offset(row, kvh) + d0);
  }
  __device__ static RawRow load_v_raw(const ProducerParams& p, int row, int kvh, int d0) {
    return load_raw4(p.rows.v + p.rows.strides.offset(row, kvh) + d0);
  }
  __device__ static Float4 widen_k(const ProducerParams&, RawRow raw, int, int, int) { return widen4<D>(raw); }
  __device__ static Float4 widen_v(const ProducerParams&, RawRow raw, int, int, int) { return widen4<D>(raw); }
  __device__ static const KvWord* k_row(const ProducerParams& p, int row, int kvh) {
    return p.rows.k + p.rows.strides.offset(row, kvh);
  }
  __device__ static const KvWord* v_row(const ProducerParams& p, int row, int kvh) {
    return p.rows.v + p.rows.strides.offset(row, kvh);
  }
};

}  // namespace

cudaError_t launch_splitk(const ProducerParams& p, const ProducerParams* dp, const ProducerChoice& c,
                          cudaStream_t stream, BatchSpan batch) {
  return p.kv_dtype == KvDtype::bf16 ? launch_producer_family<SplitKRows<KvDtype::bf16>>(p, dp, c, stream, batch)
                                     : launch_producer_family<SplitKRows<KvDtype::f16>>(p, dp, c, stream, batch);
}

}  // namespace ladder::cuda_detail
