// The CPU device: twins of every kernel family (G7) with the same block partition and merge
// order as the CUDA kernels, multi-threaded over (KV head, workgroup) and vectorised.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ladder/device_api.hpp"
#include "ladder/geometry.hpp"
#include "ladder/errors.hpp"
#include "ladder/kernel_params.hpp"
#include "ladder/ladder.hpp"
#include "ladder/plane.hpp"

namespace ladder::cpu {

// Kernel twins. Each is deterministic: the result never depends on the thread count. The
// producers and the reducer run on the worker pool as tasks (ProducerTasks, reduce_head, through
// run_layers below) and fail (a Status) only when it does: a worker that cannot be started or a
// task that throws (e.g. out of memory).
void store_rows(const StoreParams& p);
Status copy_rows(const RowCopyParams& p);  // pad and staging

// The fast producer (src/cpu/producer_fast.cpp): the same ProducerParams contract for every
// family (rows, pad tail, current token), but its own schedule: `chunks` fixed 64-token chunks
// (kFastChunkTokens), dealt in order to `splits` tasks per KV head, equal runs or, where
// `tapered` (kFastSplitTaper), runs that shorten from the first split to the last. It writes
// partials [n_heads][splits][2 + head_dim]; reduce them with nwg = splits. splits <= the pinned
// schedule's nwg, so scratch_needs() covers it. A function of the visible length only.
struct FastSchedule {
  int chunks = 0;
  int splits = 0;
  bool tapered = false;
  // The first chunk of split `split` (0 <= split <= splits; first_chunk(splits) == chunks).
  int first_chunk(int split) const;
};
FastSchedule fast_schedule(int visible);

// A producer's work as pool tasks, so that the layers of several sequences (and each layer's
// reduce) share one pool job (run_layers): task t writes the partials of the KV heads
// [first_kv_head(t), first_kv_head(t) + kv_heads_per_task()) for its splits (one, or a range of
// them), and splits() is the reducer's nwg. The ProducerParams passed to a factory must outlive
// the object it returns.
class ProducerTasks {
 public:
  virtual ~ProducerTasks() = default;
  virtual int tasks() const = 0;
  virtual int kv_heads_per_task() const = 0;
  virtual int first_kv_head(int task) const = 0;
  virtual int splits() const = 0;
  virtual void run(int task) const = 0;
};
// The fast producer's vector width (CpuVectors, below): its micro-kernels' lanes.
enum class CpuVectors { avx2, avx512 };
std::unique_ptr<ProducerTasks> fast_producer_tasks(const ProducerParams& p, CpuVectors vectors);
// The exact twins: splitk, vec (also staged, over its staged rows) and interleaved.
std::unique_ptr<ProducerTasks> exact_producer_tasks(Route r, const ProducerParams& p);
// One head of ReduceParams: its nwg partials merged in split order, divided once.
void reduce_head(const ReduceParams& p, int head);
// Whether every head of p is reduced by one task (below kReduceFloatsPerTask, heuristics.hpp).
bool reduce_in_one_task(const ReduceParams& p);

// Which producer run_route uses on the CPU. fast (the default): the blocked producer above,
// held to the f64 bound. exact: the twin of the GPU's exact-DAG producer, bit for bit (the
// GPU's oracle). The first use reads LADDER_CPU_PRODUCER=fast|exact from the environment; an
// unknown value is an error of the call that reads it.
enum class CpuProducer { fast, exact };
const char* cpu_producer_name(CpuProducer p);
Result<CpuProducer> parse_cpu_producer(const std::string& name);
void set_producer(CpuProducer p);
Result<CpuProducer> producer();

// The fast producer's micro-kernels: avx512 (16 lanes, AVX-512F) where the CPU has it, else avx2
// (8 lanes; the portable loops without AVX2). Every width gives the same bits (each lane the same
// fmaf chain). Until set_vectors() chooses, the first use reads LADDER_CPU_VECTORS=avx2|avx512
// from the environment and keeps its answer (avx512 on a CPU without it, or an unknown value, is
// an error of every call that reads it); without it, the widest the CPU has.
const char* cpu_vectors_name(CpuVectors v);
Result<CpuVectors> parse_cpu_vectors(const std::string& name);  // refuses avx512 where the CPU lacks it
void set_vectors(CpuVectors v);
Result<CpuVectors> vectors();

// Per-layer scratch, sized through scratch_needs()/max_scratch_needs() (R5).
struct Workspace {
  std::vector<float> partials;
  std::vector<KvWord> pad;    // k then v
  std::vector<KvWord> stage;  // k then v
  void reserve(const ScratchNeeds& n);
};


// One layer of one sequence, checked, its row stored and its tail padded or staged: what is
// left is the producer (params, `fast` or the exact twin of `route`) and the reduce. The
// pointers inside point at the plane, the workspace and the LayerIO given to prepare_route.
struct LayerWork {
  Route route = Route::vec;
  bool fast = true;
  CpuVectors vectors = CpuVectors::avx2;  // the fast producer's width
  ProducerParams params;
  ReduceParams reduce;
};

// The scratch prepare_route reserves for route `r` at `visible` rows with the fast producer or
// the exact twins (scratch_needs, with the fast producer's smaller partials).
ScratchNeeds route_scratch_needs(Route r, const HeadShape& shape, int visible, bool fast);

// Everything of run_route up to the producer; a refused call leaves the plane, the workspace
// contents that matter and io.out exactly as they were.
Status prepare_route(Route r, HostPlane& plane, int position, int slot, const HeadShape& shape, const LayerIO& io,
                     Workspace& ws, LayerWork& out);

// Runs the producers and reducers of every work as ONE pool job: every producer task first, in
// work order, then the reduce tasks, each waiting for the producer tasks of its own KV head
// (claimed before it, so already running). A work's bits depend on that work alone (P4).
Status run_layers(std::span<const LayerWork> works);

// Run route `r` for one layer whose plane already took this token's append (metadata) and
// returned `slot`: stores the row (or fuses the store, interleaved), attends, reduces.
Status run_route(Route r, HostPlane& plane, int position, int slot, const HeadShape& shape,
                 const LayerIO& io, Workspace& ws);

// The CPU device for the engine (device_api.hpp): host planes, one workspace sized for the worst
// route the ladder can pick (R5, out_of_memory when it cannot be allocated) and one more per
// work of the largest job (reserved before a call commits anything); the layers of every
// sequence of a call run as pool jobs of consecutive layers (run_layers), the batch spread over
// the workers.
Result<std::unique_ptr<DeviceBackend>> create_backend(const Geometry& g);

// The CPUs this process may run on: the machine's online CPUs, lowered to its affinity mask
// (taskset, numactl, a container's cpuset) and to its cgroup's CPU quota rounded up (cgroup v2
// cpu.max or v1 cpu.cfs_quota_us on the process's cgroup or an ancestor: a container's --cpus, a
// Kubernetes CPU limit); at least 1, at most kMaxCpuThreads. `limited_by` names the bound that
// set the count ("online CPUs", "the process's CPU affinity", "the cgroup's CPU quota").
struct UsableCpus {
  int count = 1;
  std::string limited_by;
};
UsableCpus usable_cpus();

// Worker threads used by the producers (0: usable_cpus().count; at most kMaxCpuThreads,
// heuristics.hpp). The new pool is started before the old one is released, so a refused thread
// (process or memory limits) is an error that leaves the current pool in place. Safe to call
// while another thread decodes: that decode finishes on the pool it started with.
Status set_threads(int n);
int threads();

}  // namespace ladder::cpu
