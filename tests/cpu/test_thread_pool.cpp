// The CPU worker pool's contract (issue 12): every task runs exactly once; a thread the system
// refuses is an error, never a hang, and leaves the current pool in place; a task that throws is
// an error and the pool keeps working; set_threads() while another thread decodes is safe (this
// suite also runs under ThreadSanitizer, scripts/tsan.sh); the thread count is bounded; and the
// CLI turns a refused thread into a clear message under a real address-space limit.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <sys/wait.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cpu/thread_pool.hpp"
#include "cpu_twin_helpers.hpp"
#include "ladder/heuristics.hpp"

namespace ladder {
namespace {

using cpu::detail::ThreadPool;

class PoolTest : public ::testing::Test {
 protected:
  void TearDown() override {
    cpu::detail::inject_thread_start_failure(-1);
    ASSERT_TRUE(cpu::set_threads(0).ok());
  }
};

TEST_F(PoolTest, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 4, 16}) {
    Result<std::shared_ptr<ThreadPool>> pool = ThreadPool::create(threads);
    ASSERT_TRUE(pool.ok()) << pool.status().to_string();
    ASSERT_EQ((*pool)->size(), threads);
    for (int tasks : {0, 1, 2, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(tasks));
      ASSERT_TRUE((*pool)->run(tasks, [&](int i) { hits[static_cast<std::size_t>(i)].fetch_add(1); }).ok());
      for (int i = 0; i < tasks; ++i) EXPECT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << threads << "/" << i;
    }
  }
}

// A pool destroyed before its workers ever ran (a job the caller finished alone, then the
// destructor) must not leave a worker waiting for a job that never comes: the join would hang.
TEST_F(PoolTest, APoolStoppedBeforeItsWorkersRanJoinsThem) {
  for (int round = 0; round < 200; ++round) {
    Result<std::shared_ptr<ThreadPool>> pool = ThreadPool::create(4);
    ASSERT_TRUE(pool.ok());
    std::atomic<int> ran{0};
    ASSERT_TRUE((*pool)->run(2, [&](int) { ran.fetch_add(1); }).ok());
    EXPECT_EQ(ran.load(), 2);
  }
}

TEST_F(PoolTest, RefusedThreadIsAnErrorAndStopsTheStartedOnes) {
  for (int fail_at : {0, 1, 5}) {
    SCOPED_TRACE(fail_at);
    cpu::detail::inject_thread_start_failure(fail_at);
    Result<std::shared_ptr<ThreadPool>> pool = ThreadPool::create(8);
    ASSERT_FALSE(pool.ok());
    EXPECT_EQ(pool.status().code(), ErrorCode::out_of_memory);
    EXPECT_NE(pool.status().message().find(fmt::format("{} were running and have been stopped", fail_at)),
              std::string::npos)
        << pool.status().message();
  }
}

TEST_F(PoolTest, RefusedSetThreadsKeepsTheCurrentPool) {
  ASSERT_TRUE(cpu::set_threads(3).ok());
  cpu::detail::inject_thread_start_failure(2);
  const Status st = cpu::set_threads(6);
  EXPECT_EQ(st.code(), ErrorCode::out_of_memory) << st.to_string();
  EXPECT_EQ(cpu::threads(), 3);
  cpu::detail::inject_thread_start_failure(-1);
  // The old pool still decodes.
  std::mt19937 rng(3);
  const HeadShape shape = test::make_shape(8, 2, 64);
  const HostPlane plane = test::build_plane(test::growing_config(2, 64, 256, 1024), 300, rng);
  const test::RouteRun run = test::run_on_copy(Route::vec, plane, 300, shape, test::random_token(shape, rng));
  EXPECT_TRUE(run.status.ok()) << run.status.to_string();
}

TEST_F(PoolTest, ThrowingTaskIsAnErrorAndThePoolSurvives) {
  Result<std::shared_ptr<ThreadPool>> made = ThreadPool::create(4);
  ASSERT_TRUE(made.ok());
  ThreadPool& pool = **made;
  const Status thrown = pool.run(100, [](int i) {
    if (i == 37) throw std::runtime_error("task 37 failed");
  });
  EXPECT_EQ(thrown.code(), ErrorCode::internal);
  EXPECT_NE(thrown.message().find("task 37 failed"), std::string::npos) << thrown.message();
  const Status oom = pool.run(10, [](int i) {
    if (i == 3) throw std::bad_alloc();
  });
  EXPECT_EQ(oom.code(), ErrorCode::out_of_memory) << oom.to_string();
  std::atomic<int> ran{0};
  EXPECT_TRUE(pool.run(50, [&](int) { ran.fetch_add(1); }).ok());
  EXPECT_EQ(ran.load(), 50);
}

TEST_F(PoolTest, ThreadCountIsBounded) {
  EXPECT_EQ(cpu::set_threads(-1).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(cpu::set_threads(kMaxCpuThreads + 1).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(cpu::set_threads(3000).code(), ErrorCode::invalid_argument);
  EXPECT_FALSE(ThreadPool::create(0).ok());
  EXPECT_FALSE(ThreadPool::create(kMaxCpuThreads + 1).ok());
}

// set_threads from one thread while another decodes: the decode keeps the pool it started with
// (reference counted), so every result is right and nothing is freed under it.
TEST_F(PoolTest, SetThreadsDuringADecodeIsSafe) {
  const HeadShape shape = test::make_shape(32, 2, 128);
  std::mt19937 rng(8);
  const HostPlane plane = test::build_plane(test::growing_config(2, 128, 2048, 4096), 1500, rng);
  const test::Token tok = test::random_token(shape, rng);
  ASSERT_TRUE(cpu::set_threads(2).ok());
  const test::RouteRun want = test::run_on_copy(Route::vec, plane, 1500, shape, tok);
  ASSERT_TRUE(want.status.ok());
  std::atomic<bool> done{false};
  std::thread switcher([&] {
    int n = 1;
    while (!done.load()) {
      EXPECT_TRUE(cpu::set_threads(n).ok());
      n = n % 4 + 1;
    }
  });
  constexpr int kDecodes = 20;
  for (int i = 0; i < kDecodes; ++i) {
    const test::RouteRun got = test::run_on_copy(Route::vec, plane, 1500, shape, tok);
    ASSERT_TRUE(got.status.ok()) << got.status.to_string();
    EXPECT_TRUE(test::same_bits(got.out, want.out)) << "decode " << i;
  }
  done.store(true);
  switcher.join();
}

// The CLI under a real address-space limit: more workers than the limit can hold stacks for
// gives a clear failure (exit 1) in well under the test's timeout instead of a hang.
std::string run_shell(const std::string& script, int& code) {
  std::string text;
  FILE* pipe = popen(("sh -c '" + script + "' 2>&1").c_str(), "r");
  if (pipe == nullptr) return text;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe) != nullptr) text += buf.data();
  const int status = pclose(pipe);
  code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return text;
}

TEST(PoolCli, ThreadsBeyondTheAddressSpaceLimitFailClearly) {
#if !defined(LADDER_CLI_PATH)
  GTEST_SKIP() << "the ladder CLI is not part of this build";
#elif defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer runtimes reserve terabytes of shadow memory and cannot start under ulimit -v; "
                  "the injected-failure tests above cover the same path";
#else
  // 1 GiB of address space; each worker's stack reserves 8 MiB, so 1024 workers cannot start.
  constexpr long kLimitKib = 1L << 20;
  int code = -1;
  const std::string text =
      run_shell(fmt::format("ulimit -v {}; timeout 60 \"{}\" demo --tokens 1 --depth 64 --threads {} --device cpu",
                            kLimitKib, LADDER_CLI_PATH, kMaxCpuThreads),
                code);
  EXPECT_EQ(code, 1) << text;
  EXPECT_NE(text.find("cannot start CPU worker thread"), std::string::npos) << text;
  // Above the bound the CLI refuses the value itself (usage error, exit 2).
  const std::string refused =
      run_shell(fmt::format("\"{}\" demo --tokens 1 --depth 64 --threads 3000", LADDER_CLI_PATH), code);
  EXPECT_EQ(code, 2) << refused;
  EXPECT_NE(refused.find("--threads"), std::string::npos) << refused;
#endif
}

}  // namespace
}  // namespace ladder
