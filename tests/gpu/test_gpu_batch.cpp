// E3/P4 on the GPU: the CPU suite's batch sweep (tests/cpu/batch_sweep.hpp) through the CUDA
// device, whose calls run every sequence in one launch per layer and kernel family (slots of a
// power-of-two bucket). A target sequence decoded alone and in calls with 1, 7 and 31 other
// sequences of random depths gives the same bits, for each switch setting (every route), with
// the separate kernels and with the fused one-kernel-per-layer route, in graph replay and in
// eager launches; the outputs hold P3 against the f64 reference. A change of batch composition
// replays the captured graph (no recapture).
#include <gtest/gtest.h>

#include <cstring>

#include "cpu/batch_sweep.hpp"
#include "gpu/gpu_batch_cases.hpp"
#include "gpu/gpu_test_support.hpp"
#include "ladder/cuda_engine.hpp"

namespace ladder {
namespace {

using test::BatchRun;
using test::first_difference;
using test::GpuBatchCase;
using test::gpu_batch_cases;
using test::run_batch;

class GpuBatchInvariance : public ::testing::TestWithParam<GpuBatchCase> {};

TEST_P(GpuBatchInvariance, TargetBitsDoNotDependOnTheBatch) {
  LADDER_REQUIRE_GPU();
  const GpuBatchCase& c = GetParam();
  const test::MakeEngine make = [&](const Geometry& g, const EngineOptions& opt) {
    cuda::CudaEngineOptions copt;
    copt.use_graph = c.graph;
    copt.tuning.fusion = c.fusion;
    copt.tuning.programmatic = c.programmatic;
    return cuda::create_engine(g, opt, copt);
  };
  const int steps = test::small_sweep() ? 72 : 160;
  const BatchRun alone = run_batch(Device::cuda, c.switches.sw, 0, steps, 1, make);
  ASSERT_EQ(alone.target_out.size(), static_cast<std::size_t>(steps));
  EXPECT_LE(alone.worst_error, test::kBatchRelTol);
  const int others_for[] = {1, 7, 31};
  for (int i = 0; i < 3; ++i) {
    // The sanitizer sweep keeps one mixed batch (7 others): under racecheck each launch costs
    // seconds, and 1 and 31 others add nothing a race could hide in that 7 does not.
    if (test::small_sweep() && others_for[i] != 7) continue;
    const BatchRun batch = run_batch(Device::cuda, c.switches.sw, others_for[i], steps, 2 + static_cast<unsigned>(i), make);
    EXPECT_EQ(first_difference(alone, batch), -1) << "with " << others_for[i] << " other sequences";
    EXPECT_LE(batch.worst_error, test::kBatchRelTol) << others_for[i] << " others";
    EXPECT_EQ(batch.routes, alone.routes);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuBatchInvariance, ::testing::ValuesIn(gpu_batch_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// Engine::fill_layer_rows through the CUDA device (what the Python prefill calls): the same plane
// states, slots and next-token bits as one fill_layer call per row, with the default kernels in
// graph replay. The device's growing planes hold max_context rows, so the prompt's growth is
// only the state's capacity.
TEST(GpuBatch, PromptRowsEqualOneCallPerRow) {
  LADDER_REQUIRE_GPU();
  test::check_prompt_rows_equal_one_call_per_row(
      Device::cuda, [](const Geometry& g, const EngineOptions& opt) { return cuda::create_engine(g, opt, {}); });
}

// The all-or-nothing rule at the CUDA device's allocation points (ladder/fault_injection.hpp):
// every point of a call (the trace's room, the call's key, the staging, the step graph's
// instantiation; reserve() allocates nothing on this device) and of adding a sequence (each plane's K and V rows, the workspace),
// failed in turn, leaves every plane state, the trace and the outputs as they were, and the call
// then succeeds with the bits of an engine no failure touched.
TEST(GpuBatch, EveryAllocationPointFailsCleanly) {
  LADDER_REQUIRE_GPU();
  test::check_allocation_points_fail_cleanly(Device::cuda, test::ReserveAllocates::no);
}

// E3's layer-by-layer form on the GPU: encode_layer / fill_layer calls (a step graph per
// single-layer kernel set, launch structs and staging packed per call) give exactly the bits,
// routes and counters of whole-token calls, for every case of the sweep.
TEST_P(GpuBatchInvariance, LayerByLayerCallsGiveTheWholeTokenBits) {
  LADDER_REQUIRE_GPU();
  const GpuBatchCase& c = GetParam();
  if (c.switches.sw.disable_vec || c.switches.sw.stage_wrapped_swa) GTEST_SKIP() << "the default ladder covers it";
  const test::MakeEngine make = [&](const Geometry& g, const EngineOptions& opt) {
    cuda::CudaEngineOptions copt;
    copt.use_graph = c.graph;
    copt.tuning.fusion = c.fusion;
    copt.tuning.programmatic = c.programmatic;
    return cuda::create_engine(g, opt, copt);
  };
  constexpr int kSequences = 4;
  const int steps = test::small_sweep() ? 24 : 90;
  const test::LayeredRun whole = test::run_whole_or_layered(Device::cuda, false, kSequences, steps, make);
  const test::LayeredRun layered = test::run_whole_or_layered(Device::cuda, true, kSequences, steps, make);
  ASSERT_EQ(whole.out.size(), static_cast<std::size_t>(steps));
  ASSERT_EQ(layered.out.size(), whole.out.size());
  EXPECT_EQ(test::first_difference(whole, layered), -1) << "the first token whose bits differ";
  EXPECT_EQ(whole.routes, layered.routes);
  EXPECT_EQ(whole.counted, layered.counted);
  EXPECT_LE(whole.worst_error, test::kBatchRelTol);
}

// Eight sequences past their rings' wrap, then calls of different subsets of 5 to 8 of them
// (one bucket of 8): the first call captures the step graph, every later one replays it, however
// the slots are filled. Rings without slack (capacity = window = 64) keep every layer on vec once
// full, so the route mix, and with it the graph, stays the same from call to call.
TEST(GpuBatch, CompositionChangesReplayTheCapturedGraph) {
  LADDER_REQUIRE_GPU();
  Geometry g = test::batch_geometry();
  g.ring_slack = 0;
  EngineOptions opt;
  opt.device = Device::cuda;
  opt.record_trace = true;
  Result<std::unique_ptr<Engine>> made = Engine::create(g, opt);
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  Engine& e = **made;
  std::vector<SequenceId> ids{0};
  for (int i = 1; i < 8; ++i) ids.push_back(e.add_sequence().value());
  constexpr int kDepth = 200;
  for (int p = 0; p < kDepth; ++p) {
    std::vector<test::TokenData> data;
    data.reserve(ids.size());
    std::vector<SequenceToken> call;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      data.push_back(test::token_data(g, i, p));
      call.push_back({ids[i], p, {nullptr, data.back().k.data(), data.back().v.data(), nullptr}});
    }
    ASSERT_TRUE(e.fill(call).ok());
  }
  std::vector<int> next(ids.size(), kDepth);
  const auto decode = [&](const std::vector<std::size_t>& which) {
    std::vector<test::TokenData> d;
    d.reserve(which.size());
    std::vector<std::vector<float>> outs(which.size());
    std::vector<SequenceToken> call;
    for (std::size_t j = 0; j < which.size(); ++j) {
      const std::size_t i = which[j];
      d.push_back(test::token_data(g, i, next[i]));
      outs[j].assign(d.back().q.size(), 0.0f);
      call.push_back({ids[i], next[i]++, {d.back().q.data(), d.back().k.data(), d.back().v.data(), outs[j].data()}});
    }
    const Status s = e.encode(call);
    for (std::size_t j = 0; s.ok() && j < which.size(); ++j)
      for (int l = 0; l < g.n_layers; ++l)
        EXPECT_LE(test::batch_reference_error(g, which[j], next[which[j]] - 1, l, Route::vec,
                                              outs[j].data() + static_cast<std::size_t>(l) * g.n_heads * g.head_dim),
                  test::kBatchRelTol);
    return s;
  };
  ASSERT_TRUE(decode({0, 1, 2, 3, 4, 5, 6, 7}).ok());
  for (const TraceEntry& t : e.trace()) ASSERT_EQ(t.decision.route, Route::vec) << "layer " << t.layer;
  const DeviceStats first = e.device_stats();
  EXPECT_EQ(first.captures, 1);
  const std::vector<std::vector<std::size_t>> subsets = {{7, 6, 5, 4, 3}, {1, 3, 5, 7, 0, 2}, {2, 4, 6, 0, 1, 3, 5},
                                                         {0, 1, 2, 3, 4, 5, 6, 7}};
  for (const auto& subset : subsets) ASSERT_TRUE(decode(subset).ok());
  EXPECT_EQ(e.device_stats().captures, first.captures) << "a change of batch composition recaptured the graph";
  EXPECT_EQ(e.device_stats().replays, first.replays + static_cast<int>(subsets.size()));
}

}  // namespace
}  // namespace ladder
