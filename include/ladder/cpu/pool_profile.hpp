// Where the CPU worker pool's thread time goes (issue 11: "no row may depend on a wake-up stall",
// "timings at 1, 2, 4, 8 and 16 threads must scale sensibly"). While a profile is on, every pool
// job records when its caller posted it and returned, and every task when it started, when it
// ended and how long it waited inside for other tasks (a reduce task for its KV head's producers).
// The summary splits each job's threads x span into what the threads did:
//
//   working + waiting + before_first + between + after_last = 1 (shares of the sum over jobs)
//
// so a layer that loses time to waking workers (before_first), to tasks of unequal length or too
// few tasks for the threads (after_last), or to reduces waiting on producers (waiting) says so.
// Off by default; off, it costs each task one relaxed atomic load.
#pragma once

#include <cstdint>

#include "ladder/errors.hpp"

namespace ladder::cpu {

// Tasks one profile records (40 bytes each, 10 MiB in all): a bench row of 60 calls at 131,072
// tokens on 16 threads runs ~6,000; a 52-layer step of 60 calls ~30,000.
inline constexpr std::int64_t kPoolProfileTasks = std::int64_t{1} << 18;
// Jobs one profile records (24 bytes each).
inline constexpr std::int64_t kPoolProfileJobs = std::int64_t{1} << 16;

struct PoolProfile {
  int jobs = 0;               // pool jobs recorded
  std::int64_t tasks = 0;     // tasks recorded
  std::int64_t dropped = 0;   // tasks past the record's room, or of jobs past it (left out of every figure below)
  int threads = 0;            // threads of the pool that ran the jobs (the caller counted), the largest seen
  double span_us = 0.0;       // median over jobs: from the caller's post to its return
  double join_us = 0.0;       // median over jobs: from the post to the last joining thread's first task
  double idle_threads = 0.0;  // mean over jobs: threads that took no task of the job
  // Shares of threads x span summed over the jobs (they add up to 1; 0 when no job was recorded):
  double working = 0.0;       // inside tasks, not waiting
  double waiting = 0.0;       // inside tasks, waiting for other tasks to finish
  double before_first = 0.0;  // from the post to a thread's first task (the whole span for a thread with none)
  double between = 0.0;       // between two tasks of one thread (claiming the next)
  double after_last = 0.0;    // from a thread's last task to the caller's return
};

// Clears the record and turns it on (out_of_memory when its room cannot be allocated, leaving
// the profile off). Only jobs posted after it are recorded. One profile at a time, started and
// stopped by one thread.
Status start_pool_profile();
// Turns the record off and summarises what it holds. Call it when no job is running (after the
// call that ran them has returned); a profile that was never started summarises to zeros.
PoolProfile stop_pool_profile();

}  // namespace ladder::cpu
