// Activations in device memory (TokenIO::memory == Memory::device): the CUDA engine reads q, k,
// v and writes out where they live, with no host copies, and counts N1's range rule on the
// device. The sweep decodes the same batch three times, once from host memory and twice from
// device memory, and asks for the same bits, the same range counts (checked against counts
// injected on purpose, not recomputed) and P3 against the f64 reference; the opt-in finite check
// refuses a NaN in device memory before anything is stored. The third engine's step-state fetch
// sleeps after it let the first layer's producer start (LaunchTuning::debug_fetch_delay_ns): a
// producer that read its entry before its PDL wait would attend with the previous call's
// positions and store the row into the previous call's slot.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "cpu/batch_sweep.hpp"
#include "gpu/gpu_batch_cases.hpp"
#include "gpu/gpu_test_support.hpp"
#include "ladder/cuda_engine.hpp"

namespace ladder {
namespace {

// One device allocation of floats, freed on scope exit.
class DeviceFloats {
 public:
  explicit DeviceFloats(std::size_t n) : n_(n) {
    if (cudaMalloc(&p_, n * sizeof(float)) != cudaSuccess) p_ = nullptr;
  }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  DeviceFloats(DeviceFloats&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; }
  ~DeviceFloats() {
    if (p_ != nullptr) cudaFree(p_);
  }
  float* get() const { return p_; }
  void upload(const std::vector<float>& h) const {
    ASSERT_EQ(h.size(), n_);
    ASSERT_EQ(cudaMemcpy(p_, h.data(), n_ * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<float> download() const {
    std::vector<float> h(n_);
    EXPECT_EQ(cudaMemcpy(h.data(), p_, n_ * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }

 private:
  float* p_ = nullptr;
  std::size_t n_ = 0;
};

// One sequence's token on the device: q, k, v uploaded, out poisoned (NaN) before the call.
struct DeviceToken {
  DeviceFloats q, k, v, out;
  explicit DeviceToken(const test::TokenData& t)
      : q(t.q.size()), k(t.k.size()), v(t.v.size()), out(t.q.size()) {
    q.upload(t.q);
    k.upload(t.k);
    v.upload(t.v);
    out.upload(std::vector<float>(t.q.size(), std::nanf("")));
  }
  TokenIO io() const { return TokenIO{q.get(), k.get(), v.get(), out.get(), Memory::device}; }
};

using DeviceIoCase = test::GpuBatchCase;
constexpr auto device_io_cases = test::gpu_batch_cases;

// Long beside a launch (~2-4 us): a producer that did not wait for the fetch reads its entry
// well before the fetch has written it.
constexpr unsigned kLateFetchNs = 20000;

std::unique_ptr<Engine> make_engine(const DeviceIoCase& c, bool check_finite = false, unsigned fetch_delay_ns = 0) {
  EngineOptions opt;
  opt.device = Device::cuda;
  opt.switches = c.switches.sw;
  opt.record_trace = true;
  opt.initial_growing_capacity = test::kBatchInitialGrowing;
  opt.check_finite = check_finite;
  cuda::CudaEngineOptions copt;
  copt.use_graph = c.graph;
  copt.tuning.fusion = c.fusion;
  copt.tuning.programmatic = c.programmatic;
  copt.tuning.debug_fetch_delay_ns = fetch_delay_ns;
  Result<std::unique_ptr<Engine>> made = cuda::create_engine(test::batch_geometry(), opt, copt);
  EXPECT_TRUE(made.ok()) << made.status().to_string();
  return made ? std::move(made).value() : nullptr;
}

// The route each (sequence, layer) of an engine's last call took, from its trace.
std::map<std::pair<SequenceId, int>, Route> last_call_routes(const Engine& e, int sequences) {
  std::map<std::pair<SequenceId, int>, Route> out;
  const std::size_t n = static_cast<std::size_t>(sequences) * static_cast<std::size_t>(e.geometry().n_layers);
  for (std::size_t t = e.trace().size() - n; t < e.trace().size(); ++t)
    out[{e.trace()[t].sequence, e.trace()[t].layer}] = e.trace()[t].decision.route;
  return out;
}

// Values the range rule changes, put into the inputs on purpose: the counts they must give.
constexpr float kBeyondF16 = 1.0e6f;     // saturates to 65504
constexpr int kSaturatedPerToken = 2;    // one in k, one in q, of the token's last layer
constexpr int kSequences = 5;            // a bucket of 8 with 3 empty slots
constexpr int kSteps = 40;

class GpuDeviceIo : public ::testing::TestWithParam<DeviceIoCase> {};

TEST_P(GpuDeviceIo, DeviceMemoryGivesTheHostMemoryBits) {
  LADDER_REQUIRE_GPU();
  const DeviceIoCase& c = GetParam();
  const Geometry g = test::batch_geometry();
  std::unique_ptr<Engine> host = make_engine(c), dev = make_engine(c), late = make_engine(c, false, kLateFetchNs);
  ASSERT_TRUE(host && dev && late);
  std::vector<SequenceId> ids{0};
  for (int i = 1; i < kSequences; ++i) {
    ids.push_back(host->add_sequence().value());
    ASSERT_EQ(dev->add_sequence().value(), ids.back());
    ASSERT_EQ(late->add_sequence().value(), ids.back());
  }
  // Different depths: sequence i is filled to 37 * i tokens (rings empty, filling and wrapped,
  // growing planes grown), in batched fills from host and from device memory.
  std::vector<int> next(kSequences, 0);
  for (int p = 0; p < 37 * (kSequences - 1); ++p) {
    std::vector<test::TokenData> data;
    std::vector<DeviceToken> on_dev;
    data.reserve(kSequences);
    on_dev.reserve(kSequences);
    std::vector<SequenceToken> hcall, dcall;
    for (int i = 0; i < kSequences; ++i) {
      if (p >= 37 * i) continue;
      data.push_back(test::token_data(g, static_cast<std::uint64_t>(i), p));
      on_dev.emplace_back(data.back());
      hcall.push_back({ids[i], p, {nullptr, data.back().k.data(), data.back().v.data(), nullptr}});
      dcall.push_back({ids[i], p, on_dev.back().io()});
      dcall.back().io.q = nullptr;
      dcall.back().io.out = nullptr;
      ++next[i];
    }
    ASSERT_TRUE(host->fill(hcall).ok());
    ASSERT_TRUE(dev->fill(dcall).ok());
    ASSERT_TRUE(late->fill(dcall).ok());
  }
  EXPECT_EQ(dev->range_stats(), RangeStats{}) << "the random inputs lie in [-1, 1]";
  double worst = 0.0;
  const std::size_t qn = static_cast<std::size_t>(g.n_heads) * g.head_dim;
  const std::size_t kvn = static_cast<std::size_t>(g.n_kv_heads) * g.head_dim;
  const int last = g.n_layers - 1;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<test::TokenData> data;
    data.reserve(kSequences);
    for (int i = 0; i < kSequences; ++i) {
      data.push_back(test::token_data(g, static_cast<std::uint64_t>(i), next[i]));
      // Two values beyond the f16 range in the last layer, read as +-65504 by both engines.
      data.back().k[static_cast<std::size_t>(last) * kvn + 3] = kBeyondF16;
      data.back().q[static_cast<std::size_t>(last) * qn + 5] = -kBeyondF16;
    }
    std::vector<DeviceToken> on_dev, on_late;
    on_dev.reserve(kSequences);
    on_late.reserve(kSequences);
    std::vector<std::vector<float>> outs(kSequences, std::vector<float>(data[0].q.size(), std::nanf("")));
    std::vector<SequenceToken> hcall, dcall, lcall;
    for (int i = kSequences - 1; i >= 0; --i) {  // a different order than the ids': P4 either way
      on_dev.emplace_back(data[static_cast<std::size_t>(i)]);
      on_late.emplace_back(data[static_cast<std::size_t>(i)]);
      hcall.push_back({ids[i], next[i], {data[i].q.data(), data[i].k.data(), data[i].v.data(), outs[i].data()}});
      dcall.push_back({ids[i], next[i], on_dev.back().io()});
      lcall.push_back({ids[i], next[i], on_late.back().io()});
    }
    ASSERT_TRUE(host->encode(hcall).ok());
    const Status s = dev->encode(dcall);
    ASSERT_TRUE(s.ok()) << s.to_string();
    const Status sl = late->encode(lcall);
    ASSERT_TRUE(sl.ok()) << sl.to_string();
    const auto routes = last_call_routes(*dev, kSequences);
    for (int i = 0; i < kSequences; ++i) {
      const std::size_t at = static_cast<std::size_t>(kSequences - 1 - i);
      const std::vector<float> got = on_dev[at].out.download();
      ASSERT_EQ(std::memcmp(got.data(), outs[i].data(), got.size() * sizeof(float)), 0)
          << "sequence " << i << " at position " << next[i];
      const std::vector<float> got_late = on_late[at].out.download();
      ASSERT_EQ(std::memcmp(got_late.data(), outs[i].data(), got_late.size() * sizeof(float)), 0)
          << "sequence " << i << " at position " << next[i] << ", the fetch delayed";
      // P3 on the layers with in-range inputs (the last layer's saturated values are not in the
      // reference's inputs).
      if (step % 8 == 0 || step == kSteps - 1)
        for (int l = 0; l < last; ++l)
          worst = std::max(worst, test::batch_reference_error(g, static_cast<std::uint64_t>(i), next[i], l,
                                                              routes.at({ids[i], l}),
                                                              got.data() + static_cast<std::size_t>(l) * qn));
      ++next[i];
    }
  }
  EXPECT_LE(worst, test::kBatchRelTol);
  const RangeStats expected{static_cast<std::int64_t>(kSaturatedPerToken) * kSequences * kSteps, 0};
  EXPECT_EQ(dev->range_stats(), expected);
  EXPECT_EQ(late->range_stats(), expected);
  EXPECT_EQ(host->range_stats(), expected);
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuDeviceIo, ::testing::ValuesIn(device_io_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// N1's opt-in check on activations in device memory: a NaN in one sequence's layer-2 k refuses
// the whole call before any row is stored (every plane as it was), names the sequence, the layer
// and the array, and the next call (finite) gives the bits a fresh host-memory engine gives.
TEST(GpuDeviceIoCheck, FiniteCheckRefusesBeforeStoring) {
  LADDER_REQUIRE_GPU();
  const DeviceIoCase c = device_io_cases()[0];
  const Geometry g = test::batch_geometry();
  std::unique_ptr<Engine> dev = make_engine(c, true), host = make_engine(c);
  ASSERT_TRUE(dev && host);
  const SequenceId b = dev->add_sequence().value();
  ASSERT_EQ(host->add_sequence().value(), b);
  constexpr int kDepth = 80;  // the 72-row rings have wrapped
  for (int p = 0; p < kDepth; ++p) {
    const test::TokenData t0 = test::token_data(g, 0, p), t1 = test::token_data(g, 1, p);
    const DeviceToken d0(t0), d1(t1);
    std::vector<SequenceToken> call{{0, p, d0.io()}, {b, p, d1.io()}};
    ASSERT_TRUE(dev->encode(call).ok());
    std::vector<float> o0(t0.q.size()), o1(t1.q.size());
    std::vector<SequenceToken> hcall{{0, p, {t0.q.data(), t0.k.data(), t0.v.data(), o0.data()}},
                                     {b, p, {t1.q.data(), t1.k.data(), t1.v.data(), o1.data()}}};
    ASSERT_TRUE(host->encode(hcall).ok());
  }
  std::vector<PlaneState> before;
  for (SequenceId id : {SequenceId{0}, b})
    for (int l = 0; l < g.n_layers; ++l) before.push_back(dev->plane_state(id, l));
  const RangeStats counted = dev->range_stats();

  const test::TokenData t0 = test::token_data(g, 0, kDepth);
  test::TokenData t1 = test::token_data(g, 1, kDepth);
  const std::size_t kvn = static_cast<std::size_t>(g.n_kv_heads) * g.head_dim;
  const float kept = t1.k[2 * kvn + 9];
  t1.k[2 * kvn + 9] = std::nanf("");
  {
    const DeviceToken d0(t0), d1(t1);
    std::vector<SequenceToken> call{{0, kDepth, d0.io()}, {b, kDepth, d1.io()}};
    const Status s = dev->encode(call);
    EXPECT_EQ(s.code(), ErrorCode::non_finite) << s.to_string();
    EXPECT_NE(s.message().find(fmt::format("sequence {}", b)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("layer 2: k holds 1 NaN"), std::string::npos) << s.message();
  }
  std::vector<PlaneState> after;
  for (SequenceId id : {SequenceId{0}, b})
    for (int l = 0; l < g.n_layers; ++l) after.push_back(dev->plane_state(id, l));
  EXPECT_EQ(after, before);
  EXPECT_EQ(dev->range_stats(), counted);

  t1.k[2 * kvn + 9] = kept;
  const DeviceToken d0(t0), d1(t1);
  std::vector<SequenceToken> call{{0, kDepth, d0.io()}, {b, kDepth, d1.io()}};
  ASSERT_TRUE(dev->encode(call).ok());
  std::vector<float> o0(t0.q.size(), std::nanf("")), o1(t1.q.size(), std::nanf(""));
  std::vector<SequenceToken> hcall{{0, kDepth, {t0.q.data(), t0.k.data(), t0.v.data(), o0.data()}},
                                   {b, kDepth, {t1.q.data(), t1.k.data(), t1.v.data(), o1.data()}}};
  ASSERT_TRUE(host->encode(hcall).ok());
  const std::vector<float> g0 = d0.out.download(), g1 = d1.out.download();
  EXPECT_EQ(std::memcmp(g0.data(), o0.data(), g0.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(g1.data(), o1.data(), g1.size() * sizeof(float)), 0);
  EXPECT_LE(test::batch_reference_error(g, 1, kDepth, 2, last_call_routes(*dev, 2).at({b, 2}),
                                        g1.data() + 2 * static_cast<std::size_t>(g.n_heads) * g.head_dim),
            test::kBatchRelTol);
}

}  // namespace
}  // namespace ladder
