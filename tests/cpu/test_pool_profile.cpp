// The pool profile (include/ladder/cpu/pool_profile.hpp): what it counts and how it splits each
// job's threads x span. Tasks here spin on the steady clock for known times, so every figure
// has a bound that holds on any host, however loaded: a task of 200 us takes at least 200 us.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "cpu/pool_record.hpp"
#include "cpu/thread_pool.hpp"
#include "ladder/cpu/pool_profile.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace ladder {
namespace {

using cpu::detail::ThreadPool;
using Clock = std::chrono::steady_clock;

void spin_for(std::chrono::microseconds d) {
  const Clock::time_point until = Clock::now() + d;
  while (Clock::now() < until) {
#if defined(__SSE2__)
    _mm_pause();
#endif
  }
}

double share_sum(const cpu::PoolProfile& p) { return p.working + p.waiting + p.before_first + p.between + p.after_last; }

std::shared_ptr<ThreadPool> make_pool(int threads) {
  Result<std::shared_ptr<ThreadPool>> pool = ThreadPool::create(threads);
  EXPECT_TRUE(pool.ok()) << pool.status().to_string();
  return pool.ok() ? *pool : nullptr;
}

TEST(PoolProfile, NothingIsRecordedUnlessStarted) {
  const std::shared_ptr<ThreadPool> pool = make_pool(2);
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(pool->run(4, [](int) { spin_for(std::chrono::microseconds(50)); }).ok());
  const cpu::PoolProfile p = cpu::stop_pool_profile();
  EXPECT_EQ(p.jobs, 0);
  EXPECT_EQ(p.tasks, 0);
  EXPECT_EQ(share_sum(p), 0.0);
}

// Three jobs of eight 200-us tasks on two threads: every job and task counted, the shares a
// partition of threads x span, and the span no shorter than the work spread over both threads.
TEST(PoolProfile, CountsJobsAndTasksAndSplitsThreadTime) {
  const std::shared_ptr<ThreadPool> pool = make_pool(2);
  ASSERT_NE(pool, nullptr);
  constexpr int kJobs = 3, kTasks = 8;
  constexpr auto kTask = std::chrono::microseconds(200);
  ASSERT_TRUE(cpu::start_pool_profile().ok());
  for (int j = 0; j < kJobs; ++j) ASSERT_TRUE(pool->run(kTasks, [&](int) { spin_for(kTask); }).ok());
  const cpu::PoolProfile p = cpu::stop_pool_profile();
  EXPECT_EQ(p.jobs, kJobs);
  EXPECT_EQ(p.tasks, kJobs * kTasks);
  EXPECT_EQ(p.dropped, 0);
  EXPECT_EQ(p.threads, 2);
  EXPECT_NEAR(share_sum(p), 1.0, 1e-9);
  EXPECT_GE(p.span_us, kTasks * 200.0 / 2);
  EXPECT_EQ(p.waiting, 0.0);  // nothing waited inside a task
  // Working: at least the tasks' own time, 8 x 200 us per job, over 2 x the longest span; at most all.
  EXPECT_GT(p.working, 0.0);
  EXPECT_LE(p.working, 1.0);
  // A second start clears the record: only what follows it counts.
  ASSERT_TRUE(cpu::start_pool_profile().ok());
  ASSERT_TRUE(pool->run(kTasks, [&](int) { spin_for(kTask); }).ok());
  const cpu::PoolProfile again = cpu::stop_pool_profile();
  EXPECT_EQ(again.jobs, 1);
  EXPECT_EQ(again.tasks, kTasks);
  // Stopped twice: the second summary is empty.
  EXPECT_EQ(cpu::stop_pool_profile().jobs, 0);
}

// One task on a pool of two runs on the caller alone: the other thread's whole span is time
// before its (absent) first task, so that share is at least a half, and the task's own time is
// at most the other half.
TEST(PoolProfile, AThreadWithNoTaskCountsItsWholeSpan) {
  const std::shared_ptr<ThreadPool> pool = make_pool(2);
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(cpu::start_pool_profile().ok());
  ASSERT_TRUE(pool->run(1, [](int) { spin_for(std::chrono::microseconds(2000)); }).ok());
  const cpu::PoolProfile p = cpu::stop_pool_profile();
  EXPECT_EQ(p.jobs, 1);
  EXPECT_EQ(p.idle_threads, 1.0);
  EXPECT_GE(p.span_us, 2000.0);
  EXPECT_GE(p.before_first, 0.5 - 1e-12);
  EXPECT_LE(p.working, 0.5 + 1e-12);
  EXPECT_NEAR(share_sum(p), 1.0, 1e-9);
}

// Task 0 waits (counted) from before task 1 starts its 1 ms until task 1 has finished (task 1
// waits, uncounted, for task 0 to be waiting first; two threads, so the two run at once whichever
// claims which): at least 1,000 us of the job's threads x span is waiting. A wait on the caller
// before the job (20 ms, longer than the job) is no task's.
TEST(PoolProfile, WaitsInsideTasksAreTheirOwnShare) {
  const std::shared_ptr<ThreadPool> pool = make_pool(2);
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(cpu::start_pool_profile().ok());
  {
    const cpu::detail::PoolTaskWait outside;
    spin_for(std::chrono::microseconds(20000));
  }
  std::atomic<bool> waiting{false}, done{false};
  ASSERT_TRUE(pool->run(2, [&](int i) {
                    if (i == 1) {
                      while (!waiting.load(std::memory_order_acquire)) std::this_thread::yield();
                      spin_for(std::chrono::microseconds(1000));
                      done.store(true, std::memory_order_release);
                      return;
                    }
                    const cpu::detail::PoolTaskWait counted;
                    waiting.store(true, std::memory_order_release);
                    while (!done.load(std::memory_order_acquire)) std::this_thread::yield();
                  })
                  .ok());
  const cpu::PoolProfile p = cpu::stop_pool_profile();
  EXPECT_EQ(p.jobs, 1);
  EXPECT_EQ(p.tasks, 2);
  EXPECT_NEAR(share_sum(p), 1.0, 1e-9);
  const double waited_us = p.waiting * 2 * p.span_us;  // the job's thread time is 2 x span
  EXPECT_GE(waited_us, 1000.0 * (1 - 1e-9));
  EXPECT_LE(waited_us, p.span_us * (1 + 1e-9));  // one task's wait: never longer than the job
}

}  // namespace
}  // namespace ladder
