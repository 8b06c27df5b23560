// The pool profile's hooks (include/ladder/cpu/pool_profile.hpp) for the worker pool
// (thread_pool.cpp) and for tasks that wait on other tasks (layer_job.cpp).
#pragma once

#include <cstdint>

namespace ladder::cpu::detail {

// Nanoseconds on the steady clock (the one clock every thread's records are read against).
std::int64_t pool_clock_ns();

// A job as the profile saw it posted: id 0 when the profile was off (nothing of it is recorded).
struct PoolJobMark {
  std::uint32_t id = 0;
  std::int64_t post_ns = 0;
};
PoolJobMark pool_profile_post();
// At the caller's return from a job of a pool of `threads` threads.
void pool_profile_done(const PoolJobMark& job, int threads);
// One task of a recorded job: the recording thread's slot (pool_thread_slot), its start and end,
// and the time it waited inside for other tasks (take_task_wait_ns).
void pool_profile_task(const PoolJobMark& job, std::int64_t start_ns, std::int64_t end_ns, std::int64_t waited_ns);

// The calling thread's slot in its pool: 0 for a thread that posts jobs, i + 1 for worker i.
void set_pool_thread_slot(int slot);
int pool_thread_slot();

// Counts the time from its construction to its end as the current task's wait, while the profile
// is on (a relaxed load and nothing else while it is off).
class PoolTaskWait {
 public:
  PoolTaskWait();
  ~PoolTaskWait();
  PoolTaskWait(const PoolTaskWait&) = delete;
  PoolTaskWait& operator=(const PoolTaskWait&) = delete;

 private:
  std::int64_t start_ns_ = -1;
};
// The wait counted on this thread since the last call, and resets it.
std::int64_t take_task_wait_ns();

}  // namespace ladder::cpu::detail
