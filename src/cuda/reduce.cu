// The reducer shared by every route (G2/G3/G4): per head, merge the nwg workgroup partials
// [m, s, o[128]] in workgroup order with exp(m_i - M) corrections (softmax.hpp's rule), then
// divide once; when the producer left the warp merge to it (parts > 1), each workgroup's warp
// partials are folded first, in warp order. Behind a store-fused producer a direct launch uses PDL
// and waits for the producer grid (griddepcontrol.wait) before it loads a partial; the producer
// allows it once each CTA's last slot is folded (docs/perf.md, changes 10 and 26).
#include <iterator>

#include "cuda/kernels.hpp"
#include "cuda/reduce.cuh"

namespace ladder::cuda_detail {
namespace {

// A next layer's producer launched with PDL may start its plane prefetch once every earlier
// kernel of the stream has completed: each kernel allows it after waiting for the producer's
// grid (common.cuh's rule). The direct kernel is launched with PDL behind a store-fused
// producer; the batched ones only for a call of at most kBatchedReducerPdlUpToBatch sequences
// (heuristics.hpp), plainly otherwise, where the wait is a no-op.
// The direct kernel, one per parts count (the host dispatches on p.parts): each holds only its
// own step 4, where one kernel with all three took the registers and schedule of the largest.
// kMaxGroups: the bound on p.groups of the launches it takes (reduce_head_passes).
template <int kParts, int kMaxGroups = kMaxWorkgroups>
__global__ void __launch_bounds__(kReduceThreads) reduce_kernel(ReduceParams p) {
  TimelineCta timeline(cuda::TimelineKernel::reducer, p.out);
  pdl_wait();  // the producer's grid and its partials (a no-op for a launch without PDL)
  timeline.mark(cuda::TimelineEvent::waited);
  pdl_allow_dependents();
  reduce_head_passes<kParts, reduce_pass_loads(kParts, kMaxWorkgroups * kMaxWarpsPerWorkgroup), kMaxGroups>(
      p, static_cast<int>(blockIdx.x));
  timeline.mark(cuda::TimelineEvent::exit);
}
// fold_ctas: the producers' BatchSpan::tc_ctas where they fold whole workgroups (parts 1 for an
// entry they folded, reduce_parts_after_fold), else 0.
__global__ void __launch_bounds__(kReduceThreads) reduce_kernel_indirect(const ReduceParams* pp, std::size_t stride,
                                                                         unsigned fold_ctas) {
  pdl_wait();
  pdl_allow_dependents();
  ReduceParams p = batch_entry(pp, stride);
  p.parts = reduce_parts_after_fold(p, static_cast<int>(fold_ctas));
  if (p.groups <= 0) return;  // an entry without a reduce (a fused route, an empty batch slot)
  TimelineCta timeline(cuda::TimelineKernel::reducer, p.out);
  reduce_head_exact(p, static_cast<int>(blockIdx.x));
  timeline.mark(cuda::TimelineEvent::exit);
}
__global__ void __launch_bounds__(kReduceThreads, kLeanReduceCtasPerSm)
    reduce_kernel_indirect_lean(const ReduceParams* pp, std::size_t stride, unsigned fold_ctas) {
  pdl_wait();
  pdl_allow_dependents();
  ReduceParams p = batch_entry(pp, stride);
  p.parts = reduce_parts_after_fold(p, static_cast<int>(fold_ctas));
  if (p.groups <= 0) return;
  TimelineCta timeline(cuda::TimelineKernel::reducer, p.out);
  reduce_head_lean(p, static_cast<int>(blockIdx.x));
  timeline.mark(cuda::TimelineEvent::exit);
}

}  // namespace

LADDER_TIMELINE_SINK(reduce)

// A direct launch at parts 2 or 4 takes the kernel with the smallest group bound that holds its
// groups (heuristics.hpp, kReduceGroupBounds): the chain's empty steps past the last group are
// shuffles and folds all the same.
template <int kParts>
cudaError_t launch_direct_reduce(const cudaLaunchConfig_t& cfg, const ReduceParams& p) {
  static_assert(std::size(kReduceGroupBounds) == 2, "the bounds instantiated below");
  static_assert(kReduceGroupBounds[0] < kReduceGroupBounds[1] && kReduceGroupBounds[1] < kMaxWorkgroups,
                "ascending, each below the unbounded kernel's kMaxWorkgroups");
  if (p.groups <= kReduceGroupBounds[0]) return cudaLaunchKernelEx(&cfg, reduce_kernel<kParts, kReduceGroupBounds[0]>, p);
  if (p.groups <= kReduceGroupBounds[1]) return cudaLaunchKernelEx(&cfg, reduce_kernel<kParts, kReduceGroupBounds[1]>, p);
  return cudaLaunchKernelEx(&cfg, reduce_kernel<kParts>, p);
}

// A batched launch runs the lean form (two round trips at nsg 4, but 128 registers instead of
// 168) when it has more CTAs than the one-pass kernel holds at once: 512 heads of 16 sequences
// against 396 on the H200 ran in two waves (docs/perf.md, change 20). The bits are the same.
cudaError_t launch_reduce(const ReduceParams& p, const ReduceParams* dp, const ProducerChoice& c, cudaStream_t stream,
                          BatchSpan batch, bool programmatic) {
  const cuda::ReduceForm form = c.reduce_form;
  const unsigned heads = static_cast<unsigned>(p.shape.n_heads);
  if (dp == nullptr) {
    if (!reducer_takes_parts(p.parts)) return cudaErrorInvalidValue;
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = pdl_launch_config(attr, programmatic, dim3(heads), dim3(kReduceThreads), stream);
    if (p.parts == 1) return cudaLaunchKernelEx(&cfg, reduce_kernel<1>, p);
    if (p.parts == 2) return launch_direct_reduce<2>(cfg, p);
    return launch_direct_reduce<kMaxWarpsPerWorkgroup>(cfg, p);
  }
  bool lean = form == cuda::ReduceForm::lean;
  if (form == cuda::ReduceForm::automatic) {
    static ResidentCache one_pass;
    const long long ctas = static_cast<long long>(heads) * batch.count;
    const long long resident =
        resident_ctas(reinterpret_cast<const void*>(reduce_kernel_indirect), kReduceThreads, 0, one_pass, c.device);
    lean = resident > 0 && ctas > resident;
  }
  const dim3 grid(heads, 1, static_cast<unsigned>(batch.count));
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = pdl_launch_config(attr, programmatic, grid, dim3(kReduceThreads), stream);
  const unsigned fold_ctas = batch.tc_partials == TcPartials::per_group ? batch.tc_ctas : 0u;
  return lean ? cudaLaunchKernelEx(&cfg, reduce_kernel_indirect_lean, dp, batch.stride, fold_ctas)
              : cudaLaunchKernelEx(&cfg, reduce_kernel_indirect, dp, batch.stride, fold_ctas);
}

}  // namespace ladder::cuda_detail
