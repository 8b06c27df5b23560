// Host ceilings measured in the running process (SPEC B3): memory bandwidth and the FMA rate,
// the two ceilings of the CPU roofline that attention timings are compared against. The
// bandwidth probes are multi-threaded, touch their buffers once before timing (so page faults
// are not measured), and return the median of several repetitions in bytes per second. threads <= 0 uses the hardware concurrency. A buffer too
// small to measure (or one that cannot be allocated) gives 0.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ladder::cpu {

// Read-only streaming over `bytes` of memory: bytes read per second. The read ceiling for a
// read-dominated kernel like decode attention.
double measure_host_read_bandwidth(std::size_t bytes, int threads);

// memcpy of `bytes` into a second buffer: (bytes read + bytes written) per second, the same
// accounting as SPEC B1's device-to-device copy.
double measure_host_copy_bandwidth(std::size_t bytes, int threads);

// The arithmetic ceiling: every thread runs `fmas_per_thread` single-precision fused
// multiply-adds on registers, all threads released together: FMAs per second over all threads,
// with the widest vectors this CPU has (8 lanes with AVX2 + FMA; where it has AVX-512F, 16-lane
// FMAs too, and the faster of the two: a Zen 5 core issues them at the same rate, so twice the
// FMAs, while a Zen 4 core splits each into two halves). The fast producer runs the same width
// (CpuVectors).
double measure_host_fma_rate(std::int64_t fmas_per_thread, int threads);

}  // namespace ladder::cpu
