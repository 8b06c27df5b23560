// run_layers: the producers and reducers of one or more layer works (one layer of each sequence
// of a call, or a single attend_layer) as one pool job, so a layer pays one wake-up of the
// workers, not one per sequence and per stage.
//
// Task order: every producer task of work 0, of work 1, ..., then the reduce tasks in the same
// work order. The pool hands out tasks in index order, so a reduce task is claimed only after
// every producer task has been claimed, i.e. is running or done on some thread: a reduce task
// waits (spinning, then yielding) for the count of its KV head's unfinished producer tasks to
// reach zero, and that always happens. The reduce itself is reduce_head, which reads the splits
// in split order: which thread reduces, and when, never changes a bit, and a work's result
// depends on its own inputs only (P4: a sequence's bits alone or in a batch).
#include <algorithm>
#include <atomic>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "cpu/thread_pool.hpp"
#include "ladder/cpu/cpu_backend.hpp"

namespace ladder::cpu {
namespace {

// Polls of a reduce task's dependency count with a pause each before it yields its core between
// polls: long enough for the last producer task of a KV head at the depths where a layer is a
// few hundred microseconds (a pause is ~40-140 cycles), short enough that on an oversubscribed
// machine the thread it waits for gets the core back.
constexpr int kPollsBeforeYield = 1024;

void wait_for_zero(const std::atomic<int>& count) {
  const detail::PoolTaskWait counted;  // the pool profile's `waiting`
  for (int polls = 0; count.load(std::memory_order_acquire) != 0; ++polls) {
    if (polls < kPollsBeforeYield) {
#if defined(__SSE2__)
      _mm_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
}

// Decrements the KV heads' counts of one producer task when it leaves, also by an exception
// (the job then fails, but a reduce task already claimed must not wait forever).
class Finished {
 public:
  Finished(std::atomic<int>* first, int count) : first_(first), count_(count) {}
  ~Finished() {
    for (int i = 0; i < count_; ++i) first_[i].fetch_sub(1, std::memory_order_release);
  }
  Finished(const Finished&) = delete;
  Finished& operator=(const Finished&) = delete;

 private:
  std::atomic<int>* first_;
  int count_;
};

// The tasks of one work inside the job (works with nothing visible have none and no slot).
struct Slot {
  std::size_t work = 0;
  std::unique_ptr<ProducerTasks> producer;
  int producer_first = 0;  // job index of its first producer task
  int reduce_first = 0;    // job index of its first reduce task
  int reduce_tasks = 0;    // 1 (every head, in order) or n_heads (one each)
  int pending_first = 0;   // index of its KV head 0 in the pending counts
};

// The slot holding job index `task`: the last one whose first index is at or before it (first
// indices grow strictly with the slot: every slot has at least one task of each kind).
template <class First>
const Slot& slot_of(const std::vector<Slot>& slots, int task, First first) {
  const auto after = std::upper_bound(slots.begin(), slots.end(), task,
                                      [&](int t, const Slot& s) { return t < first(s); });
  return *(after - 1);
}

}  // namespace

Status run_layers(std::span<const LayerWork> works) {
  std::vector<Slot> slots;
  std::unique_ptr<std::atomic<int>[]> pending;  // per (slot, KV head): producer tasks not done
  int producer_tasks = 0;
  int total = 0;
  try {
    slots.reserve(works.size());
    int kv_total = 0;
    for (std::size_t w = 0; w < works.size(); ++w) {
      const LayerWork& lw = works[w];
      if (lw.params.visible <= 0) continue;
      Slot& s = slots.emplace_back();
      s.work = w;
      s.producer = lw.fast ? fast_producer_tasks(lw.params, lw.vectors) : exact_producer_tasks(lw.route, lw.params);
      s.producer_first = producer_tasks;
      producer_tasks += s.producer->tasks();
      s.pending_first = kv_total;
      kv_total += lw.params.shape.n_kv_heads;
    }
    if (slots.empty()) return {};
    pending.reset(new std::atomic<int>[static_cast<std::size_t>(kv_total)]);
    total = producer_tasks;
    for (Slot& s : slots) {
      const LayerWork& lw = works[s.work];
      const int n_kv = lw.params.shape.n_kv_heads;
      const int per_kv = s.producer->tasks() * s.producer->kv_heads_per_task() / n_kv;
      for (int kv = 0; kv < n_kv; ++kv) pending[s.pending_first + kv].store(per_kv, std::memory_order_relaxed);
      s.reduce_first = total;
      s.reduce_tasks = reduce_in_one_task(lw.reduce) ? 1 : lw.reduce.shape.n_heads;
      total += s.reduce_tasks;
    }
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::out_of_memory, "cannot plan a layer's CPU tasks");
  }

  const auto run_task = [&](int task) {
    if (task < producer_tasks) {
      const Slot& s = slot_of(slots, task, [](const Slot& x) { return x.producer_first; });
      const int local = task - s.producer_first;
      const Finished done(&pending[s.pending_first + s.producer->first_kv_head(local)],
                          s.producer->kv_heads_per_task());
      s.producer->run(local);
      return;
    }
    const Slot& s = slot_of(slots, task, [](const Slot& x) { return x.reduce_first; });
    const ReduceParams& rp = works[s.work].reduce;
    if (s.reduce_tasks == 1) {
      for (int kv = 0; kv < rp.shape.n_kv_heads; ++kv) wait_for_zero(pending[s.pending_first + kv]);
      for (int h = 0; h < rp.shape.n_heads; ++h) reduce_head(rp, h);
      return;
    }
    const int head = task - s.reduce_first;
    wait_for_zero(pending[s.pending_first + head / rp.shape.heads_per_kv()]);
    reduce_head(rp, head);
  };
  return detail::parallel_for(total, run_task);
}

}  // namespace ladder::cpu
