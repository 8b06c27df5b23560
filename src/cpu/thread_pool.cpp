#include "cpu/thread_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <new>
#include <system_error>

#if defined(__SSE2__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "cpu/pool_record.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/heuristics.hpp"

namespace ladder::cpu {
namespace detail {
namespace {

std::atomic<int> g_fail_thread_at{-1};

}  // namespace

namespace {

using Clock = std::chrono::steady_clock;

void pause_once() {
#if defined(__SSE2__)
  _mm_pause();
#endif
}

// Polls `done` until it holds or kPoolSpinMicroseconds have passed; whether it held.
template <class Done>
bool spin_until(const Done& done) {
  constexpr int kPollsPerClockRead = 64;
  const Clock::time_point until = Clock::now() + std::chrono::microseconds(kPoolSpinMicroseconds);
  for (int polls = 0;; ++polls) {
    if (done()) return true;
    if (polls % kPollsPerClockRead == 0 && Clock::now() >= until) return false;
    pause_once();
  }
}

// Sleeps while *word == expected (a futex wait; spurious returns are allowed, callers re-check).
// Raw futexes rather than C++20 atomic::wait: the pool's own sleeper count decides whether a
// wake is made at all, and libstdc++'s wait adds its own spin of sched_yield calls first.
void sleep_while(const std::atomic<std::uint32_t>& word, std::uint32_t expected) {
#if defined(__linux__)
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
#else
  if (word.load() == expected) std::this_thread::yield();
#endif
}

// Wakes every thread asleep in sleep_while(word, ...).
void wake_all(std::atomic<std::uint32_t>& word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, std::numeric_limits<int>::max(),
          nullptr, nullptr, 0);
#else
  (void)word;
#endif
}

}  // namespace

void inject_thread_start_failure(int index) { g_fail_thread_at.store(index, std::memory_order_relaxed); }

Result<std::shared_ptr<ThreadPool>> ThreadPool::create(int threads) {
  if (threads < 1 || threads > kMaxCpuThreads)
    return make_error(ErrorCode::invalid_argument,
                      fmt::format("a CPU pool needs 1..{} threads (got {})", kMaxCpuThreads, threads));
  std::shared_ptr<ThreadPool> pool(new (std::nothrow) ThreadPool());
  if (!pool) return make_error(ErrorCode::out_of_memory, "cannot allocate the CPU worker pool");
  const int extra = threads - 1;
  try {
    pool->workers_.reserve(static_cast<std::size_t>(extra));
    for (int i = 0; i < extra; ++i) {
      if (i == g_fail_thread_at.load(std::memory_order_relaxed))
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                "injected thread start failure");
      pool->workers_.emplace_back([p = pool.get(), i] {
        set_pool_thread_slot(i + 1);
        p->worker_loop();
      });
    }
  } catch (const std::exception& e) {
    // Workers already running wait on epoch_: stop and join them before the pool (and its
    // atomics) goes away, so a refused thread is an error, never a hang.
    const std::size_t started = pool->workers_.size();
    pool->stop_and_join();
    return make_error(ErrorCode::out_of_memory,
                      fmt::format("cannot start CPU worker thread {} of {} ({}; {} were running and have been "
                                  "stopped): lower --threads or raise the process limits",
                                  started + 1, extra, e.what(), started));
  }
  return pool;
}

ThreadPool::~ThreadPool() { stop_and_join(); }

void ThreadPool::stop_and_join() {
  stop_.store(true);
  epoch_.fetch_add(1);  // ends every spin and every sleep
  wake_all(epoch_);
  for (std::thread& t : workers_)
    if (t.joinable()) t.join();
  workers_.clear();
}

void ThreadPool::drain(Job& job) {
  while (!job.failed.load(std::memory_order_relaxed)) {
    const int i = job.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= job.tasks) return;
    try {
      if (job.mark.id == 0) {
        (*job.fn)(i);
        continue;
      }
      take_task_wait_ns();  // a wait counted outside any task is not this task's
      const std::int64_t start = pool_clock_ns();
      (*job.fn)(i);
      pool_profile_task(job.mark, start, pool_clock_ns(), take_task_wait_ns());
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!job.failed.exchange(true)) {
        const bool oom = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
        job.error = Error{oom ? ErrorCode::out_of_memory : ErrorCode::internal,
                          fmt::format("a CPU worker task threw: {}", e.what())};
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!job.failed.exchange(true)) job.error = Error{ErrorCode::internal, "a CPU worker task threw a non-exception"};
    }
  }
}

void ThreadPool::wait_for_epoch(std::uint32_t seen) {
  // Spin briefly before sleeping: a decode posts the next job (the next layer) within
  // microseconds, and a worker that is still awake joins it without a futex wake.
  if (spin_until([&] { return epoch_.load(std::memory_order_acquire) != seen; })) return;
  // Counted as a sleeper before the last look at the epoch: a caller that bumps the epoch and
  // then finds no sleeper (both sequentially consistent) is seen by this look instead.
  sleepers_.fetch_add(1);
  while (epoch_.load() == seen) sleep_while(epoch_, seen);
  sleepers_.fetch_sub(1);
}

void ThreadPool::wake_sleepers() {
  if (sleepers_.load() > 0) wake_all(epoch_);
}

void ThreadPool::wait_until_no_worker_inside() {
  if (spin_until([&] { return inside_.load() == 0; })) return;
  // Announced before each look at the count: the last worker out, having decremented it, looks
  // at the announcement (both sequentially consistent), so one of the two sees the other.
  for (;;) {
    caller_asleep_.store(1);
    if (inside_.load() == 0) break;
    sleep_while(caller_asleep_, 1);
  }
  caller_asleep_.store(0);
}

void ThreadPool::worker_loop() {
  std::uint64_t last = 0;  // the generation of the last job this worker drained
  // The epoch first, then stop_: a pool stopped before this thread ever ran (stop_ is set before
  // the epoch moves) is seen here, not waited for.
  std::uint32_t seen = epoch_.load();
  if (stop_.load()) return;
  for (;;) {
    wait_for_epoch(seen);
    seen = epoch_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    inside_.fetch_add(1);
    // Counted in before reading open_: the caller cannot return (and free the job) while this
    // worker is inside, and a job closed before this read is never touched.
    Job* job = open_.load();
    if (job != nullptr && job->generation != last) {
      last = job->generation;
      drain(*job);
    }
    // The last worker out wakes a caller asleep in wait_until_no_worker_inside (no system call
    // when the caller is still spinning).
    if (inside_.fetch_sub(1) == 1 && caller_asleep_.load() != 0) {
      caller_asleep_.store(0);
      wake_all(caller_asleep_);
    }
  }
}

Status ThreadPool::run(int tasks, const std::function<void(int)>& fn) {
  if (tasks <= 0) return {};
  std::lock_guard<std::mutex> serial(job_mutex_);
  Job job;
  job.fn = &fn;
  job.tasks = tasks;
  job.generation = ++generation_;
  job.mark = pool_profile_post();
  const bool shared = !workers_.empty() && tasks > 1;
  if (shared) {
    open_.store(&job);
    epoch_.fetch_add(1);
    // Spinning workers see the epoch move; sleeping ones need the futex, one call for all.
    wake_sleepers();
  }
  drain(job);
  if (shared) {
    // Every task has been claimed (or the job failed): close the job so a worker that wakes only
    // now leaves it alone, then wait for the ones inside it.
    open_.store(nullptr);
    wait_until_no_worker_inside();
  }
  pool_profile_done(job.mark, size());
  if (job.failed.load()) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    return job.error;
  }
  return {};
}

namespace {
std::mutex g_pool_mutex;
std::shared_ptr<ThreadPool> g_pool;
int g_threads = 0;  // 0: not chosen yet (the usable CPUs on first use)

int default_threads() { return usable_cpus().count; }
}  // namespace

Result<std::shared_ptr<ThreadPool>> shared_pool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) {
    const int want = g_threads > 0 ? g_threads : default_threads();
    Result<std::shared_ptr<ThreadPool>> made = ThreadPool::create(want);
    if (!made.ok()) return made.status();
    g_pool = std::move(*made);
    g_threads = want;
  }
  return g_pool;
}

Status parallel_for(int tasks, const std::function<void(int)>& fn) {
  Result<std::shared_ptr<ThreadPool>> pool = shared_pool();
  if (!pool.ok()) return pool.status();
  return (*pool)->run(tasks, fn);
}

}  // namespace detail

Status set_threads(int n) {
  if (n < 0 || n > kMaxCpuThreads)
    return make_error(ErrorCode::invalid_argument,
                      fmt::format("CPU worker threads must be in 0..{} (0: one per usable CPU; got {})",
                                  kMaxCpuThreads, n));
  const int want = n > 0 ? n : detail::default_threads();
  {
    std::lock_guard<std::mutex> lock(detail::g_pool_mutex);
    if (detail::g_pool && detail::g_threads == want) return {};
  }
  // Built outside the lock (starting threads is slow); a refused pool leaves the current one.
  Result<std::shared_ptr<detail::ThreadPool>> made = detail::ThreadPool::create(want);
  if (!made.ok()) return made.status();
  std::shared_ptr<detail::ThreadPool> old;
  {
    std::lock_guard<std::mutex> lock(detail::g_pool_mutex);
    old = std::move(detail::g_pool);
    detail::g_pool = std::move(*made);
    detail::g_threads = want;
  }
  // `old` is joined here unless a decode still holds it; then its last holder joins it.
  return {};
}

int threads() {
  std::lock_guard<std::mutex> lock(detail::g_pool_mutex);
  return detail::g_threads > 0 ? detail::g_threads : detail::default_threads();
}

}  // namespace ladder::cpu
