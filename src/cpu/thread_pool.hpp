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
//  * no lock on a job's path: a worker joins through atomics (a generation word it spins on and
//    then sleeps on as a futex; a count of workers inside the job that the caller waits on), so
//    workers joining at once do not queue on a mutex one handoff after another, and one futex
//    call wakes every sleeping worker, none when none sleeps (docs/threads.md, "The worker pool");
//  * between jobs a worker spins for kPoolSpinMicroseconds (heuristics.hpp) before it sleeps,
//    so back-to-back jobs (the layers of a decode step) do not pay a futex wake each; a caller
//    waiting for the last tasks of its job spins the same bound before it sleeps.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cpu/pool_record.hpp"
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
  // One call of run(): lives on the caller's stack; workers reach it through open_.
  struct Job {
    const std::function<void(int)>* fn = nullptr;
    int tasks = 0;
    std::uint64_t generation = 0;  // tells two jobs at the same stack address apart
    PoolJobMark mark;              // the pool profile's view of it (id 0: not recorded)
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    Error error;  // the first failure, written under error_mutex_
  };

  ThreadPool() = default;
  void stop_and_join();
  void worker_loop();
  // Returns once epoch_ differs from `seen`: spins kPoolSpinMicroseconds, then sleeps on it.
  void wait_for_epoch(std::uint32_t seen);
  // Wakes the workers asleep in wait_for_epoch (one system call, none when none sleeps).
  void wake_sleepers();
  // Returns once no worker is inside a job: spins kPoolSpinMicroseconds, then sleeps on it.
  void wait_until_no_worker_inside();
  void drain(Job& job);

  std::vector<std::thread> workers_;
  std::mutex job_mutex_;    // one job at a time
  std::mutex error_mutex_;  // a failing task's message
  std::uint64_t generation_ = 0;     // jobs so far, guarded by job_mutex_
  std::atomic<Job*> open_{nullptr};  // the job that accepts workers, or null
  // Bumped for every job and at stop: the word idle workers spin on, then sleep on (futex).
  std::atomic<std::uint32_t> epoch_{0};
  // Workers between announcing themselves and leaving: a worker counts itself in, then reads
  // open_; the caller clears open_, then waits for zero. Both sides sequentially consistent, so
  // either the worker sees the job closed or the caller sees the worker (and waits for it).
  std::atomic<int> inside_{0};
  std::atomic<int> sleepers_{0};  // workers asleep (or about to be) on epoch_
  // 1 while the caller sleeps waiting for inside_ to reach zero: the futex word it sleeps on.
  std::atomic<std::uint32_t> caller_asleep_{0};
  std::atomic<bool> stop_{false};
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
