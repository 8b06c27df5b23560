// Heuristics: every tuned constant lives here with the reason (measured, or inherited with its
// measurement) beside it — the deficit lives next to the constant that causes it.
#pragma once

namespace ladder {

// Tokens per logical block. The vec family's read granularity (llama.cpp's ncpsg = 32), kept
// for every producer so that all routes share one block partition: that shared partition is
// what makes splitk over a wrapped ring bit-identical to vec over the unwrapped rows (P6).
inline constexpr int kBlockTokens = 32;

// Workgroups per head are capped at 32, llama.cpp's fixed nwg. Inherited measurement (the
// chapter, decode.rs:41-46): an occupancy-first cap of 96 oversubscribed the 13 growing NoPE
// planes and was the depth-rent lost to llama as context grew; min(blocks, 32) also keeps short
// contexts from paying empty workgroups. On the H200 this cap bounds the parallelism of one
// layer at batch 1 to n_heads x 32 workgroups; docs/perf.md records what that costs at depth.
inline constexpr int kMaxWorkgroups = 32;

// Warps per workgroup grow 1 -> 2 -> 4 while 2 * nwg * nsg * 32 < visible (llama.cpp's Metal
// launch rule), so deep planes get more lanes per workgroup instead of more workgroups.
inline constexpr int kMaxWarpsPerWorkgroup = 4;

// GPU tensor-core producer: its own partition (schedule.hpp, tc_schedule), the pinned schedule
// with its warp slots halved while a slot holds fewer than kTcMinSlotBlocks blocks and a layer
// keeps at least kTcMinLayerCtas CTAs at batch 1. A slot's fixed work (pipeline fill, pair
// merge, partial write; ~550 instructions per warp against 427 per block, ncu 2026-12-01) is
// paid per slot, so two-block slots spend more on it than on their blocks. Measured on the H200
// (docs/perf.md, 2026-12-02: one layer of Muse Glimmer, 2 CTAs per slot), slots of 4 blocks
// instead of 2: at 8,192 tokens 128 CTAs instead of 256, batch 1 -2 % and batch 16 -16 %; at
// 2,048 32 CTAs instead of 64, batch 1 +17 % (too few CTAs for the GPU); slots of 8 or 16 blocks
// cost batch 1 +5 % at 8,192 (64 CTAs) and +4 % at 32,768 (128 CTAs of 16 blocks, against 256
// of 8). Hence: at least 4 blocks per slot where a layer keeps 128 CTAs, and no coarser.
inline constexpr int kTcMinSlotBlocks = 4;
inline constexpr int kTcMinLayerCtas = 128;

// GPU tensor-core path: the merge's step 4 folds groups of this many warp slots (fold groups,
// interleaved: schedule.hpp's tc_fold_groups), and step 5 merges the groups. A walking CTA of a
// batched launch that holds whole groups folds them itself and writes one partial per group.
// Measured on an H100 (docs/perf.md 2026-12-06, probe 50: a timing-only build writing one
// partial per 4 workgroups): a batch-16 layer -2.7 us at 2,048 (-10 %, 8 partials per head
// instead of 32), -4 % at 8,192, -1 to -1.5 % at 32,768; as landed (change 50 with 50b-50d)
// batch 16 -10 to -11 % at 2,048 and -5 to -9 % at 8,192. The deficit: batch 1, whose bits must
// be batch 16's (P4), folds the same groups in its reducer, +0.2 us (+3 %) per layer at 2,048
// and +2 to +3 % on the 52-layer step there. 4 keeps the reducer's parts per run at the counts
// it is instantiated for (1, 2, 4).
inline constexpr int kTcFoldSlots = 4;

// GPU direct (batch-1) reducer (src/cuda/reduce.cu, launch_direct_reduce): besides the kernel
// bounded by kMaxWorkgroups groups, kernels bounded by these counts, ascending, each launch taking
// the smallest that holds its groups; a one-pass chain runs as many steps as its bound, each past
// the last group a predicated no-op of shuffles and folds. kTcFoldSlots' groups of 4 parts make
// 8 groups at 2,048 tokens (32 slots) and 16 at 8,192 (64 slots). Measured on an H100
// (docs/perf.md, changes 50 and 50b): with the bound at 32, 8 groups ran +8 % on the batch-1
// layer at 2,048 and 16 groups +6 % at 8,192; a branch out of the chain instead cost the deeper
// layers 3 %.
inline constexpr int kReduceGroupBounds[] = {kMaxWorkgroups / 4, kMaxWorkgroups / 2};

// GPU tensor-core producer (src/cuda/producer_tc.cuh): blocks each pair of warps keeps in
// shared memory, one computing while kTcStages - 1 stream in (16-byte cp.async). Measured on
// the H200 (docs/perf.md, change 5b): 3, 5 and 7 stages gave 57.5, 59.1 and 101.5 us for
// splitk at 131072 tokens: bytes in flight are not the limit (ncu: one warp per scheduler,
// latency-bound issue), and 7 stages fit only one CTA per SM. 2 stages (three CTAs per SM, 12
// warps instead of 8) read the same as 3 (48.3 against 48.0 us, docs/perf.md change 8): the copy
// path itself streams at ~0.67 of the ceiling with the arithmetic removed (change 9), so neither
// bytes in flight nor warps per SM is what this constant trades. 3 keeps a CTA (two pairs) at
// 104 KB, two CTAs per SM.
inline constexpr int kTcStages = 3;

// GPU tensor-core producer: how a block's K and V rows sit in its shared-memory tiles
// (src/cuda/tc_tile.hpp). Where a value sits never changes the arithmetic: every layout gives the
// same bits (GpuRoutes*.SwizzledTilesGiveThePaddedBits, GpuSlotWalk.SwizzledTilesGiveThePaddedBits).
// The one-kernel and grid forms always use padded tiles.
enum class TcTiles {
  automatic,  // LADDER_GPU_TILES=padded / swizzled, else tc_tiles_direct / tc_tiles_batched below
  padded,     // 272-byte rows: an odd number of 16-byte bank groups per row
  swizzled,   // 128-byte box rows, each row's 16-byte chunks permuted by row % 8
};
// Where `automatic` takes swizzled tiles. Measured on an H100 (docs/perf.md 2026-12-05, change 45:
// one binary, padded P against swizzled S, three rounds): batched launches (the engine's layers
// over several sequences) 0.94-0.97 at 2 sequences, 0.91-0.97 at 4 and 0.94-0.96 at 16, at every
// depth from 2,048 to 131,072; direct launches 1.00-1.02 at 2,048, 0.99-1.00 at 8,192, 0.98-1.02
// at 32,768, but 0.94-0.98 at 65,536 and 0.91-0.95 at 131,072 (on the H200, variant D: the direct
// launch +3 to +5 % at 2,048 and 8,192 with swizzled tiles, -1 to -4 % at 131,072). A one-sequence
// batched launch (the engine's batch-1 token) stays padded: its graph serves every depth, and
// swizzled measured 1.00-1.02 there at 2,048.
inline constexpr int kTcSwizzledTilesFromSequences = 2;
inline constexpr int kTcSwizzledTilesFromVisible = 65536;
inline TcTiles tc_tiles_direct(int visible) {
  return visible >= kTcSwizzledTilesFromVisible ? TcTiles::swizzled : TcTiles::padded;
}
inline TcTiles tc_tiles_batched(int sequences) {
  return sequences >= kTcSwizzledTilesFromSequences ? TcTiles::swizzled : TcTiles::padded;
}

// GPU tensor-core producer, batched launches: the CTAs along y that walk one (entry, tile
// group)'s warp slots, each CTA a strided share of them in turn. A CTA per slot paid its q load,
// pipeline fill and partial write for one or two blocks (batch 16 at 2,048: 1,024 CTAs of 2
// blocks, ~3.9 waves of 2 CTAs per SM; 67 us per layer against cuDNN's 16, docs/perf.md
// 2026-12-01); walking about one wave took the batch-16 layer 67 -> 49.7 us at 2,048 and 155 ->
// 115 us at 8,192 (H200). The extent: `fit` = the most CTAs along y whose launch (`groups`, tile
// groups x entries, times it) the GPU holds at once, at most `slots`; then the largest power of
// two within fit when it fills at least kTcWalkWholeGroupsFill tenths of it (a power of two so a
// CTA's share is whole fold groups of kTcFoldSlots: the producer folds them and writes one
// partial per group), else fit itself (one partial per slot). Why both: rounding the walk instead
// (ceil(groups x slots / resident) slots a CTA, the extent rounded up per entry) gave batch 64 an
// extent of 3 on 264 resident CTAs: 384 CTAs, 1.45 waves, no whole fold groups, 118 MB of
// partials written per layer at 32,768 and the reducer 7.5x batch 16's (H100, docs/perf.md change
// 79); and a fold is worth about what those partials cost (~7 % of that layer: their writes and
// the reducer's extra reads), so a power of two that idles more than a tenth of the wave (batch 16
// on 114 SMs: fit 7, power 4) costs more than it saves. One CTA per slot where the slots fit at
// once, or the occupancy is unknown (0). A launch shape only: the bits are the same for every value.
inline constexpr int kTcWalkWholeGroupsFill = 9;
inline int tc_walk_extent(long long groups, int slots, long long resident_ctas) {
  if (slots <= 1 || resident_ctas <= 0 || groups * slots <= resident_ctas) return slots > 0 ? slots : 0;
  const long long per_group = groups > 0 ? resident_ctas / groups : resident_ctas;
  const int fit = per_group < 1 ? 1 : (per_group < slots ? static_cast<int>(per_group) : slots);
  int power = 1;
  while (2 * power <= fit) power *= 2;
  return 10LL * power >= static_cast<long long>(kTcWalkWholeGroupsFill) * fit ? power : fit;
}

// GPU, batched launches (the engine's graphs): the reducer behind a store-fused producer is
// launched with PDL (it starts while the producer's last CTAs finish, and the next layer's
// producer behind it one hand-off earlier) only for a call of at most this many sequences.
// Measured on the H200 (docs/perf.md): at every batch size (change 27) the batch-16 layer lost
// 1.5 % at 32,768 (its 512 reducer CTAs landing beside producer CTAs still streaming) for 2 % at
// 2,048; for a one-sequence call (change 40) the 52-layer token with device I/O took 385 -> 354
// us at 2,048 and 528 -> 506 at 32,768, batch-16 rows unchanged. One-layer calls of 2 / 4 / 8
// sequences with the bound at 8 against 1 (change 40's bound): -4 / +2.2 to +2.9 / +0.4 to +2.5 %
// at 2,048 and -1.5 to -2.1 / -0.9 / -0.6 to -1.2 % at 32,768. So 2 (a bucket of 2 holds 2 sequences;
// 3 take a bucket of 4).
inline constexpr int kBatchedReducerPdlUpToBatch = 2;

// GPU splitk and vec: how many kernels a layer launches (cuda::LaunchTuning::fusion, the
// environment's LADDER_GPU_FUSED=1 / store / 0, else kGpuFusionDefault).
enum class GpuFusion {
  automatic,    // LADDER_GPU_FUSED, else kGpuFusionDefault
  fused,        // one kernel: store + producer + "the last CTA merges"
  store_fused,  // the store inside the producer, then the reducer (two kernels)
  separate,     // store, producer, reducer
  grid,         // one kernel: store + producer, a grid-wide barrier, then every CTA merges some heads
};
// store_fused, measured on the H200 (docs/perf.md, change 10), splitk/ring per layer: separate
// 10.0 / 15.3 / 22.5 / 48.5 us -> store_fused 8.7 / 13.7 / 21.2 / 46.8 at 2,048 / 8,192 / 32,768 /
// 131,072, the 52-layer step at 2,048 520 -> 455 us. fused (change 7) is slower than both: its
// merge, done by the last CTA of each 16-head group, adds a ~10 us tail (16.7 us per layer at
// 2,048 and 67.2 at 131,072, against 10.1 and 50.0 separate). grid (change 17) is slower too:
// splitk/ring 8.3 / 12.0 / 19.6 / 46.0 us store_fused -> 8.4 / 14.9 / 22.3 / 48.3 grid, although
// the reduce launch it replaces costs 2.8-3.8 us per layer (the cooperative launch ~1.9 us, the
// merge inside the launch ~1 us). Batch 16 on an H100 (docs/perf.md, change 61 and its probe c61z):
// the reducer launch costs 8-11 % of the layer at 2,048 (2-5 us from 2,048 to 32,768), but a
// fused form that keeps the store-fused walk and fold ran +17-20 % there with the merge in the
// last CTA of each tile (one CTA latency-bound for ~6 us) and +44-62 % with the merge spread
// over an 8-CTA cluster (the cluster launch itself).
inline constexpr GpuFusion kGpuFusionDefault = GpuFusion::store_fused;

// First capacity of a growing (NoPE) plane on the CPU. Large enough that growth (a full copy
// of the plane) is rare at short depth, small enough that each of the 13 planes costs
// (4096 rows x 2 KV heads x 128 dims x 2 B x 2 planes = 4 MiB) before the context grows.
inline constexpr int kDefaultGrowingCapacity = 4096;

// Fast CPU producer (src/cpu/producer_fast.cpp). Tokens per chunk: the unit of one softmax fold
// per head, with every head's scores of the chunk held at once (16 heads x 64 x 4 B = 4 KiB).
// Fixed, so the bits depend on the visible length only, never on the thread count. Sized so
// that the register-blocked producer runs at the FMA ceiling of one core of the 2-core build
// machine on cached data (docs/perf.md, issue 11); its neighbours measured there on one worker
// (2026-12-05, the split lengths kept): 32 tokens 2.5-4 % slower (twice the folds, though the
// lane tiles then fit L1), 128 no faster. The 16-token sub-block inside a chunk
// is not a tuning knob but the kernels' register tile (two 8-token vectors,
// src/cpu/producer_fast_kernels.hpp): 16 rows x 128 dims x 4 B = 8 KiB of K or V in L1.
inline constexpr int kFastChunkTokens = 64;
// Tasks (splits) per KV head: the pinned schedule's workgroup cap, so the fast producer's
// partials fit the scratch every route already reserves; 2 KV heads x 32 = 64 equal tasks give
// 16 workers four each at depth on a head-major plane (two each on a ring, kFastKvHeadsPerTask).
inline constexpr int kFastMaxSplits = kMaxWorkgroups;
// ... and at least this many chunks per split below that cap. With one chunk per split a
// 2,048-token window (the Muse Glimmer step's 39 SWA layers at any depth) was 32 splits of 64
// tokens per KV head, each task paying its setup and its partial write for one chunk (setup
// 10.6 % and partials 5.6 % of the producer's time at 2,048, rdtsc on the build machine,
// docs/perf.md 2026-12-02), and wrote 32 partials per head: 27.7 MB per batch-1 step at 2,048,
// a quarter of its KV bytes, read back by the reducers. A function of the visible length only,
// like the cap: the bits never depend on the thread count. Measured on the 16-CPU Xeon
// (docs/perf.md, 2026-12-03 "splits of at least four chunks", 5 rounds): the 52-layer step
// 3,691 -> 2,462 us at 2,048 and 4,984 -> 4,051 us at 8,192, every round of 4 faster than every
// round of 1; single layers within the host's noise. Not swept (8 or 2 chunks not tried).
inline constexpr int kFastMinChunksPerSplit = 4;
// ... and where the splits are long, they shorten from the first to the last: split j of S holds
// chunks in proportion to (S + 1) + (kFastSplitTaper - 1)(S - 1 - j), the first about this many
// times the last, while the last keeps kFastMinChunksPerSplit chunks (so from 16,384 tokens; at
// 2,048 and 8,192 the runs stay equal). The pool hands tasks out split-major (range-major where a
// task walks several splits, kFastMinTasksPerWorker), so a job's last tasks are its shortest and
// the workers that finish early wait less for the last one. Measured on the
// 16-CPU Xeon, 16 workers (docs/perf.md 2026-12-05, "what a fast-producer task costs"): with
// every length tapered, a single layer at 32,768 -6 to -18 % (13 of 16 paired rounds faster),
// the step at 2,048 and 8,192 -1 to -8 %; but at 2,048, 16 tasks for 16 workers, the longest
// first split set the layer's time (+25 to +58 %), hence not there. On the 2-vCPU EPYC (2
// workers) every row within -7 to +4 % (the host's noise). A function of the visible length only.
inline constexpr int kFastSplitTaper = 3;
// KV heads one fast-producer task walks side by side on a token-major plane (a ring), where the
// KV heads of a token share one row: with 2, a task reads each 512-byte Muse Glimmer row whole
// instead of every other 256-byte run (measured single-threaded on the 2-core machine, docs/perf.md
// 2026-11-30 "register-blocked micro-kernels": the ring was 20-30 % slower than the head-major
// growing plane with one head per task, 5-12 % with two).
inline constexpr int kFastKvHeadsPerTask = 2;
// ... but only while the grouped tasks still number at least this many per worker. On the
// 16-CPU Xeon (docs/bench/cpu-xeon16-2026-11-30-roof) the grouped ring, 32 tasks for 16 workers
// (2 each), was 23-25 % slower than the growing plane's 64 tasks at L >= 8,192, while at 8
// workers (4 grouped tasks each) it was 3-6 % faster. Ungrouped at 16 workers, with split-major
// task order, the ring was within 3 % of growing at 8,192 (docs/bench/...-roof-v2). The same
// count bounds how far a layer's splits are gathered into ranges walked by one task each (one
// range on one worker): tasks stay at least this many per worker, so many workers keep one split
// per task. Measured on the 2-vCPU Zen 5 (docs/perf.md, change 65): the step at 8,192 -3 to -4 %
// on one and two workers.
inline constexpr int kFastMinTasksPerWorker = 4;

// How long an idle CPU worker spins for the next job before it sleeps on the pool's epoch word
// (a futex), and how long a caller spins for its job's last workers before it sleeps. A decode
// step posts its jobs (one per group of layers, one per layer for attend_layer calls) back to
// back, a few microseconds apart, and a worker still spinning joins without a futex wake.
// Chosen, not tuned: 50 us covers the gap between consecutive jobs and bounds the CPU an idle
// pool burns after its last job. Not swept on 2026-12-01 either: with the lock-free join the
// fixed cost per single-layer call on the 16-CPU Xeon is ~30 us in all (docs/perf.md), and
// with every layer of a batch-1 step in one job a step posts one job, so a longer spin would
// save at most one wake per step while burning idle cores between calls.
inline constexpr int kPoolSpinMicroseconds = 50;

// CPU reduce: a layer whose partials hold fewer floats than this (n_heads x splits x
// (2 + head_dim)) is reduced by one task, every head in order; larger ones get one task per head.
// Chosen, not measured: the reducer's old threshold for running on the calling thread ("waking
// the pool costs more"); 65,536 floats are 256 KiB, ~16 splits of Muse Glimmer's 32 heads,
// i.e. visible lengths up to ~1,000 tokens on the pinned schedule (the exact producer) and up to
// ~4,000 on the fast producer's splits of four chunks (kFastMinChunksPerSplit): since
// 2026-12-03 a 2,048-token window's reduce (8 splits) is one task, where its 32 splits made one
// task per head. That side of the change was not measured apart from the step it sped up.
inline constexpr long long kReduceFloatsPerTask = 1 << 16;

// Layers per CPU pool job in a decode step. A call of at most kCpuGroupLayersUpToBatch sequences
// groups consecutive layers into one job while their partials (floats) fit kCpuJobPartialFloats (at
// least one layer per job); a larger call runs one job per layer. 8 Mi floats = 32 MiB: a whole
// batch-1 Muse Glimmer step (at most 52 layers x 32 heads x 32 splits x 130 floats = 27.7 MB) is
// one job, written and read once within the 16-CPU Xeon's 300 MiB L3. Measured on that host
// (docs/perf.md 2026-12-01, change 5b, one run; docs/bench/cpu-xeon16-2026-12-01-b), grouped
// against one job per layer: the batch-1 step 1-6 % faster at 2,048 / 8,192 / 32,768, but batches
// of 4 and 16 (grouped ~13 and ~3 layers per job) 1-18 % slower in all 8 rows, so only a call of
// one sequence is grouped. Single-layer rows, the same code in both CLIs, differed by up to 14 % in
// that run, so both effects are near the host's noise: one run, not a sweep.
inline constexpr int kCpuGroupLayersUpToBatch = 1;
inline constexpr long long kCpuJobPartialFloats = 8LL << 20;

// Upper bound on CPU worker threads (set_threads, --threads). Not a tuning point: a bound so an
// absurd request is a clear error instead of thousands of thread starts. Each worker reserves a
// stack (8 MiB of address space with glibc's default), so 1024 workers already need 8 GiB of
// address space, and no host ladder targets has more than a few hundred hardware threads.
inline constexpr int kMaxCpuThreads = 1024;

}  // namespace ladder
