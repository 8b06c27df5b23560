// Device presence, device facts and the bandwidth probes a bench measures its ceiling with (B1).
#include <cuda_runtime.h>

#include <algorithm>
#include <fmt/format.h>
#include <vector>

#include "cuda/device_memory.hpp"
#include "cuda/kernels.hpp"
#include "cuda/dispatch.hpp"
#include "ladder/cuda/cuda_backend.hpp"

namespace ladder {

bool cuda_available() {
  static const bool available = [] {
    int n = 0;
    const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    (void)cudaGetLastError();
    return ok;
  }();
  return available;
}

namespace cuda {
namespace {

// Resident blocks per SM the read probe launches (a persistent grid-stride stream).
inline constexpr int kReadBlocksPerSm = 8;
inline constexpr int kWarmupRuns = 3;
inline constexpr double kBytesPerGB = 1e9;
inline constexpr double kUsPerMs = 1e3;

// Times `run` (which enqueues on `stream`) `reps` times with CUDA events; returns the median ms.
template <class Run>
Result<double> median_ms(Run&& run, int reps, cudaStream_t stream) {
  cuda_detail::EventHandle start, stop;
  LADDER_TRY(cuda_detail::cuda_status(cudaEventCreate(start.out()), "creating an event"));
  LADDER_TRY(cuda_detail::cuda_status(cudaEventCreate(stop.out()), "creating an event"));
  const cudaEvent_t a = start.get(), b = stop.get();
  Status s;
  std::vector<float> ms;
  for (int i = 0; s.ok() && i < kWarmupRuns; ++i) s = run();
  for (int i = 0; s.ok() && i < reps; ++i) {
    s = cuda_detail::cuda_status(cudaEventRecord(a, stream), "recording an event");
    if (s.ok()) s = run();
    if (s.ok()) s = cuda_detail::cuda_status(cudaEventRecord(b, stream), "recording an event");
    if (s.ok()) s = cuda_detail::cuda_status(cudaEventSynchronize(b), "waiting for an event");
    float t = 0.0f;
    if (s.ok()) s = cuda_detail::cuda_status(cudaEventElapsedTime(&t, a, b), "reading an event");
    ms.push_back(t);
  }
  if (!s.ok()) return s;
  std::sort(ms.begin(), ms.end());
  return static_cast<double>(ms[ms.size() / 2]);
}

BandwidthSample sample(std::int64_t bytes, double ms) {
  BandwidthSample out;
  out.bytes_moved = bytes;
  out.median_us = ms * kUsPerMs;
  out.gb_per_s = static_cast<double>(bytes) / (ms / kUsPerMs) / kBytesPerGB;
  return out;
}

Status check_probe_args(std::int64_t bytes, int reps) {
  if (bytes < static_cast<std::int64_t>(sizeof(uint4)) || reps <= 0)
    return make_error(ErrorCode::invalid_argument,
                      fmt::format("bandwidth probe needs bytes >= 16 and reps > 0 (got {}, {})", bytes, reps));
  return cuda_detail::require_device();
}

}  // namespace

Result<DeviceInfo> device_info() {
  LADDER_TRY(cuda_detail::require_device());
  DeviceInfo info;
  LADDER_TRY(cuda_detail::cuda_status(cudaGetDevice(&info.ordinal), "reading the current device"));
  cudaDeviceProp prop{};
  LADDER_TRY(cuda_detail::cuda_status(cudaGetDeviceProperties(&prop, info.ordinal), "reading device properties"));
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.l2_bytes = prop.l2CacheSize;
  info.global_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  return info;
}

Result<BandwidthSample> measure_device_copy_bandwidth(std::int64_t bytes, int reps) {
  LADDER_TRY(check_probe_args(bytes, reps));
  cuda_detail::DeviceArray<unsigned char> src, dst;
  LADDER_TRY(src.allocate(static_cast<std::size_t>(bytes), "the copy probe's source"));
  LADDER_TRY(dst.allocate(static_cast<std::size_t>(bytes), "the copy probe's destination"));
  LADDER_TRY(cuda_detail::cuda_status(cudaMemset(src.get(), 1, static_cast<std::size_t>(bytes)), "filling"));
  Result<double> ms = median_ms(
      [&]() -> Status {
        return cuda_detail::cuda_status(
            cudaMemcpyAsync(dst.get(), src.get(), static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice, nullptr),
            "device-to-device copy");
      },
      reps, nullptr);
  if (!ms) return ms.status();
  return sample(2 * bytes, *ms);
}

Result<BandwidthSample> measure_device_read_bandwidth(std::int64_t bytes, int reps) {
  LADDER_TRY(check_probe_args(bytes, reps));
  const std::int64_t words = bytes / static_cast<std::int64_t>(sizeof(uint4));
  cuda_detail::DeviceArray<uint4> src;
  cuda_detail::DeviceArray<unsigned> sink;
  LADDER_TRY(src.allocate(static_cast<std::size_t>(words), "the read probe's buffer"));
  LADDER_TRY(sink.allocate(1, "the read probe's sink"));
  LADDER_TRY(cuda_detail::cuda_status(cudaMemset(src.get(), 1, static_cast<std::size_t>(words) * sizeof(uint4)),
                                      "filling"));
  Result<DeviceInfo> info = device_info();
  if (!info) return info.status();
  const unsigned blocks = static_cast<unsigned>(info->sm_count * kReadBlocksPerSm);
  // Every word holds 0x01010101 x 4, whose xor is 0: `never` = 1 can not match.
  constexpr unsigned kNever = 1;
  cuda_detail::clear_stale_error();
  Result<double> ms = median_ms(
      [&]() -> Status {
        return cuda_detail::cuda_status(
            cuda_detail::launch_read_stream(src.get(), words * static_cast<std::int64_t>(sizeof(uint4)), blocks,
                                            kNever, sink.get(), nullptr),
            "launching the read probe");
      },
      reps, nullptr);
  if (!ms) return ms.status();
  return sample(words * static_cast<std::int64_t>(sizeof(uint4)), *ms);
}

}  // namespace cuda
}  // namespace ladder
