// G3 vec producer. vec reads the window in logical order in 32-token blocks, token t at
// p.rows.row(t) (ring_logical: PlaneState::physical, the one logical -> physical accessor), so
// a full wrapped ring is read as two physical spans, the older one first, and gives the bits of
// splitk on the same ring and of vec on the same rows unwrapped (P7; R1 keeps a partially
// wrapped ring away). A block may straddle the ring's physical end: each token is located on its
// own. Tokens from tail_first on come from the 32-row pad block (filled by copy_rows.cu), so a
// ragged head-major tail is read from scratch, never past the plane; staged runs this kernel
// over its staged rows (contiguous). Both stride layouts are the same code: PlaneStrides says
// whether a row is one head (head-major) or a full token (token-major).
#include "cuda/producers.cuh"

namespace ladder::cuda_detail {
namespace {

// A token's location: row * 2 + source, source 0 = the span, 1 = the pad block. D: the rows' dtype.
template <KvDtype D>
struct VecRows {
  static constexpr KernelFamily kFamily = KernelFamily::vec;
  static constexpr KvDtype kDtype = D;
  static constexpr CurrentRow kCurrentRow = CurrentRow::plane;
  static constexpr int kFromTail = 1;
  __device__ static int locate(const ProducerParams& p, int t) {
    return t < p.tail_first ? p.rows.row(t) * 2 : (t - p.tail_first) * 2 + kFromTail;
  }
  __device__ static const KvWord* at(const RowSource& span, const RowSource& tail, bool plane_k, int loc,
                                            int kvh, int d0) {
    const RowSource& src = (loc & kFromTail) ? tail : span;
    return (plane_k ? src.k : src.v) + src.strides.offset(loc >> 1, kvh) + d0;
  }
  __device__ static RawRow load_k_raw(const ProducerParams& p, int loc, int kvh, int d0) {
    return load_raw4(at(p.rows, p.tail, true, loc, kvh, d0));
  }
  __device__ static RawRow load_v_raw(const ProducerParams& p, int loc, int kvh, int d0) {
    return load_raw4(at(p.rows, p.tail, false, loc, kvh, d0));
  }
  __device__ static Float4 widen_k(const ProducerParams&, RawRow raw, int, int, int) { return widen4<D>(raw); }
  __device__ static Float4 widen_v(const ProducerParams&, RawRow raw, int, int, int) { return widen4<D>(raw); }
  __device__ static const KvWord* k_row(const ProducerParams& p, int loc, int kvh) {
    return at(p.rows, p.tail, true, loc, kvh, 0);
  }
  __device__ static const KvWord* v_row(const ProducerParams& p, int loc, int kvh) {
    return at(p.rows, p.tail, false, loc, kvh, 0);
  }
};

}  // namespace

cudaError_t launch_vec(const ProducerParams& p, const ProducerParams* dp, const ProducerChoice& c,
                       cudaStream_t stream, BatchSpan batch) {
  return p.kv_dtype == KvDtype::bf16 ? launch_producer_family<VecRows<KvDtype::bf16>>(p, dp, c, stream, batch)
                                     : launch_producer_family<VecRows<KvDtype::f16>>(p, dp, c, stream, batch);
}

}  // namespace ladder::cuda_detail
