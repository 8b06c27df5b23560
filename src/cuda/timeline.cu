// The timeline's host side (include/ladder/cuda/timeline.hpp): one device buffer of records and
// its count, bound to the sink of every translation unit that records (timeline.cuh).
#include <cuda_runtime.h>

#include <string>

#include "cuda/timeline.cuh"

#if LADDER_DIAG_TIMELINE
namespace ladder::cuda_detail {
// Defined by LADDER_TIMELINE_SINK in the units whose kernels record.
cudaError_t timeline_bind_fused(const TimelineSink& sink);
cudaError_t timeline_bind_reduce(const TimelineSink& sink);
cudaError_t timeline_bind_link(const TimelineSink& sink);
cudaError_t timeline_bind_fetch(const TimelineSink& sink);
cudaError_t timeline_bind_count(const TimelineSink& sink);
namespace {
TimelineSink g_host_sink;  // what every unit was bound to (the buffers live until the process ends)
}  // namespace
}  // namespace ladder::cuda_detail
#endif

namespace ladder::cuda {

#if LADDER_DIAG_TIMELINE
bool timeline_compiled() { return true; }

Status timeline_enable(std::uint32_t capacity) {
  using cuda_detail::g_host_sink;
  if (g_host_sink.records != nullptr) return {};
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms <= 0)
    return make_error(ErrorCode::device_error, "the timeline: reading the SM count");
  cuda_detail::TimelineSink sink;
  sink.sms = static_cast<unsigned>(sms);
  sink.per_sm = capacity / sink.sms;
  if (cudaMalloc(&sink.records, sizeof(TimelineRecord) * sink.per_sm * sink.sms) != cudaSuccess ||
      cudaMalloc(&sink.per_sm_count, sizeof(unsigned) * sink.sms) != cudaSuccess)
    return make_error(ErrorCode::out_of_memory, "the timeline's record buffer");
  for (auto bind : {cuda_detail::timeline_bind_fused, cuda_detail::timeline_bind_reduce, cuda_detail::timeline_bind_link,
                    cuda_detail::timeline_bind_fetch, cuda_detail::timeline_bind_count})
    if (const cudaError_t e = bind(sink); e != cudaSuccess)
      return make_error(ErrorCode::device_error, std::string("binding the timeline: ") + cudaGetErrorString(e));
  g_host_sink = sink;
  return timeline_reset(nullptr);
}

Status timeline_reset(void* stream) {
  const cuda_detail::TimelineSink& s = cuda_detail::g_host_sink;
  if (s.records == nullptr) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  if (cudaMemsetAsync(s.per_sm_count, 0, sizeof(unsigned) * s.sms, st) != cudaSuccess ||
      cudaMemsetAsync(s.records, 0, sizeof(TimelineRecord) * s.per_sm * s.sms, st) != cudaSuccess)
    return make_error(ErrorCode::device_error, "resetting the timeline");
  return {};
}

Result<std::vector<TimelineRecord>> timeline_take() {
  const cuda_detail::TimelineSink& s = cuda_detail::g_host_sink;
  std::vector<TimelineRecord> out;
  if (s.records == nullptr) return out;
  std::vector<TimelineRecord> all(static_cast<std::size_t>(s.per_sm) * s.sms);
  if (cudaDeviceSynchronize() != cudaSuccess ||
      cudaMemcpy(all.data(), s.records, sizeof(TimelineRecord) * all.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
    return make_error(ErrorCode::device_error, "reading the timeline's records");
  for (const TimelineRecord& r : all)
    if (r.ns != 0) out.push_back(r);  // a record no CTA wrote stays zero
  return out;
}
#else
bool timeline_compiled() { return false; }
Status timeline_enable(std::uint32_t) {
  return make_error(ErrorCode::unsupported, "this build records no timeline (configure with -DLADDER_DIAG_TIMELINE=ON)");
}
Status timeline_reset(void*) { return {}; }
Result<std::vector<TimelineRecord>> timeline_take() { return std::vector<TimelineRecord>{}; }
#endif

}  // namespace ladder::cuda
