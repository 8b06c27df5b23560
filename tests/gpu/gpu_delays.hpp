// The producers' test hook for forcing an order among CTAs (LaunchTuning::debug_arrival_delay_ns):
// a device array of nanoseconds, one per flat warp slot, that the CTA of slot f sleeps at the
// point the kernel names (fused: before it arrives at the merge; store-fused: after it allowed the
// PDL reducer to launch, before it writes its partial).
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "ladder/heuristics.hpp"

namespace ladder::test {

// Flat warp slots of the largest schedule (32 workgroups x 4 warps): the delay array's length.
inline constexpr int kMaxSlots = kMaxWorkgroups * kMaxWarpsPerWorkgroup;

class Delays {
 public:
  Delays() { ok_ = cudaMalloc(&d_, kMaxSlots * sizeof(unsigned)) == cudaSuccess; }
  ~Delays() { cudaFree(d_); }
  Delays(const Delays&) = delete;
  Delays& operator=(const Delays&) = delete;
  // ns: kMaxSlots values.
  bool set(const std::vector<unsigned>& ns) {
    return ok_ && ns.size() == static_cast<std::size_t>(kMaxSlots) &&
           cudaMemcpy(d_, ns.data(), kMaxSlots * sizeof(unsigned), cudaMemcpyHostToDevice) == cudaSuccess;
  }
  const unsigned* get() const { return d_; }

 private:
  unsigned* d_ = nullptr;
  bool ok_ = false;
};

}  // namespace ladder::test
