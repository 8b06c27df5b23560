// A small persistent worker pool for the CPU producers. Work is a count of independent tasks;
// each task writes its own disjoint output, so which thread runs a task never changes a result
// (P1: bits do not depend on the thread count).
//
// Contract (issue 12, concurrency and resource limits):
//  * creation is all-or-nothing: when the system refuses a thread, the workers already started
//    are stopped and joined and the caller gets an error Status (never a hang);
//  * a task that throws does not terminate the process: the job stops handing out tasks and
//    run() returns an error naming the exception;
//  * the process-wide pool is reference counted: set_threads() swaps in a new pool while a
//    decode on another thread keeps the old one alive until its job has finished;
//  * run() waits only for the workers that actually joined the job, never for a worker that has
//    not woken up yet: a late worker finds the job closed and goes back to sleep. Waiting for
//    every worker to wake was the ~4 ms (one scheduler tick) stall of issue 11;
//  * between jobs a worker spins for kPoolSpinMicroseconds (heuristics.hpp) before it sleeps,
//    so back-to-back jobs (the layers of a decode step) do not pay a futex wake each.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ladder/errors.hpp"

namespace ladder::cpu::detail {

class ThreadPool {
 public:
  // `threads` counts the calling thread: a pool of 1 runs everything inline.
  static Result<std::shared_ptr<ThreadPool>> create(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(0) .. fn(tasks - 1), each at most once, and returns when every started task has
  // finished. The caller takes tasks too. Concurrent callers are serialised (one job at a
  // time). A task that throws makes the remaining unstarted tasks skip and the call fail.
  Status run(int tasks, const std::function<void(int)>& fn);

 private:
  // One call of run(): lives on the caller's stack; workers reach it through job_.
  struct Job {
    const std::function<void(int)>* fn = nullptr;
    int tasks = 0;
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    Error error;      // the first failure, written under the pool's mutex_
    int joined = 0;   // workers inside drain(), guarded by mutex_
  };

  ThreadPool() = default;
  void stop_and_join();
  void worker_loop();
  // Returns when `published_` moves past `current` or kPoolSpinMicroseconds have passed.
  void spin_for_next_job(std::uint64_t current) const;
  void drain(Job& job);

  std::vector<std::thread> workers_;
  std::mutex job_mutex_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  Job* job_ = nullptr;            // the open job, or null when none accepts workers
  std::uint64_t generation_ = 0;  // bumped per job so a sleeping worker joins each job once
  std::atomic<std::uint64_t> published_{0};  // generation_, readable without the lock (spinning)
  int sleepers_ = 0;              // workers blocked on wake_, guarded by mutex_
  bool stop_ = false;
};

// The process-wide pool (created on first use with set_threads()'s count), shared: hold the
// pointer for the duration of a job.
Result<std::shared_ptr<ThreadPool>> shared_pool();

// shared_pool()->run(tasks, fn): the one entry point of the producers and the reducer.
Status parallel_for(int tasks, const std::function<void(int)>& fn);

// Test hook: the next pools refuse to start their worker number `index` (0-based) as if the
// system had no thread left (std::system_error, resource_unavailable_try_again); -1 (the
// default) turns the fault off. Lets tests reach the creation-failure path without exhausting
// the machine.
void inject_thread_start_failure(int index);

}  // namespace ladder::cpu::detail
