// P4's last clause on the GPU: a sequence's bits do not depend on how many SMs run it. The batch
// sweep (tests/cpu/batch_sweep.hpp: a target among 7 other sequences of random depths, every
// route) runs once on the whole GPU and once inside a green context that holds a fraction of its
// SMs (CUDA's SM partitioning: the same kernels and grids, fewer SMs, so the CTAs run in other
// orders and in more waves); the target's outputs must be identical, and within P3's bound.
#include <cuda.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cpu/batch_sweep.hpp"
#include "gpu/gpu_test_support.hpp"

namespace ladder {
namespace {

// The driver entry points a green context needs, looked up through the runtime (the tests link
// the static runtime, not libcuda).
struct GreenApi {
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetDevResource) device_resource = nullptr;
  decltype(&cuDevSmResourceSplitByCount) split = nullptr;
  decltype(&cuDevResourceGenerateDesc) describe = nullptr;
  decltype(&cuGreenCtxCreate) create = nullptr;
  decltype(&cuGreenCtxDestroy) destroy = nullptr;
  decltype(&cuCtxFromGreenCtx) as_context = nullptr;
  decltype(&cuCtxGetCurrent) get_current = nullptr;
  decltype(&cuCtxSetCurrent) set_current = nullptr;
  decltype(&cuCtxGetDevResource) context_resource = nullptr;

  // Green contexts arrived in CUDA 12.4; ask for that version of each symbol.
  static constexpr unsigned kApiVersion = 12040;
  template <class F>
  static bool find(const char* name, F& fn) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion(name, &p, kApiVersion, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      return false;
    fn = reinterpret_cast<F>(p);
    return true;
  }
  bool load() {
    return find("cuDeviceGet", device_get) && find("cuDeviceGetDevResource", device_resource) &&
           find("cuDevSmResourceSplitByCount", split) && find("cuDevResourceGenerateDesc", describe) &&
           find("cuGreenCtxCreate", create) && find("cuGreenCtxDestroy", destroy) &&
           find("cuCtxFromGreenCtx", as_context) && find("cuCtxGetCurrent", get_current) &&
           find("cuCtxSetCurrent", set_current) && find("cuCtxGetDevResource", context_resource);
  }
};

// The SMs the green context keeps: few enough that every layer's grid needs several waves.
constexpr unsigned kPartitionSms = 16;

TEST(GpuSmCount, TargetBitsDoNotDependOnTheSmCount) {
  LADDER_REQUIRE_GPU();
  GreenApi api;
  ASSERT_TRUE(api.load()) << "the driver lacks the green-context entry points (CUDA 12.4+)";
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // the primary context exists and is current
  CUcontext primary = nullptr;
  ASSERT_EQ(api.get_current(&primary), CUDA_SUCCESS);
  CUdevice dev = 0;
  ASSERT_EQ(api.device_get(&dev, 0), CUDA_SUCCESS);
  CUdevResource all{};
  ASSERT_EQ(api.device_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
  CUdevResource part{};
  unsigned groups = 1;
  ASSERT_EQ(api.split(&part, &groups, &all, nullptr, 0, kPartitionSms), CUDA_SUCCESS);
  ASSERT_EQ(groups, 1u);
  ASSERT_LT(part.sm.smCount, all.sm.smCount);
  CUdevResourceDesc desc = nullptr;
  ASSERT_EQ(api.describe(&desc, &part, 1), CUDA_SUCCESS);
  CUgreenCtx green = nullptr;
  ASSERT_EQ(api.create(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
  CUcontext small = nullptr;
  ASSERT_EQ(api.as_context(&small, green), CUDA_SUCCESS);

  const Switches sw;
  constexpr int kOthers = 7;
  constexpr unsigned kSeed = 5;
  const int steps = test::small_sweep() ? 48 : 120;
  const test::BatchRun whole = test::run_batch(Device::cuda, sw, kOthers, steps, kSeed);

  // The same run with the green context current: the runtime's streams, allocations and
  // launches of a new engine go to it.
  ASSERT_EQ(api.set_current(small), CUDA_SUCCESS);
  CUdevResource in_use{};
  EXPECT_EQ(api.context_resource(small, &in_use, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
  EXPECT_EQ(in_use.sm.smCount, part.sm.smCount);
  const test::BatchRun few = test::run_batch(Device::cuda, sw, kOthers, steps, kSeed);
  ASSERT_EQ(api.set_current(primary), CUDA_SUCCESS);
  EXPECT_EQ(api.destroy(green), CUDA_SUCCESS);

  ASSERT_EQ(whole.target_out.size(), static_cast<std::size_t>(steps));
  EXPECT_EQ(test::first_difference(whole, few), -1)
      << "the target's bits changed between " << all.sm.smCount << " and " << part.sm.smCount << " SMs";
  EXPECT_LE(whole.worst_error, test::kBatchRelTol);
  EXPECT_LE(few.worst_error, test::kBatchRelTol);
  EXPECT_EQ(whole.routes, few.routes);
  std::printf("[ sm count ] %u SMs and %u SMs: %d steps of the target identical\n", all.sm.smCount,
              part.sm.smCount, steps);
}

}  // namespace
}  // namespace ladder
