// A small persistent worker pool for the CPU twins. Work is a count of independent tasks; each
// task writes its own disjoint output, so which thread runs a task never changes a result
// (P1: bits do not depend on the thread count).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ladder::cpu::detail {

class ThreadPool {
 public:
  // `threads` counts the calling thread: a pool of 1 runs everything inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(0) .. fn(tasks - 1), each exactly once, and returns when all have finished. The
  // caller takes tasks too. Concurrent callers are serialised (one job at a time).
  void run(int tasks, const std::function<void(int)>& fn);

 private:
  void worker_loop();
  void drain();

  std::vector<std::thread> workers_;
  std::mutex job_mutex_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int)>* fn_ = nullptr;
  int tasks_ = 0;
  std::atomic<int> next_{0};
  int busy_ = 0;                // workers still inside the current job
  std::uint64_t generation_ = 0;  // bumped per job so sleeping workers see new work
  bool stop_ = false;
};

// The process-wide pool the twins use (created on first use with set_threads()'s count).
ThreadPool& pool();

}  // namespace ladder::cpu::detail
