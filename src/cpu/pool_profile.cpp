// The pool profile (include/ladder/cpu/pool_profile.hpp): fixed-size records filled by the
// threads of a pool through one atomic index each, summarised once the jobs are over.
#include "ladder/cpu/pool_profile.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <new>
#include <vector>

#include "cpu/pool_record.hpp"

namespace ladder::cpu {
namespace detail {
namespace {

struct TaskRecord {
  std::uint32_t job = 0;
  std::int32_t thread = 0;
  std::int64_t start_ns = 0, end_ns = 0, waited_ns = 0;
};
struct JobRecord {
  std::uint32_t job = 0;
  std::int32_t threads = 0;
  std::int64_t post_ns = 0, done_ns = 0;
};

// Sized by start_pool_profile before `on` is set (release) and read by the summary after it is
// cleared; writers claim a slot by fetch_add and drop the record past the end.
struct Record {
  std::atomic<bool> on{false};
  std::atomic<std::uint32_t> last_job{0};
  std::atomic<std::int64_t> task_count{0}, job_count{0};
  std::vector<TaskRecord> tasks;
  std::vector<JobRecord> jobs;
};
Record g_record;

thread_local int t_slot = 0;
thread_local std::int64_t t_waited_ns = 0;

bool profile_on() { return g_record.on.load(std::memory_order_acquire); }

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::int64_t pool_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

PoolJobMark pool_profile_post() {
  if (!profile_on()) return {};
  return {g_record.last_job.fetch_add(1, std::memory_order_relaxed) + 1, pool_clock_ns()};
}

void pool_profile_done(const PoolJobMark& job, int threads) {
  if (job.id == 0) return;
  const std::int64_t done = pool_clock_ns();
  const std::int64_t at = g_record.job_count.fetch_add(1, std::memory_order_relaxed);
  if (at < static_cast<std::int64_t>(g_record.jobs.size()))
    g_record.jobs[static_cast<std::size_t>(at)] = {job.id, threads, job.post_ns, done};
}

void pool_profile_task(const PoolJobMark& job, std::int64_t start_ns, std::int64_t end_ns, std::int64_t waited_ns) {
  if (job.id == 0) return;
  const std::int64_t at = g_record.task_count.fetch_add(1, std::memory_order_relaxed);
  if (at < static_cast<std::int64_t>(g_record.tasks.size()))
    g_record.tasks[static_cast<std::size_t>(at)] = {job.id, t_slot, start_ns, end_ns, waited_ns};
}

void set_pool_thread_slot(int slot) { t_slot = slot; }
int pool_thread_slot() { return t_slot; }

PoolTaskWait::PoolTaskWait() {
  if (profile_on()) start_ns_ = pool_clock_ns();
}
PoolTaskWait::~PoolTaskWait() {
  if (start_ns_ >= 0) t_waited_ns += pool_clock_ns() - start_ns_;
}
std::int64_t take_task_wait_ns() {
  const std::int64_t w = t_waited_ns;
  t_waited_ns = 0;
  return w;
}

}  // namespace detail

Status start_pool_profile() {
  detail::Record& r = detail::g_record;
  r.on.store(false, std::memory_order_release);
  try {
    r.tasks.assign(static_cast<std::size_t>(kPoolProfileTasks), {});
    r.jobs.assign(static_cast<std::size_t>(kPoolProfileJobs), {});
  } catch (const std::bad_alloc&) {
    r.tasks = {};
    r.jobs = {};
    return make_error(ErrorCode::out_of_memory, "cannot allocate the CPU pool profile's record");
  }
  r.last_job.store(0, std::memory_order_relaxed);
  r.task_count.store(0, std::memory_order_relaxed);
  r.job_count.store(0, std::memory_order_relaxed);
  r.on.store(true, std::memory_order_release);
  return {};
}

PoolProfile stop_pool_profile() {
  detail::Record& r = detail::g_record;
  PoolProfile out;
  if (!r.on.exchange(false, std::memory_order_acq_rel)) return out;
  const std::int64_t task_n = std::min<std::int64_t>(r.task_count.load(), static_cast<std::int64_t>(r.tasks.size()));
  const std::int64_t job_n = std::min<std::int64_t>(r.job_count.load(), static_cast<std::int64_t>(r.jobs.size()));
  out.dropped = r.task_count.load() - task_n;

  // Jobs by id (ids run 1..last_job); a job whose return was not recorded has no entry.
  std::vector<const detail::JobRecord*> by_id(static_cast<std::size_t>(r.last_job.load()) + 1, nullptr);
  for (std::int64_t i = 0; i < job_n; ++i) by_id[r.jobs[static_cast<std::size_t>(i)].job] = &r.jobs[static_cast<std::size_t>(i)];
  std::vector<detail::TaskRecord> tasks(r.tasks.begin(), r.tasks.begin() + task_n);
  std::sort(tasks.begin(), tasks.end(), [](const detail::TaskRecord& a, const detail::TaskRecord& b) {
    if (a.job != b.job) return a.job < b.job;
    if (a.thread != b.thread) return a.thread < b.thread;
    return a.start_ns < b.start_ns;
  });

  double working = 0, waiting = 0, before_first = 0, between = 0, after_last = 0;
  std::vector<double> spans, joins;
  double idle = 0;
  std::size_t i = 0;
  while (i < tasks.size()) {
    const std::uint32_t id = tasks[i].job;
    std::size_t end = i;
    while (end < tasks.size() && tasks[end].job == id) ++end;
    const detail::JobRecord* job = by_id[id];
    if (job == nullptr) {
      out.dropped += static_cast<std::int64_t>(end - i);
      i = end;
      continue;
    }
    const double span = static_cast<double>(job->done_ns - job->post_ns);
    int active = 0;
    std::int64_t last_join = 0;
    // One thread's run of tasks at a time: [first start, last end] minus its tasks is `between`.
    for (std::size_t t = i; t < end;) {
      std::size_t u = t;
      double inside = 0, waited = 0;
      std::int64_t last_end = tasks[t].end_ns;
      for (; u < end && tasks[u].thread == tasks[t].thread; ++u) {
        inside += static_cast<double>(tasks[u].end_ns - tasks[u].start_ns);
        waited += static_cast<double>(tasks[u].waited_ns);
        last_end = std::max(last_end, tasks[u].end_ns);
      }
      const std::int64_t first_start = tasks[t].start_ns;
      working += inside - waited;
      waiting += waited;
      before_first += static_cast<double>(first_start - job->post_ns);
      between += static_cast<double>(last_end - first_start) - inside;
      after_last += static_cast<double>(job->done_ns - last_end);
      last_join = std::max(last_join, first_start - job->post_ns);
      ++active;
      out.tasks += static_cast<std::int64_t>(u - t);
      t = u;
    }
    const int idle_here = std::max(0, job->threads - active);
    before_first += span * idle_here;  // a thread that took no task: its whole span
    idle += idle_here;
    spans.push_back(span / 1e3);
    joins.push_back(static_cast<double>(last_join) / 1e3);
    out.threads = std::max(out.threads, static_cast<int>(job->threads));
    ++out.jobs;
    i = end;
  }
  const double total = working + waiting + before_first + between + after_last;
  if (out.jobs > 0 && total > 0) {
    out.working = working / total;
    out.waiting = waiting / total;
    out.before_first = before_first / total;
    out.between = between / total;
    out.after_last = after_last / total;
    out.idle_threads = idle / out.jobs;
  }
  out.span_us = detail::median(std::move(spans));
  out.join_us = detail::median(std::move(joins));
  return out;
}

}  // namespace ladder::cpu
