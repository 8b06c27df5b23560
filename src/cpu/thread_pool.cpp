#include "cpu/thread_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <new>
#include <system_error>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/heuristics.hpp"

namespace ladder::cpu {
namespace detail {
namespace {

std::atomic<int> g_fail_thread_at{-1};

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
      pool->workers_.emplace_back([p = pool.get()] { p->worker_loop(); });
    }
  } catch (const std::exception& e) {
    // Workers already running wait on wake_: stop and join them before the pool (and its
    // condition variables) goes away, so a refused thread is an error, never a hang.
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    published_.store(generation_ + 1, std::memory_order_release);  // ends every spin
  }
  wake_.notify_all();
  for (std::thread& t : workers_)
    if (t.joinable()) t.join();
  workers_.clear();
}

void ThreadPool::drain(Job& job) {
  while (!job.failed.load(std::memory_order_relaxed)) {
    const int i = job.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= job.tasks) return;
    try {
      (*job.fn)(i);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!job.failed.exchange(true)) {
        const bool oom = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
        job.error = Error{oom ? ErrorCode::out_of_memory : ErrorCode::internal,
                          fmt::format("a CPU worker task threw: {}", e.what())};
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!job.failed.exchange(true)) job.error = Error{ErrorCode::internal, "a CPU worker task threw a non-exception"};
    }
  }
}

void ThreadPool::spin_for_next_job(std::uint64_t current) const {
  using Clock = std::chrono::steady_clock;
  constexpr int kPollsPerClockRead = 64;
  const Clock::time_point until = Clock::now() + std::chrono::microseconds(kPoolSpinMicroseconds);
  for (int polls = 0;; ++polls) {
    if (published_.load(std::memory_order_acquire) != current) return;
    if (polls % kPollsPerClockRead == 0 && Clock::now() >= until) return;
#if defined(__SSE2__)
    _mm_pause();
#endif
  }
}

void ThreadPool::worker_loop() {
  std::uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (!stop_ && (job_ == nullptr || generation_ == seen)) {
      // Spin briefly before sleeping: a decode posts the next job (the next layer) within
      // microseconds, and a worker that is still awake joins it without a futex wake. The
      // baseline is the current generation, not `seen`: a job this worker missed (closed before
      // it woke) must not end the spin at once.
      const std::uint64_t current = generation_;
      lock.unlock();
      spin_for_next_job(current);
      lock.lock();
    }
    ++sleepers_;
    wake_.wait(lock, [&] { return stop_ || (job_ != nullptr && generation_ != seen); });
    --sleepers_;
    if (stop_) return;
    seen = generation_;
    Job& job = *job_;
    ++job.joined;
    lock.unlock();
    drain(job);
    lock.lock();
    if (--job.joined == 0) done_.notify_one();
  }
}

Status ThreadPool::run(int tasks, const std::function<void(int)>& fn) {
  if (tasks <= 0) return {};
  std::lock_guard<std::mutex> serial(job_mutex_);
  Job job;
  job.fn = &fn;
  job.tasks = tasks;
  if (!workers_.empty() && tasks > 1) {
    bool sleeping = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      ++generation_;
      published_.store(generation_, std::memory_order_release);
      sleeping = sleepers_ > 0;
    }
    // Spinning workers see `published_` and take the lock; only sleeping ones need the futex.
    if (sleeping) wake_.notify_all();
  }
  drain(job);
  std::unique_lock<std::mutex> lock(mutex_);
  // Every task has been claimed (or the job failed): close the job so a worker that wakes only
  // now stays asleep, then wait for the ones inside it.
  job_ = nullptr;
  done_.wait(lock, [&] { return job.joined == 0; });
  if (job.failed.load(std::memory_order_relaxed)) return job.error;
  return {};
}

namespace {
std::mutex g_pool_mutex;
std::shared_ptr<ThreadPool> g_pool;
int g_threads = 0;  // 0: not chosen yet (hardware concurrency on first use)

int default_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(std::min<unsigned>(hw, kMaxCpuThreads)) : 1;
}
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
                      fmt::format("CPU worker threads must be in 0..{} (0: all hardware threads; got {})",
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
