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

// GPU tensor-core producer (src/cuda/producer_tc.cuh): blocks each warp slot (a pair of warps)
// keeps in shared memory, one computing while kTcStages - 1 stream in (16-byte cp.async). At
// batch 1 the pinned schedule gives only n_kv_heads x 32 workgroups (64 CTAs for Muse Glimmer on
// 132 SMs), so bytes in flight per SM decide the bandwidth: 3 stages keep 2 x 16 KB per slot in
// flight (128 KB per CTA) and 4 slots x (51 KB + 1 KB of exchange) fit the H200's 227 KB of
// shared memory per block. Measured (docs/perf.md, "Tensor-core producer"): 0.37-0.46 of the
// ceiling at 131072 tokens, with DRAM ~32 % busy: per-SM cp.async traffic, not stage depth, is
// the limit there; more stages do not fit.
inline constexpr int kTcStages = 3;

// First capacity of a growing (NoPE) plane on the CPU. Large enough that growth (a full copy
// of the plane) is rare at short depth, small enough that each of the 13 planes costs
// (4096 rows x 2 KV heads x 128 dims x 2 B x 2 planes = 4 MiB) before the context grows.
inline constexpr int kDefaultGrowingCapacity = 4096;

}  // namespace ladder
