// Device planes for the Python module over the CUDA backend's raw-pointer API: rows in device
// memory (cudaMalloc), metadata on the host following the library's append rule, attention
// through ladder::cuda::run_route on the caller's stream with the caller's tensors (no copies).
#include <cuda_runtime.h>

#include <fmt/format.h>

#include <algorithm>

#include "cuda/kernels.hpp"
#include "device_rows.hpp"
#include "ladder/cuda/cuda_backend.hpp"
#include "ladder/reference.hpp"

namespace ladder::py {

namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  // Read and drop the runtime's last error: left there, a refused allocation would be reported
  // again by the next launch's check as that launch's failure.
  (void)cudaGetLastError();
  const ErrorTypes& t = error_types();
  raise(e == cudaErrorMemoryAllocation ? t.out_of_memory : t.device_error,
        fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

struct DeviceBuffer {
  void* p = nullptr;
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) { check_cuda(cudaMalloc(&p, bytes), "allocating device memory for a plane"); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p(o.p) { o.p = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p, o.p);
    return *this;
  }
  ~DeviceBuffer() {
    if (p != nullptr) cudaFree(p);
  }
};

class CudaRows final : public DeviceRows {
 public:
  explicit CudaRows(const PlaneConfig& cfg) {
    check(cfg.validate());
    if (!cuda_available()) raise(error_types().no_device, "no usable CUDA device is present");
    plane_.cfg = cfg;
    plane_.state.capacity = cfg.capacity;
    allocate(cfg.capacity);
  }

  const PlaneConfig& config() const override { return plane_.cfg; }
  const PlaneState& state() const override { return plane_.state; }

  int append(int position) override {
    const AppendPlan plan = take(plan_append(plane_.cfg, plane_.state, position));
    if (plan.grow_to > 0) grow(plan.grow_to);
    plane_.state = plan.next;
    return plan.slot;
  }

  void write_row(int slot, const float* k, const float* v, Where from) override {
    if (from == Where::cuda && device_store_fits()) {
      // Rows already in device memory go straight to the plane through the library's store
      // kernel (range rule, round to nearest even), on the default stream: no trip to the host.
      StoreParams p;
      p.kv_dtype = plane_.cfg.kv_dtype;
      p.n_kv_heads = plane_.cfg.n_kv_heads;
      p.head_dim = plane_.cfg.head_dim;
      p.k = k;
      p.v = v;
      p.plane_k = plane_.k;
      p.plane_v = plane_.v;
      p.strides = plane_.strides();
      p.slot = slot;
      check_cuda(cuda_detail::launch_store(p, nullptr, nullptr), "storing a row");
      return;
    }
    const int n = plane_.cfg.n_kv_heads * plane_.cfg.head_dim;
    std::vector<float> hk(n), hv(n);
    if (from == Where::cuda) {
      check_cuda(cudaMemcpy(hk.data(), k, n * sizeof(float), cudaMemcpyDeviceToHost), "reading k");
      check_cuda(cudaMemcpy(hv.data(), v, n * sizeof(float), cudaMemcpyDeviceToHost), "reading v");
    } else {
      std::copy(k, k + n, hk.begin());
      std::copy(v, v + n, hv.begin());
    }
    // Rows are ruled and rounded on the host with the library's store rule (kv_encode in the
    // plane's dtype), the same as HostPlane.
    const PlaneStrides s = plane_.strides();
    const int d = plane_.cfg.head_dim;
    std::vector<KvWord> row(d);
    for (int h = 0; h < plane_.cfg.n_kv_heads; ++h) {
      const std::int64_t at = s.offset(slot, h);
      for (int i = 0; i < d; ++i) row[i] = kv_encode(hk[h * d + i], plane_.cfg.kv_dtype);
      check_cuda(cudaMemcpy(plane_.k + at, row.data(), d * sizeof(KvWord), cudaMemcpyHostToDevice), "storing k");
      for (int i = 0; i < d; ++i) row[i] = kv_encode(hv[h * d + i], plane_.cfg.kv_dtype);
      check_cuda(cudaMemcpy(plane_.v + at, row.data(), d * sizeof(KvWord), cudaMemcpyHostToDevice), "storing v");
    }
  }

  std::vector<KvWord> copy(bool values) const override {
    std::vector<KvWord> out(elements());
    check_cuda(cudaMemcpy(out.data(), values ? plane_.v : plane_.k, out.size() * sizeof(KvWord), cudaMemcpyDeviceToHost),
               "copying the plane to the host");
    return out;
  }

  void upload(bool values, const std::vector<KvWord>& data) override {
    if (data.size() != elements()) raise(error_types().base, "plane upload of the wrong size");
    check_cuda(cudaMemcpy(values ? plane_.v : plane_.k, data.data(), data.size() * sizeof(KvWord), cudaMemcpyHostToDevice),
               "copying rows to the plane");
  }

  void attend(Route r, int position, int slot, const HeadShape& shape, const float* q, const float* k,
              const float* v, float* out, std::uintptr_t stream) override {
    check(cuda::check_head_shape(shape));
    const ScratchNeeds needs = scratch_needs(r, shape_geometry(shape), visible_rows(position, plane_.cfg.window));
    reserve(needs);
    cuda::DeviceLayerIO io{q, k, v, out};
    auto* s = reinterpret_cast<void*>(stream);
    check(cuda::run_route(r, plane_, position, slot, shape, io, ws_, s));
    // The workspace is reused by the next call on any stream: wait for this one to finish with it.
    check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), "running the route");
  }

 private:
  // The store kernel's shape: the head_dim the GPU routes support (check_head_shape).
  bool device_store_fits() const {
    HeadShape shape;
    shape.n_heads = plane_.cfg.n_kv_heads;
    shape.n_kv_heads = plane_.cfg.n_kv_heads;
    shape.head_dim = plane_.cfg.head_dim;
    return cuda::check_head_shape(shape).ok();
  }

  std::size_t elements() const {
    return static_cast<std::size_t>(plane_.state.capacity) * plane_.cfg.n_kv_heads * plane_.cfg.head_dim;
  }

  void allocate(int rows) {
    const std::size_t n = static_cast<std::size_t>(rows) * plane_.cfg.n_kv_heads * plane_.cfg.head_dim;
    DeviceBuffer k(n * sizeof(KvWord)), v(n * sizeof(KvWord));
    // Unwritten rows hold a NaN of the plane's dtype, as on the host, so a read of a row nobody
    // stored shows up.
    poison(k.p, n, plane_.cfg.kv_dtype);
    poison(v.p, n, plane_.cfg.kv_dtype);
    k_ = std::move(k);
    v_ = std::move(v);
    plane_.k = static_cast<KvWord*>(k_.p);
    plane_.v = static_cast<KvWord*>(v_.p);
  }

  static void poison(void* p, std::size_t words, KvDtype dtype) {
    const std::vector<KvWord> nan(words, kv_quiet_nan(dtype));
    check_cuda(cudaMemcpy(p, nan.data(), words * sizeof(KvWord), cudaMemcpyHostToDevice), "initialising a plane");
  }

  // A growing plane is head-major: each KV head's rows move to their place in the larger plane.
  void grow(int rows) {
    const int old_rows = plane_.state.capacity;
    const int d = plane_.cfg.head_dim;
    DeviceBuffer old_k = std::move(k_), old_v = std::move(v_);
    allocate(rows);
    for (int h = 0; h < plane_.cfg.n_kv_heads; ++h) {
      const std::size_t from = static_cast<std::size_t>(h) * old_rows * d;
      const std::size_t to = static_cast<std::size_t>(h) * rows * d;
      check_cuda(cudaMemcpy(plane_.k + to, static_cast<KvWord*>(old_k.p) + from,
                            static_cast<std::size_t>(old_rows) * d * sizeof(KvWord), cudaMemcpyDeviceToDevice),
                 "growing a plane");
      check_cuda(cudaMemcpy(plane_.v + to, static_cast<KvWord*>(old_v.p) + from,
                            static_cast<std::size_t>(old_rows) * d * sizeof(KvWord), cudaMemcpyDeviceToDevice),
                 "growing a plane");
    }
  }

  void reserve(const ScratchNeeds& n) {
    if (n.partial_floats <= ws_.partial_floats && n.pad_halfs <= ws_.pad_halfs && n.stage_halfs <= ws_.stage_halfs)
      return;
    ScratchNeeds grown;
    grown.partial_floats = std::max(n.partial_floats, ws_.partial_floats);
    grown.pad_halfs = std::max(n.pad_halfs, ws_.pad_halfs);
    grown.stage_halfs = std::max(n.stage_halfs, ws_.stage_halfs);
    cuda::free_workspace(ws_);
    ws_ = take(cuda::allocate_workspace(grown));
  }

  cuda::DevicePlane plane_;
  DeviceBuffer k_, v_;
  cuda::DeviceWorkspace ws_;

 public:
  ~CudaRows() override { cuda::free_workspace(ws_); }
};

}  // namespace

std::unique_ptr<DeviceRows> make_device_rows(const PlaneConfig& cfg) { return std::make_unique<CudaRows>(cfg); }

bool device_available() { return cuda_available(); }

std::string device_description() {
  Result<cuda::DeviceInfo> info = cuda::device_info();
  if (!info.ok()) return info.status().to_string();
  return fmt::format("{} (sm_{}{}, {} SMs, {} MB L2)", info->name, info->cc_major, info->cc_minor, info->sm_count,
                     info->l2_bytes / (1 << 20));
}

}  // namespace ladder::py
