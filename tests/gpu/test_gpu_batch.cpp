// E3/P4 on the GPU: the CPU suite's batch sweep (tests/cpu/batch_sweep.hpp) through the CUDA
// device. A target sequence decoded alone and in calls with 1, 7 and 31 other sequences of
// random depths gives the same bits, for each switch setting (every route; graph replay, the
// default); the outputs hold P3 against the f64 reference.
#include <gtest/gtest.h>

#include "cpu/batch_sweep.hpp"
#include "gpu/gpu_test_support.hpp"

namespace ladder {
namespace {

using test::BatchRun;
using test::first_difference;
using test::run_batch;

class GpuBatchInvariance : public ::testing::TestWithParam<test::BatchSwitchCase> {};

TEST_P(GpuBatchInvariance, TargetBitsDoNotDependOnTheBatch) {
  LADDER_REQUIRE_GPU();
  const int steps = test::small_sweep() ? 72 : 160;
  const Switches sw = GetParam().sw;
  const BatchRun alone = run_batch(Device::cuda, sw, 0, steps, 1);
  ASSERT_EQ(alone.target_out.size(), static_cast<std::size_t>(steps));
  EXPECT_LE(alone.worst_error, test::kBatchRelTol);
  const int others_for[] = {1, 7, 31};
  for (int i = 0; i < 3; ++i) {
    if (test::small_sweep() && others_for[i] > 7) continue;
    const BatchRun batch = run_batch(Device::cuda, sw, others_for[i], steps, 2 + static_cast<unsigned>(i));
    EXPECT_EQ(first_difference(alone, batch), -1) << "with " << others_for[i] << " other sequences";
    EXPECT_LE(batch.worst_error, test::kBatchRelTol) << others_for[i] << " others";
    EXPECT_EQ(batch.routes, alone.routes);
  }
}

INSTANTIATE_TEST_SUITE_P(Switches, GpuBatchInvariance, ::testing::ValuesIn(test::batch_switch_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ladder
