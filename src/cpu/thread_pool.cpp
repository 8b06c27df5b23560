#include "cpu/thread_pool.hpp"

#include <algorithm>
#include <memory>

#include "ladder/cpu/cpu_backend.hpp"

namespace ladder::cpu {
namespace detail {

ThreadPool::ThreadPool(int threads) {
  const int extra = std::max(threads, 1) - 1;
  workers_.reserve(static_cast<std::size_t>(extra));
  for (int i = 0; i < extra; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::drain() {
  for (int i = next_.fetch_add(1, std::memory_order_relaxed); i < tasks_;
       i = next_.fetch_add(1, std::memory_order_relaxed)) {
    (*fn_)(i);
  }
}

void ThreadPool::worker_loop() {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    drain();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::run(int tasks, const std::function<void(int)>& fn) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1) {
    for (int i = 0; i < tasks; ++i) fn(i);
    return;
  }
  std::lock_guard<std::mutex> job(job_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    tasks_ = tasks;
    next_.store(0, std::memory_order_relaxed);
    busy_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  drain();
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return busy_ == 0; });
  fn_ = nullptr;
}

namespace {
std::mutex g_pool_mutex;
std::unique_ptr<ThreadPool> g_pool;
int g_threads = 0;  // 0: not chosen yet (hardware concurrency on first use)

int default_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}
}  // namespace

ThreadPool& pool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) {
    if (g_threads <= 0) g_threads = default_threads();
    g_pool = std::make_unique<ThreadPool>(g_threads);
  }
  return *g_pool;
}

}  // namespace detail

void set_threads(int n) {
  std::lock_guard<std::mutex> lock(detail::g_pool_mutex);
  const int want = n > 0 ? n : detail::default_threads();
  if (detail::g_pool && detail::g_threads == want) return;
  detail::g_pool.reset();
  detail::g_threads = want;
}

int threads() {
  std::lock_guard<std::mutex> lock(detail::g_pool_mutex);
  return detail::g_threads > 0 ? detail::g_threads : detail::default_threads();
}

}  // namespace ladder::cpu
