// Diagnostic builds only (cmake -DLADDER_DIAG_TIMELINE=ON): thread 0 of a CTA records the global
// timer at named points of the kernels (entry, past the PDL wait, each walked slot's begin, fold,
// copy issue and partial, exit), so that one replay of a step or a layer shows where its time
// goes between and inside the launches (docs/gpu.md). In every other build TimelineCta is empty
// and the kernels' code is unchanged.
//
// The library is built without relocatable device code, so each translation unit that records
// has its own sink (a __constant__ copy); LADDER_TIMELINE_SINK(name) defines that unit's binder,
// and cuda::timeline_enable (timeline.cu) binds every unit's sink to one device buffer.
#pragma once

#include <cuda_runtime.h>

#include "ladder/cuda/timeline.hpp"

namespace ladder::cuda_detail {

// The global nanosecond timer (also what the tests' debug_sleep_ns waits on, common.cuh).
__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

#if LADDER_DIAG_TIMELINE
// Records, TimelineSink::per_sm of them per SM, each SM's area filled from its own counter: CTAs of
// different SMs never touch one counter, and a CTA takes its kTimelinePerCta records with one
// atomic, whose reply it waits for only at its second mark (at the first it keeps the time), so a
// mark costs the CTA's thread 0 one 32-byte store. (The first version, one atomic per mark on one
// counter, slowed a layer by ~2 us, and its CTAs' first interval grew with their number.)
struct TimelineSink {
  cuda::TimelineRecord* records = nullptr;
  unsigned* per_sm_count = nullptr;
  unsigned per_sm = 0;
  unsigned sms = 0;
};
namespace {
__constant__ TimelineSink g_timeline_sink;  // this translation unit's copy
}  // namespace

// One CTA's marks (thread 0 records; the other threads' calls do nothing).
class TimelineCta {
 public:
  __device__ TimelineCta(cuda::TimelineKernel kernel, const void* tag) : kernel_(kernel), tag_(tag) {
    const TimelineSink s = g_timeline_sink;
    if (s.records == nullptr || threadIdx.x != 0) return;
    entry_ns_ = global_timer_ns();
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    sm_ = sm;
    if (sm < s.sms) {
      const unsigned at = atomicAdd(s.per_sm_count + sm, cuda::kTimelinePerCta);
      if (at + cuda::kTimelinePerCta <= s.per_sm) records_ = s.records + static_cast<std::size_t>(sm) * s.per_sm + at;
    }
  }
  __device__ void mark(cuda::TimelineEvent event, int aux = 0) {
    if (records_ == nullptr) return;
    const unsigned long long now = global_timer_ns();
    if (used_ == 0) put(entry_ns_, cuda::TimelineEvent::entry, 0);
    put(now, event, aux);
  }

 private:
  __device__ void put(unsigned long long ns, cuda::TimelineEvent event, int aux) {
    if (used_ >= cuda::kTimelinePerCta) return;
    cuda::TimelineRecord r;
    r.ns = ns;
    r.tag = reinterpret_cast<unsigned long long>(tag_);
    r.cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    r.sm = sm_;
    r.kernel = static_cast<unsigned short>(kernel_);
    r.event = static_cast<unsigned short>(event);
    r.aux = aux;
    records_[used_++] = r;
  }
  cuda::TimelineKernel kernel_;
  const void* tag_;
  cuda::TimelineRecord* records_ = nullptr;
  unsigned long long entry_ns_ = 0;
  unsigned sm_ = 0;
  unsigned used_ = 0;
};

#define LADDER_TIMELINE_SINK(name)                                                            \
  cudaError_t timeline_bind_##name(const ::ladder::cuda_detail::TimelineSink& sink) {         \
    return cudaMemcpyToSymbol(::ladder::cuda_detail::g_timeline_sink, &sink, sizeof(sink)); \
  }
#else
class TimelineCta {
 public:
  __device__ TimelineCta(cuda::TimelineKernel, const void*) {}
  __device__ void mark(cuda::TimelineEvent, int = 0) {}
};
#define LADDER_TIMELINE_SINK(name)
#endif

}  // namespace ladder::cuda_detail
