// The tensor-core producer: the same block partition, per-(head, workgroup) partials and merge
// rule as THE PRODUCER DAG (kernel_params.hpp, steps 1, 4 and 5), with a different in-block
// arithmetic (steps 2 and 3). It is the default GPU producer for head_dim 128; the exact-DAG
// producer (producer.cuh) stays selectable (LaunchTuning::producer, LADDER_GPU_DAG=exact) and is
// the one that reproduces the CPU twins' bits.
//
// Why tensor cores: with 16 query heads per KV head, every 2-byte KV element feeds 16 heads x
// (score + V accumulate) FMAs, 8 FP32 FMAs per KV byte; at 4.5 TB/s that is ~36 TFMA/s, above the
// H200's FP32 CUDA-core rate. The sibling heads of one KV head form the M dimension of
// mma.sync.m16n8k16 (f16 x f16 -> f32, or bf16 x bf16 -> f32 for bf16 planes: the kernels are
// instantiated per KV dtype, and every "f16" below reads "the plane's dtype" for bf16), so the
// CUDA cores only do the softmax.
//
// In-block arithmetic (a function of the block's rows and count only, never of where the rows
// came from, so P1, P2 and P6 hold bit for bit):
//  * q stays unscaled. Each q element is split into hi = f16(q) and lo = f16(q - hi), and the
//    scores of a block accumulate mma(q_hi, K) then mma(q_lo, K) per 16-dim step into one f32
//    accumulator; score = acc * scale in f32 (as in the DAG's step 2). Relative error of the
//    split q is ~2^-22, so scores are near f32 accurate (K is exact f16 already). With bf16
//    (8 significant bits a piece) the two pieces carry 16 bits: ~2^-17 relative, still 100x
//    under the 2^-9 rounding the bf16 rows themselves carry.
//  * Rows past the block's count are zero-filled in shared memory (never read from memory) and
//    their scores are -inf, so their weights are exactly 0.
//  * block max per head over the block's 32 scores (score_max: a NaN score survives); corr =
//    fold_block_max(stats, block_max) (softmax.hpp); w = 2^((score - m) * log2 e) by the MUFU
//    ex2.approx instruction (relative error ~2^-22, deterministic on a given GPU; 3 instructions
//    instead of softmax_exp's ~20, which were the largest share of a warp's block); the block's
//    weight sum is each lane's 8 weights in token order, then two quad shuffles (xor 1, 2);
//    s += block sum; o *= corr.
//  * P (the weights) is split into hi + lo f16 the same way, and o accumulates mma(P_hi, V) then
//    mma(P_lo, V) per 16-token step.
//  * Interleaved: the current token's K/V come from the f32 activations, split into hi (written
//    into the block's tile row, which is zero-filled, never read from the plane) and lo (a second
//    tile that is zero except that row, run through the same score and P.V mmas).
//  * A warp slot's blocks are folded by kTcPairs pairs of warps (pair p takes the slot's blocks
//    p, p + kTcPairs, ...), whose states merge in pair order by softmax.hpp's rule. Each warp
//    slot then writes its [m, s, o] partial unmerged; the reducer (reduce.cu, shared) does this
//    path's step 4 — each fold group's warp slots (tc_fold_groups: kTcFoldSlots interleaved
//    slots) folded left in part order (softmax.hpp, fold_in) — before merging
//    the groups. A walking CTA of a batched launch that holds whole groups folds them itself by
//    the same fold and writes one partial per group (TcPartials::per_group; parts = 1): the same
//    bits, less traffic.
//
// Shape: one CTA per (KV head, tile of 16 sibling heads, DAG warp slot w*nsg + g): at batch 1
// the pinned schedule has only n_kv_heads x nwg workgroups (64 for Muse Glimmer), and a CTA per
// workgroup left 68 of 132 SMs idle (docs/perf.md, change 5). A CTA holds kTcPairs pairs of
// warps (docs/perf.md, change 6). Within a pair, half h issues rows 16h..16h+15 of each block
// and accumulates o for dims 64h..64h+63; both halves score all 32 tokens, so each holds the
// block's max, weights and sums itself (one CTA barrier per block, change 8) and both keep the
// same (m, s). Two warps per pair halve each warp's share of the copy and of P.V and give every
// scheduler more warps to hide latency (one warp per scheduler issued every 2.8 cycles, ncu).
// heads_per_kv < 16 pads the tile with zero q rows (computed, never written); > 16 uses several
// tiles. Blocks stream into shared memory with 16-byte cp.async, kTcStages blocks deep per pair,
// and are read with ldmatrix.
//
// A CTA may walk several warp slots of its (sequence, KV head, tile), one after another
// (SlotWalk): a batched launch has far more slots than the GPU holds CTAs, and a CTA per slot
// paid its q load, pipeline fill and partial write for one or two blocks each (docs/perf.md,
// 2026-12-01). q is loaded once per CTA, the next slot's first blocks stream in while the
// current slot's pairs merge, and each slot's partial is computed exactly as by a CTA of its
// own: the walk is a launch shape, never an input to the arithmetic (P4 holds). Where its walk
// holds whole fold groups at no cost to the longest walk (tc_folded_groups_per_cta), it walks
// each group's slots consecutively and folds them in registers as the reducer would have.
#pragma once

#include <array>
#include <climits>

#include "cuda/common.cuh"
#include "cuda/reduce.cuh"
#include "cuda/tc_tile.hpp"
#include "ladder/heuristics.hpp"
#include "ladder/schedule.hpp"
#include "ladder/softmax.hpp"

namespace ladder::cuda_detail {

static_assert(TcPaddedTile::kDims == kHeadDim && TcSwizzledTile::kDims == kHeadDim, "a tile row is one head's row");
// q's staging rows (tc_stage_q), in either tile layout: the padded tile's 272-byte pitch, whose
// odd number of 16-byte groups puts the 8 row addresses of one ldmatrix matrix into 8 bank groups.
inline constexpr int kTcQRowHalfs = TcPaddedTile::kRowHalfs;
inline constexpr int kTcWarpsPerSlot = 2;
inline constexpr int kTcPairThreads = kTcWarpsPerSlot * kWarpSize;
// Pairs of warps per CTA (per warp slot): pair p takes the slot's blocks p, p + kTcPairs, ...
// and the pairs merge their states at the end, pair 0 first. With one pair per CTA ncu saw 1
// active warp per scheduler, eligible 28 % of cycles (docs/perf.md, change 6).
inline constexpr int kTcPairs = 2;
inline constexpr int kTcThreads = kTcPairs * kTcPairThreads;
static_assert(kTcStages >= 2, "the interleaved lo tile uses the stage after the pair's last block");
static_assert(kTcPairs >= 2, "the q staging is pair 1's last stage");

// What one thread hands the other pair at a slot's end (tc_merge_pairs): the o values of one
// fragment row (two per n-tile of its half's 64 dims), then that row's m and s.
inline constexpr int kTcHandoffValues = 2 * (kHeadDim / 16) + 2;

// CTAs per SM that shared memory allows, declared to ptxas as every tensor-core kernel's minimum
// (__launch_bounds__): without it, a kernel whose registers came out a little above 168 was
// squeezed to 168 with spills for a third CTA per SM that shared memory never admits (change 23).
inline constexpr int kTcCtasPerSm = 2;
inline constexpr std::size_t kSmemPerSmBytes = 228 * 1024;   // H100 / H200 shared memory per SM
inline constexpr std::size_t kSmemReservedPerCta = 1024;      // of it, what the system keeps per CTA
inline constexpr std::size_t kDynamicSmemAlignBytes = 16;     // what `extern __shared__ __align__(16)` promises

// A CTA's shared memory in tile layout Tile (tc_tile.hpp): per pair of warps kTcStages stages,
// each a block's K tile then its V tile.
template <class Tile>
struct TcSmem {
  static constexpr int kTileHalfs = Tile::kHalfs;
  static constexpr int kStageHalfs = 2 * kTileHalfs;
  static constexpr int kSlotHalfs = kTcStages * kStageHalfs;  // one pair's stages
  // The pair merge area (tc_merge_pairs' hand-off) reuses pair 0's last stage: the next slot's
  // prologue fills stages 0 .. kTcStages-2 while the merge runs, and its first iteration issues
  // into the last stage only after a CTA barrier.
  static constexpr int kMergeOffsetHalfs = (kTcStages - 1) * kStageHalfs;
  static constexpr int kMergeAreaFloats = static_cast<int>(kStageHalfs * sizeof(KvWord) / sizeof(float));
  // The q staging (hi rows 0-15, lo rows 16-31, kTcQRowHalfs apart) is pair 1's last stage: no
  // prologue fills it, and the fold's first iteration issues into it only after a CTA barrier.
  static constexpr int kQOffsetHalfs = kSlotHalfs + (kTcStages - 1) * kStageHalfs;
  // Every pair's stages, and the slack that lets a kernel start them on Tile::kAlignBytes
  // (tc_aligned_smem): padded 104 KB, swizzled 96 KB + 1 KB at 3 stages, two CTAs per SM.
  static constexpr std::size_t kBytes =
      kTcPairs * kSlotHalfs * sizeof(KvWord) +
      (Tile::kAlignBytes > static_cast<int>(kDynamicSmemAlignBytes) ? Tile::kAlignBytes : 0);

  static_assert(2 * kTcHeads * kTcQRowHalfs <= kStageHalfs, "q's hi and lo rows fit in one stage");
  static_assert(kTcPairs * kTcHandoffValues * kTcPairThreads <= kMergeAreaFloats, "the hand-off fits in one stage");
  static_assert(kStageHalfs * sizeof(KvWord) % Tile::kAlignBytes == 0, "every stage's tiles start aligned");
  static_assert(kTcCtasPerSm * (kBytes + kSmemReservedPerCta) <= kSmemPerSmBytes, "two CTAs' tiles fit an SM");
  static_assert((kTcCtasPerSm + 1) * (kBytes + kSmemReservedPerCta) > kSmemPerSmBytes, "and no third");
};
// The one-kernel and grid forms (fused_tc.cuh, producer_tc_grid_kernel*) use padded tiles only.
using TcPaddedSmem = TcSmem<TcPaddedTile>;


__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// How a producer's KV copies ask L2 to keep their lines (a launch shape: no value changes).
// evict_first: a layer's KV rows are read once per launch, and the lines it leaves in L2 (the
// partials its reducer reads back, the activations) should outlive them; batched launches only
// (docs/perf.md, change 48: the engine's token and batch-16 layers faster, a direct-launch step
// with a dependent kernel between layers slower).
enum class TcL2 { normal, evict_first };

// An L2 policy that marks the lines it touches first to go.
__device__ __forceinline__ unsigned long long l2_evict_first() {
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// 16 bytes global -> shared, bypassing L1, with L2 hint kL2; src_bytes 0 zero-fills and reads
// nothing.
template <TcL2 kL2 = TcL2::normal>
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes) {
  if constexpr (kL2 == TcL2::evict_first) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes), "l"(l2_evict_first())
                 : "memory");
  } else {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// The dynamic shared memory rounded up to where layout Tile's tiles must start (TcSmem::kBytes
// holds the slack). Padded tiles need no more than the declaration's 16 bytes: no instruction.
template <class Tile>
__device__ __forceinline__ KvWord* tc_aligned_smem(KvWord* raw) {
  if constexpr (Tile::kAlignBytes <= static_cast<int>(kDynamicSmemAlignBytes)) {
    return raw;
  } else {
    const unsigned misalign = smem_u32(raw) % Tile::kAlignBytes;
    return misalign == 0 ? raw : raw + (Tile::kAlignBytes - misalign) / sizeof(KvWord);
  }
}

// Where a lane's ldmatrix reads and cp.async pieces fall in a tile, by layout (tc_tile.hpp):
//  * Scores(ktile, lane).at(hb, j, kk): tc_scores' matrix of lane 8 mat + r, row 16 hb + 8 j + r,
//    dims 16 kk + 8 mat (kk even);
//  * Pv(vtile, half, lane).at(kk, jp): tc_pv's matrix of lane 8 mat + r, row 16 kk + 8 (mat & 1)
//    + r, dims 64 half + 16 jp + 8 (mat >> 1);
//  * Copy(stage, lane).at(pass, row_c, plane): tc_issue_block's 16-byte piece of pass
//    `pass`, row row_c + lane / 16, dims 8 (lane % 16) of the stage's K (kTcPlaneK) or V tile.
// The padded forms are the expressions the kernels had before the layouts were two; the swizzled
// forms hold the lane parts in registers and add constants to them.
template <class Tile>
struct TcTileAddrs;
inline constexpr int kTcPlaneK = 0;  // a stage holds a block's K tile, then its V tile
inline constexpr int kTcPlaneV = 1;

template <>
struct TcTileAddrs<TcPaddedTile> {
  using Tile = TcPaddedTile;
  struct Scores {
    const KvWord* tile;
    int r, mat;
    __device__ __forceinline__ Scores(const KvWord* ktile, int lane) : tile(ktile), r(lane & 7), mat(lane >> 3) {}
    __device__ __forceinline__ unsigned at(int hb, int j, int kk) const {
      return smem_u32(tile + (16 * hb + 8 * j + r) * Tile::kRowHalfs + 16 * kk + 8 * mat);
    }
  };
  struct Pv {
    const KvWord* tile;
    int half, r, mat;
    __device__ __forceinline__ Pv(const KvWord* vtile, int h, int lane)
        : tile(vtile), half(h), r(lane & 7), mat(lane >> 3) {}
    __device__ __forceinline__ unsigned at(int kk, int jp) const {
      return smem_u32(tile + (16 * kk + (mat & 1) * 8 + r) * Tile::kRowHalfs + 64 * half + 16 * jp + (mat >> 1) * 8);
    }
  };
  struct Copy {
    KvWord* stage;
    int lane;
    __device__ __forceinline__ Copy(KvWord* s, int l) : stage(s), lane(l) {}
    __device__ __forceinline__ unsigned at(int /*pass*/, int row_c, int plane) const {
      constexpr int kChunksPerRow = Tile::kDims / Tile::kChunkHalfs;
      return smem_u32(stage + plane * Tile::kHalfs + (row_c + lane / kChunksPerRow) * Tile::kRowHalfs +
                      (lane % kChunksPerRow) * Tile::kChunkHalfs);
    }
  };
};

template <>
struct TcTileAddrs<TcSwizzledTile> {
  using Tile = TcSwizzledTile;
  using Ld = TcSwizzledLdmatrix;
  struct Scores {
    unsigned lane_at[Ld::kScoreLaneParts];
    __device__ __forceinline__ Scores(const KvWord* ktile, int lane) {
      const unsigned base = smem_u32(ktile);
#pragma unroll
      for (int w = 0; w < Ld::kScoreLaneParts; ++w) lane_at[w] = base + sizeof(KvWord) * Ld::score_lane(lane, w);
    }
    __device__ __forceinline__ unsigned at(int hb, int j, int kk) const {
      return lane_at[Ld::score_which(kk / 2)] + sizeof(KvWord) * Ld::score_const(hb, j, kk / 2);
    }
  };
  struct Pv {
    unsigned lane_at[Ld::kPvLaneParts];
    __device__ __forceinline__ Pv(const KvWord* vtile, int half, int lane) {
      const unsigned base = smem_u32(vtile);
#pragma unroll
      for (int jp = 0; jp < Ld::kPvLaneParts; ++jp) lane_at[jp] = base + sizeof(KvWord) * Ld::pv_lane(lane, half, jp);
    }
    __device__ __forceinline__ unsigned at(int kk, int jp) const {
      return lane_at[jp] + sizeof(KvWord) * Ld::pv_const(kk);
    }
  };
  struct Copy {
    unsigned lane_at[TcSwizzledCopy::kLaneParts];
    __device__ __forceinline__ Copy(KvWord* stage, int lane) {
      const unsigned base = smem_u32(stage);
#pragma unroll
      for (int w = 0; w < TcSwizzledCopy::kLaneParts; ++w)
        lane_at[w] = base + sizeof(KvWord) * TcSwizzledCopy::lane(lane, w);
    }
    __device__ __forceinline__ unsigned at(int pass, int row_c, int plane) const {
      return lane_at[TcSwizzledCopy::which(pass)] +
             sizeof(KvWord) * static_cast<unsigned>(plane * Tile::kHalfs + row_c * Tile::kBoxDims);
    }
  };
};

// c += a (16x16, row) * b (16x8, col); inputs of dtype D (f16 or bf16), f32 accumulate.
template <KvDtype D>
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (D == KvDtype::bf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ unsigned half2_bits(__half2 h) { return *reinterpret_cast<unsigned*>(&h); }
__device__ __forceinline__ unsigned bf162_bits(__nv_bfloat162 h) { return *reinterpret_cast<unsigned*>(&h); }

// A block weight exp(x), x = score - m <= 0 or -inf (masked: exactly 0); ex2 keeps a NaN NaN.
__device__ __forceinline__ float tc_weight(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x * kLog2e));
  return y;
}

// (x0, x1) -> hi = D pair, lo = D pair of the rounding residuals (exact in f32).
template <KvDtype D>
__device__ __forceinline__ void split_pair(float x0, float x1, unsigned& hi, unsigned& lo) {
  if constexpr (D == KvDtype::bf16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
    const float2 hf = __bfloat1622float2(h);
    hi = bf162_bits(h);
    lo = bf162_bits(__floats2bfloat162_rn(x0 - hf.x, x1 - hf.y));
  } else {
    const __half2 h = __floats2half2_rn(x0, x1);
    const float2 hf = __half22float2(h);
    hi = half2_bits(h);
    lo = half2_bits(__floats2half2_rn(x0 - hf.x, x1 - hf.y));
  }
}

struct TcQ {
  unsigned hi[kHeadDim / 16][4];
  unsigned lo[kHeadDim / 16][4];
};

// Scores of both halves of a block, both n-tiles each: s[hb][j] = tokens 16 hb + 8 j .. +7.
using TcBlockScores = float[kTcWarpsPerSlot][2][4];

// A block's scores: acc[hb][j] += q_hi.K + q_lo.K per 16-dim step. Each accumulator adds in dim
// order (hi then lo per step); the four accumulators' chains are interleaved so that the tensor
// pipe has four independent mmas to issue between dependent ones (one chain after another left
// the warp waiting on each mma's latency: docs/perf.md, change 8).
template <KvDtype D, class Tile>
__device__ __forceinline__ void tc_scores(const TcQ& q, const KvWord* ktile, int lane, TcBlockScores& acc) {
  const typename TcTileAddrs<Tile>::Scores at(ktile, lane);
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; kk += 2) {
    unsigned b[kTcWarpsPerSlot][2][4];
#pragma unroll
    for (int hb = 0; hb < kTcWarpsPerSlot; ++hb)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        ldmatrix_x4(at.at(hb, j, kk), b[hb][j]);
#pragma unroll
    for (int hb = 0; hb < kTcWarpsPerSlot; ++hb)
#pragma unroll
      for (int j = 0; j < 2; ++j) mma16816<D>(acc[hb][j], q.hi[kk], b[hb][j][0], b[hb][j][1]);
#pragma unroll
    for (int hb = 0; hb < kTcWarpsPerSlot; ++hb)
#pragma unroll
      for (int j = 0; j < 2; ++j) mma16816<D>(acc[hb][j], q.lo[kk], b[hb][j][0], b[hb][j][1]);
#pragma unroll
    for (int hb = 0; hb < kTcWarpsPerSlot; ++hb)
#pragma unroll
      for (int j = 0; j < 2; ++j) mma16816<D>(acc[hb][j], q.hi[kk + 1], b[hb][j][2], b[hb][j][3]);
#pragma unroll
    for (int hb = 0; hb < kTcWarpsPerSlot; ++hb)
#pragma unroll
      for (int j = 0; j < 2; ++j) mma16816<D>(acc[hb][j], q.lo[kk + 1], b[hb][j][2], b[hb][j][3]);
  }
}

// Half h's o (n-tile j = dims 64h + 8j .. +7) += P_hi.V + P_lo.V, per 16-token step. Each
// accumulator adds hi then lo per step; the eight accumulators' chains are interleaved.
template <KvDtype D, class Tile>
__device__ __forceinline__ void tc_pv(const unsigned (&phi)[2][4], const unsigned (&plo)[2][4],
                                      const KvWord* vtile, int half, int lane, float (&o)[kHeadDim / 16][4]) {
  constexpr int kPairsOfTiles = kHeadDim / 32;  // n-tile pairs of a half's 64 dims
  const typename TcTileAddrs<Tile>::Pv at(vtile, half, lane);
#pragma unroll
  for (int kk = 0; kk < kBlockTokens / 16; ++kk) {
    unsigned b[kPairsOfTiles][4];
#pragma unroll
    for (int jp = 0; jp < kPairsOfTiles; ++jp)
      ldmatrix_x4_trans(at.at(kk, jp), b[jp]);
#pragma unroll
    for (int jp = 0; jp < kPairsOfTiles; ++jp) {
      mma16816<D>(o[2 * jp], phi[kk], b[jp][0], b[jp][1]);
      mma16816<D>(o[2 * jp + 1], phi[kk], b[jp][2], b[jp][3]);
    }
#pragma unroll
    for (int jp = 0; jp < kPairsOfTiles; ++jp) {
      mma16816<D>(o[2 * jp], plo[kk], b[jp][0], b[jp][1]);
      mma16816<D>(o[2 * jp + 1], plo[kk], b[jp][2], b[jp][3]);
    }
  }
}

// Family policy (splitk.cu, vec.cu, interleaved.cu, fused.cu): locate(p, t) and
// k_row/v_row(p, loc, kvh), which return nullptr for a current token that the route takes from
// the activations (Family::kCurrentRow, below).
//
// Lane r locates row r of the block once (a ring's wrap costs a division) and holds its two row
// pointers; each 16-byte pass takes the pointers of its row by shuffle. Recomputing a row's
// address in every pass was ~40 % of a warp's instructions per block (docs/perf.md, change 8).
template <class Family, class Tile, TcL2 kL2 = TcL2::normal>
__device__ __forceinline__ void tc_issue_block(const ProducerParams& p, int b, int kvh, int half, int lane,
                                               KvWord* stage) {
  const int first = b * kBlockTokens;
  const int count = min(kBlockTokens, p.visible - first);
  const int my_loc = Family::locate(p, first + min(lane, count - 1));
  // A dead row (past the count, or a current token taken from the activations) reads nothing
  // (source size 0); its address only has to be a valid global one.
  const KvWord* my_k = lane < count ? Family::k_row(p, my_loc, kvh) : nullptr;
  const KvWord* my_v = lane < count ? Family::v_row(p, my_loc, kvh) : nullptr;
  const unsigned live_rows = __ballot_sync(kFullMask, my_k != nullptr);
  const auto* dummy = reinterpret_cast<const KvWord*>(p.q);
  const auto k_bits = reinterpret_cast<unsigned long long>(my_k != nullptr ? my_k : dummy);
  const auto v_bits = reinterpret_cast<unsigned long long>(my_v != nullptr ? my_v : dummy);
  constexpr int kChunksPerRow = kHeadDim * 2 / 16;  // 16-byte chunks in a 256-byte row
  constexpr int kRowsPerPass = kWarpSize / kChunksPerRow;
  constexpr int kChunkBytes = 16;
  const int chunk = lane % kChunksPerRow;
  constexpr int kPassesPerHalf = kBlockTokens / kRowsPerPass / kTcWarpsPerSlot;
  static_assert(kRowsPerPass == TcSwizzledCopy::kRowsPerPass, "TcSwizzledCopy's split of a pass's addresses");
  static_assert(kPassesPerHalf * kRowsPerPass % TcSwizzledTile::kSwizzleRows == 0, "TcSwizzledCopy::which(pass)");
  const typename TcTileAddrs<Tile>::Copy at(stage, lane);
#pragma unroll
  for (int pass = 0; pass < kPassesPerHalf; ++pass) {
    const int row_c = (half * kPassesPerHalf + pass) * kRowsPerPass;
    const int row = row_c + lane / kChunksPerRow;
    const auto* ks = reinterpret_cast<const KvWord*>(__shfl_sync(kFullMask, k_bits, row));
    const auto* vs = reinterpret_cast<const KvWord*>(__shfl_sync(kFullMask, v_bits, row));
    const int bytes = (live_rows >> row) & 1u ? kChunkBytes : 0;
    cp_async16<kL2>(at.at(pass, row_c, kTcPlaneK), ks + chunk * 8, bytes);
    cp_async16<kL2>(at.at(pass, row_c, kTcPlaneV), vs + chunk * 8, bytes);
  }
}

// The warp slots (the DAG's flat w * nsg + g) one CTA walks, below end and the schedule's
// slots(): first, first + step, ... (runs of one slot; a CTA per slot is {blockIdx.y, gridDim.y}
// with gridDim.y >= slots()), or, folding fold groups (runs: the schedule's FoldGroups; first is
// part 0 of group `first`), each group's slots in part order, the next group `step` groups after
// the previous one, while there is one. A position carries its group and part along, so no step
// divides by the group count (two integer divisions by a run-time divisor per slot, ~40
// instructions per warp and slot: docs/perf.md, change 54b's ncu).
struct SlotWalk {
  int first = 0;
  int step = 1;
  int end = INT_MAX;
  FoldGroups runs{1, 1};
  struct At {
    int flat;
    int group;  // folding walks: the fold group and the part of `flat`
    int part;
  };
  __device__ __forceinline__ At begin() const { return At{first, first, 0}; }
  __device__ __forceinline__ At next(const At& a) const {
    if (runs.parts == 1) return At{a.flat + step, a.group + step, 0};
    if (a.part + 1 < runs.parts) return At{runs.slot(a.group, a.part + 1), a.group, a.part + 1};
    const int j = a.group + step;
    return j < runs.groups ? At{runs.slot(j, 0), j, 0} : At{INT_MAX, INT_MAX, 0};
  }
};

// The walk of CTA `y` of `ctas` over schedule `sched`'s slots, and whether it folds fold groups
// (a strided walk y, y + ctas, ... where not). A folding CTA walks groups y, y + ctas, ..., each
// one's slots in order: groups are interleaved (slots j, j + groups, ...), so at any moment the
// launch's CTAs read adjacent slots' blocks, as the strided walk has them (consecutive slots per
// CTA put the concurrent reads apart: docs/perf.md, change 49's outcome and change 50).
struct TcWalkPlan {
  SlotWalk walk;
  bool folds = false;
};
__device__ __forceinline__ TcWalkPlan tc_walk_plan(const Schedule& sched, int y, int ctas, TcPartials partials) {
  const FoldGroups fg = tc_fold_groups(sched);
  const bool folds = partials == TcPartials::per_group && tc_folded_groups_per_cta(fg.groups, fg.parts, ctas) > 0;
  if (!folds) return TcWalkPlan{SlotWalk{y, ctas}, false};
  return TcWalkPlan{SlotWalk{y < fg.groups ? fg.slot(y, 0) : INT_MAX, ctas, INT_MAX, fg}, true};
}

// Whether warp slot `flat` folds block b (the schedule deals blocks to slots round robin).
__device__ __forceinline__ bool tc_owns_block(const Schedule& sched, int flat, int b) {
  return b % sched.block_stride() == flat;
}

// This pair's blocks of warp slot `flat` (the slot's blocks pair, pair + kTcPairs, ...) into
// stages kFrom .. kTo - 1 (a prologue split around q's loads issues it in two calls; whole:
// stages 0 .. kTcStages-2): one commit group per stage, empty where the pair has no block.
template <class Family, class Tile, TcL2 kL2 = TcL2::normal, int kFrom = 0, int kTo = kTcStages - 1>
__device__ __forceinline__ void tc_prologue(const ProducerParams& p, const Schedule& sched, int flat, int pair,
                                            int kvh, int half, int lane, KvWord* wsm) {
  static_assert(0 <= kFrom && kFrom <= kTo && kTo <= kTcStages - 1, "a range of the prologue's stages");
  const int pair_b0 = flat + pair * sched.block_stride();
  const int pair_stride = kTcPairs * sched.block_stride();
#pragma unroll
  for (int s = kFrom; s < kTo; ++s) {
    const int b = pair_b0 + s * pair_stride;
    if (b < sched.blocks) tc_issue_block<Family, Tile, kL2>(p, b, kvh, half, lane, wsm + s * TcSmem<Tile>::kStageHalfs);
    cp_async_commit();
  }
}

// One thread's place in the CTA: its pair of warps and half of the pair, its lane's mma
// fragment coordinates, and the CTA's (KV head, tile of 16 sibling heads).
struct TcThread {
  int lane, pair, half;
  int hpk, kvh, tile;
  int group;  // C/A fragment row: heads `group` and `group + 8` of the tile
  int quad;   // C/A fragment column pair 2*quad, 2*quad + 1
};

__device__ __forceinline__ TcThread tc_thread(const HeadShape& shape) {
  TcThread t;
  t.lane = static_cast<int>(threadIdx.x) % kWarpSize;
  t.pair = static_cast<int>(threadIdx.x) / kTcPairThreads;
  t.half = (static_cast<int>(threadIdx.x) / kWarpSize) % kTcWarpsPerSlot;
  t.hpk = shape.heads_per_kv();
  const int tiles = tc_tiles(t.hpk);
  t.kvh = static_cast<int>(blockIdx.x) / tiles;
  t.tile = static_cast<int>(blockIdx.x) % tiles;
  t.group = t.lane >> 2;
  t.quad = t.lane & 3;
  return t;
}

// The tile's q rows as hi + lo A fragments (heads past heads_per_kv are zero rows), split once
// per CTA: every warp needs all 16 heads' fragments, and four warps each splitting the 2,048
// values was ~700 of a warp's ~1,900 instructions at 2,048 tokens (docs/perf.md, change 12).
// Thread i converts four 4-value chunks (rows = heads, coalesced 512-byte rows) into the hi and
// lo rows of the q staging tile; after a CTA barrier each warp loads its fragments with
// ldmatrix, whose registers are the row-major A layout the per-warp split produced (a0 = head
// `group` dims 2q..2q+1, a1 = head `group + 8`, a2/a3 the same 8 dims further), so the bits do
// not change. Every thread of the CTA must call it, before the first block's CTA barrier (the
// fold's first iteration refills the staging stage only after that barrier).
// q's loads for one CTA (its 16-head tile's f32 rows, kTcQChunksPerThread 4-dim chunks per
// thread), issued by tc_issue_q and consumed by tc_stage_q, so that a CTA can issue other loads
// (the first blocks' copies) while they are in flight.
constexpr int kTcQChunksPerRow = kHeadDim / kDimsPerLane;
constexpr int kTcQChunksPerThread = kTcHeads * kTcQChunksPerRow / kTcThreads;
static_assert(kTcHeads * kTcQChunksPerRow % kTcThreads == 0, "every thread converts the same number of chunks");
struct TcQLoads {
  Float4 x[kTcQChunksPerThread];
};

// Every load first, then the arithmetic (tc_stage_q): a loop that converted each chunk as it
// arrived paid one DRAM round trip per chunk (the first version of change 12: 0.5 us slower at
// 2,048).
__device__ __forceinline__ void tc_issue_q(const ProducerParams& p, const TcThread& t, TcQLoads& loads) {
  const int hpk = t.hpk, kvh = t.kvh, tile = t.tile;
#pragma unroll
  for (int c = 0; c < kTcQChunksPerThread; ++c) {
    const int it = static_cast<int>(threadIdx.x) + c * kTcThreads;
    const int head = tile * kTcHeads + it / kTcQChunksPerRow;
    const int d = (it % kTcQChunksPerRow) * kDimsPerLane;
    loads.x[c] = head < hpk ? load_float4(p.q + static_cast<std::int64_t>(kvh * hpk + head) * kHeadDim + d)
                            : Float4{{0.0f, 0.0f, 0.0f, 0.0f}};
  }
}

// q in dtype D's hi/lo split, through shared memory into mma fragments.
template <KvDtype D, class Tile>
__device__ __forceinline__ void tc_stage_q(const TcThread& t, KvWord* smem, const TcQLoads& loads, TcQ& q) {
  KvWord* staging = smem + TcSmem<Tile>::kQOffsetHalfs;
#pragma unroll
  for (int c = 0; c < kTcQChunksPerThread; ++c) {
    const int it = static_cast<int>(threadIdx.x) + c * kTcThreads;
    const int h = it / kTcQChunksPerRow;
    const int d = (it % kTcQChunksPerRow) * kDimsPerLane;
    const Float4 r = in_range4<D>(loads.x[c]);
    unsigned hi[2], lo[2];
    split_pair<D>(r.x[0], r.x[1], hi[0], lo[0]);
    split_pair<D>(r.x[2], r.x[3], hi[1], lo[1]);
    *reinterpret_cast<uint2*>(staging + h * kTcQRowHalfs + d) = make_uint2(hi[0], hi[1]);
    *reinterpret_cast<uint2*>(staging + (kTcHeads + h) * kTcQRowHalfs + d) = make_uint2(lo[0], lo[1]);
  }
  __syncthreads();
  // ldmatrix.x4: lanes 0-15 address rows 0-15 at dims 16kk..+7, lanes 16-31 the same rows at +8.
  const int row = t.lane % kTcHeads;
  const int col = (t.lane / kTcHeads) * 8;
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    ldmatrix_x4(smem_u32(staging + row * kTcQRowHalfs + 16 * kk + col), q.hi[kk]);
    ldmatrix_x4(smem_u32(staging + (kTcHeads + row) * kTcQRowHalfs + 16 * kk + col), q.lo[kk]);
  }
}

// Both steps at once (the one-kernel form, fused_tc.cuh).
template <KvDtype D, class Tile>
__device__ __forceinline__ void tc_load_q(const ProducerParams& p, const TcThread& t, KvWord* smem, TcQ& q) {
  TcQLoads loads;
  tc_issue_q(p, t, loads);
  tc_stage_q<D, Tile>(t, smem, loads, q);
}

// The current row written into the block's tiles (half 0 of the pair; the caller orders it
// before any read with a CTA barrier). split: hi into the tile row (zero-filled by the copy),
// lo into the next stage's tiles, zero except that row.
template <class Family, class Tile>
__device__ __forceinline__ void tc_write_current(const ProducerParams& p, int kvh, int lane, int row, KvWord* ktile,
                                                 KvWord* vtile, KvWord* klo, KvWord* vlo) {
  constexpr KvDtype D = Family::kDtype;
  const int d0 = lane * kDimsPerLane;
  const Float4 kc = load_float4(p.cur_k + kvh * kHeadDim + d0);
  const Float4 vc = load_float4(p.cur_v + kvh * kHeadDim + d0);
  if constexpr (Family::kCurrentRow == CurrentRow::rounded) {
    store4<D>(ktile + Tile::offset(row, d0), kc);
    store4<D>(vtile + Tile::offset(row, d0), vc);
  } else {
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    for (int c = lane; c < TcSmem<Tile>::kStageHalfs / 8; c += kWarpSize) reinterpret_cast<uint4*>(klo)[c] = zero;
    __syncwarp();
    const Float4 kr = in_range4<D>(kc);
    const Float4 vr = in_range4<D>(vc);
    unsigned khi[2], klow[2], vhi[2], vlow[2];
    split_pair<D>(kr.x[0], kr.x[1], khi[0], klow[0]);
    split_pair<D>(kr.x[2], kr.x[3], khi[1], klow[1]);
    split_pair<D>(vr.x[0], vr.x[1], vhi[0], vlow[0]);
    split_pair<D>(vr.x[2], vr.x[3], vhi[1], vlow[1]);
    *reinterpret_cast<uint2*>(ktile + Tile::offset(row, d0)) = make_uint2(khi[0], khi[1]);
    *reinterpret_cast<uint2*>(vtile + Tile::offset(row, d0)) = make_uint2(vhi[0], vhi[1]);
    *reinterpret_cast<uint2*>(klo + Tile::offset(row, d0)) = make_uint2(klow[0], klow[1]);
    *reinterpret_cast<uint2*>(vlo + Tile::offset(row, d0)) = make_uint2(vlow[0], vlow[1]);
  }
}

// One block folded into this thread's (m, s) and o fragment. Both warps of a pair score all
// 32 tokens and so compute the same block max, weights, sums and P fragments of both halves
// (each value by the same operations in the same order in either warp: per-half maxima merged
// half 0 first, per-half sums added half 0 first); each warp then accumulates o for its 64
// dims. Exchanging those values through shared memory instead cost two more CTA barriers per
// block (docs/perf.md, change 8). klo/vlo: the split current row's lo tiles, or nullptr.
template <KvDtype D, class Tile>
__device__ __forceinline__ void tc_fold_block(const TcQ& q, const KvWord* ktile, const KvWord* vtile,
                                              const KvWord* klo, const KvWord* vlo, int count, float scale,
                                              const TcThread& t, SoftmaxStats (&st)[2], float (&o)[kHeadDim / 16][4]) {
  const int lane = t.lane, quad = t.quad;
  TcBlockScores acc;
#pragma unroll
  for (int hb = 0; hb < kTcWarpsPerSlot; ++hb) {
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[hb][j][e] = 0.0f;
  }
  tc_scores<D, Tile>(q, ktile, lane, acc);
  if (klo != nullptr) tc_scores<D, Tile>(q, klo, lane, acc);

  // Scale and mask; each half's max per head (r = 0: head `group`, r = 1: head `group + 8`).
  float hmax[kTcWarpsPerSlot][2];
#pragma unroll
  for (int hb = 0; hb < kTcWarpsPerSlot; ++hb) {
    hmax[hb][0] = neg_inf_f32();
    hmax[hb][1] = neg_inf_f32();
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int tok = 16 * hb + 8 * j + 2 * quad + (e & 1);
        acc[hb][j][e] = tok < count ? acc[hb][j][e] * scale : neg_inf_f32();
        hmax[hb][e >> 1] = score_max(hmax[hb][e >> 1], acc[hb][j][e]);
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      hmax[hb][r] = score_max(hmax[hb][r], __shfl_xor_sync(kFullMask, hmax[hb][r], 1));
      hmax[hb][r] = score_max(hmax[hb][r], __shfl_xor_sync(kFullMask, hmax[hb][r], 2));
    }
  }
  float corr[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) corr[r] = fold_block_max(st[r], score_max(hmax[0][r], hmax[1][r]));

  // Weights; each half's sum (a lane's 8 weights in token order, then two quad shuffles); the
  // A fragments of both 16-token steps (n-tile 0 gives registers 0, 1, n-tile 1 gives 2, 3).
  unsigned phi[kTcWarpsPerSlot][4], plo[kTcWarpsPerSlot][4];
  float hsum[kTcWarpsPerSlot][2];
#pragma unroll
  for (int hb = 0; hb < kTcWarpsPerSlot; ++hb) {
    hsum[hb][0] = 0.0f;
    hsum[hb][1] = 0.0f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc[hb][j][e] = tc_weight(acc[hb][j][e] - st[e >> 1].m);
        hsum[hb][e >> 1] += acc[hb][j][e];
      }
      split_pair<D>(acc[hb][j][0], acc[hb][j][1], phi[hb][j * 2], plo[hb][j * 2]);
      split_pair<D>(acc[hb][j][2], acc[hb][j][3], phi[hb][j * 2 + 1], plo[hb][j * 2 + 1]);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      hsum[hb][r] = hsum[hb][r] + __shfl_xor_sync(kFullMask, hsum[hb][r], 1);
      hsum[hb][r] = hsum[hb][r] + __shfl_xor_sync(kFullMask, hsum[hb][r], 2);
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) st[r].s += hsum[0][r] + hsum[1][r];
#pragma unroll
  for (int j = 0; j < kHeadDim / 16; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] *= corr[e >> 1];
  tc_pv<D, Tile>(phi, plo, vtile, t.half, lane, o);
  if (vlo != nullptr) tc_pv<D, Tile>(phi, plo, vlo, t.half, lane, o);
}

// Warp slot `flat`'s blocks folded into this thread's (m, s) and o fragment (both halves of a
// pair end with the same (m, s)); the slot's prologue was issued before (tc_prologue). Ends with
// nothing in flight. timeline (diagnostic builds): marks when the slot's first block has landed.
template <class Family, class Tile, TcL2 kL2 = TcL2::normal>
__device__ __forceinline__ void tc_fold_slot(const ProducerParams& p, const Schedule& sched, int flat,
                                             const TcThread& t, const TcQ& q, KvWord* smem, SoftmaxStats (&st)[2],
                                             float (&o)[kHeadDim / 16][4], TimelineCta* timeline = nullptr) {
  constexpr KvDtype D = Family::kDtype;
  constexpr bool kCurrentFromActivations = Family::kCurrentRow != CurrentRow::plane;
  const int lane = t.lane, pair = t.pair, half = t.half, kvh = t.kvh;
  const int wg = flat / sched.nsg;
  const int slot = flat % sched.nsg;
  using Smem = TcSmem<Tile>;
  KvWord* wsm = smem + pair * Smem::kSlotHalfs;
  const int b0 = sched.first_block(wg, slot);
  const int stride = sched.block_stride();
  // This pair's blocks: the slot's blocks pair, pair + kTcPairs, ...
  const int pair_b0 = b0 + pair * stride;
  const int pair_stride = kTcPairs * stride;
  // Every warp runs pair 0's iteration count (every slot owns at least one block: slots <=
  // blocks; pair 1 has one fewer when the slot's count is odd), so the CTA barriers match; a
  // pair without a block at an iteration only takes part in the barriers.
  const int slot_blocks = (sched.blocks - b0 + stride - 1) / stride;
  const int iters = (slot_blocks + kTcPairs - 1) / kTcPairs;
  // The block holding the current token, when it comes from the activations.
  int b_cur = -1;
  if constexpr (kCurrentFromActivations) b_cur = Family::current(p) / kBlockTokens;
  const bool cta_current = kCurrentFromActivations && tc_owns_block(sched, flat, b_cur);
  const int current_iter = cta_current ? (b_cur - b0) / stride / kTcPairs : -1;
  for (int i = 0; i < iters; ++i) {
    const int b = pair_b0 + i * pair_stride;
    const bool live = b < sched.blocks;
    // Block i's rows (both warps') have landed and are visible to the pair; every warp is done
    // with block i - 1, whose stage the issue below refills.
    cp_async_wait<kTcStages - 2>();
    __syncthreads();
    if (i == 0 && timeline != nullptr) timeline->mark(cuda::TimelineEvent::slot_first_block, flat);
    const int ahead = b + (kTcStages - 1) * pair_stride;
    if (live && ahead < sched.blocks)
      tc_issue_block<Family, Tile, kL2>(p, ahead, kvh, half, lane, wsm + ((i + kTcStages - 1) % kTcStages) * Smem::kStageHalfs);
    cp_async_commit();

    KvWord* ktile = wsm + (i % kTcStages) * Smem::kStageHalfs;
    KvWord* vtile = ktile + Smem::kTileHalfs;
    const int first = b * kBlockTokens;
    const int count = min(kBlockTokens, p.visible - first);
    KvWord* klo = nullptr;
    KvWord* vlo = nullptr;
    if constexpr (kCurrentFromActivations) {
      if (live && b == b_cur) {
        if constexpr (Family::kCurrentRow == CurrentRow::split) {
          // The pair's last block: the next stage holds nothing in flight, so it takes the lo tiles.
          klo = wsm + ((i + 1) % kTcStages) * Smem::kStageHalfs;
          vlo = klo + Smem::kTileHalfs;
        }
        if (half == 0)
          tc_write_current<Family, Tile>(p, kvh, lane, Family::current(p) - first, ktile, vtile, klo, vlo);
      }
      // The current row (and lo tiles) are written before either warp of the pair reads them.
      if (i == current_iter) __syncthreads();
    }
    if (live) tc_fold_block<D, Tile>(q, ktile, vtile, klo, vlo, count, p.shape.scale, t, st, o);
  }
  cp_async_wait<0>();
}

// The pairs' end states merged in pair order by softmax.hpp's rule (an empty pair has m = -inf
// and contributes exactly 0), in the mma fragment layout: with two pairs, pair p merges fragment
// row r = p of every thread position (head `group` for pair 0, `group + 8` for pair 1), so each
// thread first hands the thread at its place in the other pair the o values, m and s of the row
// that pair merges, through `area` laid out [source pair][value][thread of the pair] (consecutive
// threads write consecutive words: no bank conflicts). After one CTA barrier each thread reads
// its counterpart's values, merges its row by softmax.hpp's merge_stats and merge_add (pair 0
// first), and hands store(h, j, d, m_all, s_all, o_d, o_d1) dims d, d + 1 of head h of the tile
// (d = 64 half + 8 j + 2 quad: the thread's j-th pair of dims, j < kHeadDim / 16; d = 0 once per
// head) for the tile's real heads. Every thread of the CTA calls it after a CTA
// barrier that ends every read of `area`'s stage; a later write to `area` must follow a CTA
// barrier.
template <class Store>
__device__ __forceinline__ void tc_merge_pairs(const TcThread& t, const SoftmaxStats (&st)[2],
                                               const float (&o)[kHeadDim / 16][4], float* area, Store&& store) {
  static_assert(kTcPairs == 2, "pair p merges fragment row r = p");
  constexpr int kJ = kHeadDim / 16;
  const int mine = static_cast<int>(threadIdx.x) % kTcPairThreads;
  const int other = 1 - t.pair;
  // Row r of the fragment is o[j][2r], o[j][2r + 1] and st[r]; the row is picked by selects, not
  // by a runtime index (which would put o and st in local memory).
  const bool first = t.pair == 0;  // this pair merges row 0 and hands over row 1
  float* give = area + t.pair * kTcHandoffValues * kTcPairThreads + mine;
#pragma unroll
  for (int j = 0; j < kJ; ++j) {
    give[(2 * j) * kTcPairThreads] = first ? o[j][2] : o[j][0];
    give[(2 * j + 1) * kTcPairThreads] = first ? o[j][3] : o[j][1];
  }
  give[(2 * kJ) * kTcPairThreads] = first ? st[1].m : st[0].m;
  give[(2 * kJ + 1) * kTcPairThreads] = first ? st[1].s : st[0].s;
  __syncthreads();

  const float* got = area + other * kTcHandoffValues * kTcPairThreads + mine;
  float theirs[2 * kJ + 2];
#pragma unroll
  for (int v = 0; v < 2 * kJ + 2; ++v) theirs[v] = got[v * kTcPairThreads];
  const int h = t.group + 8 * t.pair;
  if (t.tile * kTcHeads + h >= t.hpk) return;  // a padding row of the tile: never written
  // Pair 0's state first: this thread's own row is row 0 in pair 0, row 1 in pair 1.
  const float my_m = first ? st[0].m : st[1].m;
  const float my_s = first ? st[0].s : st[1].s;
  const float m0 = first ? my_m : theirs[2 * kJ];
  const float m1 = first ? theirs[2 * kJ] : my_m;
  const float s0 = first ? my_s : theirs[2 * kJ + 1];
  const float s1 = first ? theirs[2 * kJ + 1] : my_s;
  const float pm[kTcPairs] = {m0, m1};
  const float ps[kTcPairs] = {s0, s1};
  float c[kTcPairs];
  const SoftmaxStats all = merge_stats<kTcPairs>(
      kTcPairs, [&](int g) { return pm[g]; }, [&](int g) { return ps[g]; }, [&](int g, float cg) { c[g] = cg; });
#pragma unroll
  for (int j = 0; j < kJ; ++j) {
    float v[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float my_o = first ? o[j][e] : o[j][2 + e];
      const float o0 = first ? my_o : theirs[2 * j + e];
      const float o1 = first ? theirs[2 * j + e] : my_o;
      v[e] = merge_add(merge_add(0.0f, o0, c[0]), o1, c[1]);
    }
    store(h, j, 64 * t.half + 8 * j + 2 * t.quad, all.m, all.s, v[0], v[1]);
  }
}

// The slot's partial from the pairs' end states (through the merge area, pair 0's last stage).
__device__ __forceinline__ void tc_write_partial(const ProducerParams& p, const Schedule& sched, int flat,
                                                 const TcThread& t, const SoftmaxStats (&st)[2],
                                                 const float (&o)[kHeadDim / 16][4], float* merge) {
  const int hpk = t.hpk, kvh = t.kvh, tile = t.tile;
  // The slot's partial, written unmerged with the other slots at partials[(head * slots + flat) *
  // 130] (the reducer folds each fold group's slots in part order, tc_fold_groups).
  const int pstride = partial_stride(kHeadDim);
  tc_merge_pairs(t, st, o, merge, [&](int h, int, int d, float m_all, float s_all, float o_d, float o_d1) {
    const int head = kvh * hpk + tile * kTcHeads + h;
    float* dst = p.partials + (static_cast<std::int64_t>(head) * sched.nwg * sched.nsg + flat) * pstride;
    if (d == 0) *reinterpret_cast<float2*>(dst) = make_float2(m_all, s_all);
    *reinterpret_cast<float2*>(dst + 2 + d) = make_float2(o_d, o_d1);
  });
}

// A fold group's state while a walking CTA folds its slots (TcPartials::per_group): per thread,
// the fragment row's (m, s) and the 16 dims tc_merge_pairs hands it, the same (head, dims) for
// every slot.
struct TcGroupFold {
  SoftmaxStats st;
  float o[kHeadDim / 16][2];
};

// Part g of fold group w (warp slot FoldGroups::slot(w, g)) folded into `acc` in part order
// (softmax.hpp's fold_in, as the reducer's step 4 folds them), and after the group's last part
// its one partial written at partials[(head * groups + w) * 130] (parts 1).
__device__ __forceinline__ void tc_fold_partial(const ProducerParams& p, const FoldGroups& fg, int w, int g,
                                                const TcThread& t, const SoftmaxStats (&st)[2],
                                                const float (&o)[kHeadDim / 16][4], float* merge,
                                                TcGroupFold& acc) {
  const int hpk = t.hpk, kvh = t.kvh, tile = t.tile;
  const bool last = g == fg.parts - 1;
  const int pstride = partial_stride(kHeadDim);
  // Every call below carries the slot's same (m, s), so the fold's statistics and factors are
  // computed once, at the first call (j is a constant there: tc_merge_pairs' loop unrolls), and
  // reused for the other dims. Computed in each call, the fold's two exponentials were inlined
  // once per dim pair (22 softmax_exp in the kernel, 8 now), and a folding CTA's partial step took
  // 1.82 us per slot against 0.51 for the unfolded write where slots are short (the kernels'
  // timeline of change 50, batch 16 at 2,048: docs/perf.md, change 51).
  FoldFactors c;
  SoftmaxStats folded;
  tc_merge_pairs(t, st, o, merge, [&](int h, int j, int d, float m_all, float s_all, float o_d, float o_d1) {
    if (j == 0) {
      const SoftmaxStats slot{m_all, s_all};
      folded = g == 0 ? slot : fold_in(acc.st, slot, c);
      acc.st = folded;
    }
    acc.o[j][0] = g == 0 ? o_d : fold_add(acc.o[j][0], o_d, c);
    acc.o[j][1] = g == 0 ? o_d1 : fold_add(acc.o[j][1], o_d1, c);
    if (!last) return;
    const int head = kvh * hpk + tile * kTcHeads + h;
    float* dst = p.partials + (static_cast<std::int64_t>(head) * fg.groups + w) * pstride;
    if (d == 0) *reinterpret_cast<float2*>(dst) = make_float2(folded.m, folded.s);
    *reinterpret_cast<float2*>(dst + 2 + d) = make_float2(acc.o[j][0], acc.o[j][1]);
  });
}

// When a producer CTA issues q's loads: after the PDL wait (behind the first blocks' copies; a
// launch with PDL must, and batched launches do), or before the first copies (a direct launch
// without PDL: q may be read at entry). A template parameter, not a runtime flag: with a flag in
// the kernel the batched launches, which never take it, ran 0.3-1.9 % slower (docs/perf.md,
// change 33).
enum class TcQOrder { after_wait, before_copies };

// Which of a walking CTA's first prologue copies go before the PDL wait: all its stages, or the
// first only, the rest after q's loads (issued after the wait). A template parameter: the
// direct kernels keep their code. With every stage's copies before it, q's round trip waited
// behind them (ncu on the batch-16 walking kernel, change 54b: +60 % stall samples on q's first
// use with one more block ahead of it); the first stage only made batch 16 at 8,192 3 % faster
// on an H100, and 2,048 (one block per pair: the second stage is empty) unchanged (change 54c's
// c54n).
enum class TcCopiesBeforeWait { whole_prologue, first_stage };

// smem: the kernel's tiles in layout Tile, aligned (tc_aligned_smem). folds: the walk covers
// whole fold groups (tc_walk_plan: walk.runs), folded into one partial each.
template <class Family, class Tile, TcQOrder kQOrder = TcQOrder::after_wait, TcL2 kL2 = TcL2::normal,
          TcCopiesBeforeWait kBeforeWait = TcCopiesBeforeWait::whole_prologue>
__device__ __forceinline__ void produce_tc(const ProducerParams& p, KvWord* smem, SlotWalk walk,
                                           bool folds = false) {
  constexpr KvDtype D = Family::kDtype;
  const Schedule sched = p.sched;
  const int end = walk.end < sched.slots() ? walk.end : sched.slots();
  if (walk.first >= end) return;
  TimelineCta timeline(cuda::TimelineKernel::producer, p.q);
  const TcThread t = tc_thread(p.shape);
  const int lane = t.lane, kvh = t.kvh, tile = t.tile;

  // The first blocks stream in while q loads (a CTA that loaded q first waited on it with
  // nothing in flight). Launched with PDL (a store-fused family only: its current row never
  // comes from the plane), they are issued before the wait: plane rows, which no earlier kernel
  // of the stream is still writing; q is loaded after it. A direct launch without PDL
  // (TcQOrder::before_copies) issues q's loads first and the copies behind them: issued after the
  // copies, q's round trip was queued behind every CTA's first blocks (the kernels' timeline,
  // docs/perf.md change 33).
  KvWord* wsm = smem + t.pair * TcSmem<Tile>::kSlotHalfs;
  float* merge = reinterpret_cast<float*>(smem + TcSmem<Tile>::kMergeOffsetHalfs);
  TcQLoads q_loads;
  if constexpr (kQOrder == TcQOrder::before_copies) tc_issue_q(p, t, q_loads);
  constexpr int kStagesBeforeWait = kBeforeWait == TcCopiesBeforeWait::whole_prologue ? kTcStages - 1 : 1;
  tc_prologue<Family, Tile, kL2, 0, kStagesBeforeWait>(p, sched, walk.first, t.pair, kvh, t.half, lane, wsm);
  pdl_wait();
  timeline.mark(cuda::TimelineEvent::waited);

  if constexpr (Family::kCurrentRow != CurrentRow::plane) {
    // One warp per KV head (the CTA that walks slot 0) stores the current row (dtype D) into the
    // plane; no CTA of this launch reads that row from the plane (it is zero-filled and taken
    // from the activations).
    if (tile == 0 && walk.first == 0 && threadIdx.x < kWarpSize) store_current_row<D>(p, kvh, lane);
  }
  if constexpr (kQOrder == TcQOrder::after_wait) tc_issue_q(p, t, q_loads);
  tc_prologue<Family, Tile, kL2, kStagesBeforeWait>(p, sched, walk.first, t.pair, kvh, t.half, lane, wsm);
  TcQ q;
  tc_stage_q<D, Tile>(t, smem, q_loads, q);
  TcGroupFold fold;
  for (SlotWalk::At at = walk.begin(); at.flat < end; at = walk.next(at)) {
    const int flat = at.flat;
    timeline.mark(cuda::TimelineEvent::slot_begin, flat);
    SoftmaxStats st[2];
    float o[kHeadDim / 16][4];
#pragma unroll
    for (int j = 0; j < kHeadDim / 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[j][e] = 0.0f;
    tc_fold_slot<Family, Tile, kL2>(p, sched, flat, t, q, smem, st, o, &timeline);
    __syncthreads();  // every pair is done with its tiles: the merge area and the next prologue reuse them
    timeline.mark(cuda::TimelineEvent::slot_folded, flat);
    const int next = walk.next(at).flat;
    if (p.early_dependents && next >= end) pdl_allow_dependents();
    if (p.debug_delay_ns != nullptr) debug_sleep_ns(p.debug_delay_ns[flat]);
    if (next < end) tc_prologue<Family, Tile, kL2>(p, sched, next, t.pair, kvh, t.half, lane, wsm);
    timeline.mark(cuda::TimelineEvent::slot_issued, flat);
    // The next slot's first iteration waits at a CTA barrier before it issues into the merge
    // area's stage, so the partial's reads of the merge area finish first.
    if (folds)
      tc_fold_partial(p, walk.runs, at.group, at.part, t, st, o, merge, fold);
    else
      tc_write_partial(p, sched, flat, t, st, o, merge);
    timeline.mark(cuda::TimelineEvent::slot_written, flat);
  }
  // A kernel launched with PDL behind this one may be scheduled once every CTA got here. Allowed
  // right after the wait, a reducer launched that way cost the producer 1.2-1.5 us per layer at
  // 8,192 and deeper (docs/perf.md, change 10).
  pdl_allow_dependents();
  timeline.mark(cuda::TimelineEvent::exit);
}


template <class Family, class Tile, TcQOrder kQOrder>
__global__ void __launch_bounds__(kTcThreads, kTcCtasPerSm) producer_tc_kernel(ProducerParams p) {
  extern __shared__ __align__(16) KvWord tc_smem[];
  produce_tc<Family, Tile, kQOrder>(p, tc_aligned_smem<Tile>(tc_smem),
                                    SlotWalk{static_cast<int>(blockIdx.y), static_cast<int>(gridDim.y)});
}

// Grid z = batch entry; y walks the entry's warp slots y, y + gridDim.y, ..., or, where
// kPartials lets the entry fold (tc_walk_plan), its fold groups y, y + gridDim.y, .... A
// template parameter, not a launch argument: the per-slot kernel (every launch whose CTAs walk
// one slot, the engine's batch-1 token among them) is main's machine code, without the fold's
// 18 registers; with them in one kernel the batch-1 rows ran 1-2 % slower (docs/perf.md,
// change 49).
template <class Family, class Tile, TcPartials kPartials = TcPartials::per_slot>
__global__ void __launch_bounds__(kTcThreads, kTcCtasPerSm) producer_tc_kernel_indirect(const ProducerParams* pp, std::size_t stride,
                                                                         EntriesFrom from) {
  extern __shared__ __align__(16) KvWord tc_smem[];
  const ProducerParams p = batch_entry_from(pp, stride, from);
  if (p.family != Family::kFamily) return;  // another family's entry of a batch
  const TcWalkPlan plan =
      tc_walk_plan(p.sched, static_cast<int>(blockIdx.y), static_cast<int>(gridDim.y), kPartials);
  produce_tc<Family, Tile, TcQOrder::after_wait, TcL2::evict_first, TcCopiesBeforeWait::first_stage>(
      p, tc_aligned_smem<Tile>(tc_smem), plan.walk, plan.folds);
}

// The grid form (GpuFusion::grid): one kernel per layer. Every CTA walks its warp slots as
// producer_tc_kernel does (store inside, partials to their fixed slots), then all CTAs of the
// launch meet at a grid-wide barrier, and then each merges a share of the (entry, head) pairs
// with the reducer's own code (reduce.cuh). The CTAs are co-resident: the host sizes the walk so
// that the grid fits the CTAs the device holds at once, and launches it cooperatively (the
// driver refuses a grid that does not fit rather than let it hang). Which CTA merges a head, and
// the order in which the CTAs arrive, never change a bit: a head's partials are read from their
// fixed slots in index order by the same operations as the reduce kernel's.

// One counter word per launch site, zero when allocated and never reset: CTA 0 adds
// 2^31 - (n - 1) and every other CTA adds 1, so a launch's n arrivals add exactly 2^31: the top
// bit flips when the last one arrives and the low 31 bits are back where they were for the next
// launch (or graph replay), whatever its n. Release by the arriving thread covers its CTA's
// partial stores (ordered before it by the CTA barrier). Only the CTAs that merge wait (acquire,
// then a CTA barrier hands it to the whole CTA): the others arrive and exit, and a poll that
// misses sleeps briefly, so the waiters do not crowd the word's L2 slice while the last CTAs
// still arrive. Measured on the H200 (docs/perf.md, change 17): a first version in which every
// CTA waited and polled without a pause was no slower than this one; what the grid form loses
// against producer + reducer (~3 us per batch-1 layer at 8,192) is the cooperative launch
// (~1.9 us) and the merge inside the launch (~1 us).
inline constexpr unsigned kGridBarrierFlip = 0x80000000u;
inline constexpr unsigned kGridPollSleepNs = 64;

// Arrives (thread 0, after a CTA barrier); returns the counter as it was before this CTA's add.
__device__ __forceinline__ unsigned grid_arrive(unsigned* counter, unsigned* seen) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned n = gridDim.x * gridDim.y * gridDim.z;
    const bool first = blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
    const unsigned add = first ? kGridBarrierFlip - (n - 1u) : 1u;
    unsigned old;
    asm volatile("atom.add.release.gpu.global.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(counter), "r"(add) : "memory");
    *seen = old;
  }
  __syncthreads();
  return *seen;
}

// Waits until every CTA of the launch has arrived (the top bit differs from `old`'s).
__device__ __forceinline__ void grid_wait(const unsigned* counter, unsigned old) {
  if (threadIdx.x == 0) {
    unsigned now;
    for (;;) {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(now) : "l"(counter) : "memory");
      if (((now ^ old) & kGridBarrierFlip) != 0u) break;
      __nanosleep(kGridPollSleepNs);
    }
  }
  __syncthreads();
}

__device__ __forceinline__ unsigned cta_rank() { return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z); }
__device__ __forceinline__ unsigned cta_count() { return gridDim.x * gridDim.y * gridDim.z; }
static_assert(kTcThreads == kReduceThreads, "a producer CTA runs the reducer's per-head merge");

template <class Family>
__global__ void __launch_bounds__(kTcThreads, kTcCtasPerSm) producer_tc_grid_kernel(ProducerParams p, ReduceParams r,
                                                                      unsigned* counter) {
  extern __shared__ __align__(16) KvWord tc_smem[];
  __shared__ unsigned seen;
  produce_tc<Family, TcPaddedTile>(p, tc_smem, SlotWalk{static_cast<int>(blockIdx.y), static_cast<int>(gridDim.y)});
  // A CTA without a slot has not waited in produce_tc: the output it writes below may still be
  // read by the previous kernel of the stream (with PDL). A second wait is a no-op.
  pdl_wait();
  const unsigned old = grid_arrive(counter, &seen);
  const unsigned heads = static_cast<unsigned>(r.shape.n_heads);
  if (cta_rank() >= heads) return;  // merges nothing
  grid_wait(counter, old);
  for (unsigned h = cta_rank(); h < heads; h += cta_count()) reduce_head_exact(r, static_cast<int>(h));
}

// Batched: grid z = entry. Entries of another family take part in the barrier (every CTA of the
// launch must arrive) but are neither produced nor merged here.
template <class Family>
__global__ void __launch_bounds__(kTcThreads, kTcCtasPerSm) producer_tc_grid_kernel_indirect(const ProducerParams* pp,
                                                                               const ReduceParams* rp,
                                                                               std::size_t stride, unsigned* counter,
                                                                               EntriesFrom from) {
  extern __shared__ __align__(16) KvWord tc_smem[];
  __shared__ unsigned seen;
  {
    const ProducerParams p = batch_entry_from(pp, stride, from);
    if (p.family == Family::kFamily)
      produce_tc<Family, TcPaddedTile>(p, tc_smem, SlotWalk{static_cast<int>(blockIdx.y), static_cast<int>(gridDim.y)});
  }
  pdl_wait();
  const unsigned old = grid_arrive(counter, &seen);
  const unsigned heads = static_cast<unsigned>(entry_at(rp, stride, 0).shape.n_heads);
  if (cta_rank() >= gridDim.z * heads) return;  // merges nothing
  grid_wait(counter, old);
  for (unsigned item = cta_rank(); item < gridDim.z * heads; item += cta_count()) {
    const unsigned z = item / heads;
    if (entry_at(pp, stride, z).family != Family::kFamily) continue;
    const ReduceParams r = entry_at(rp, stride, z);
    reduce_head_exact(r, static_cast<int>(item % heads));
  }
}

// Above 48 KB of dynamic shared memory a kernel must opt in before it launches, and before its
// occupancy is asked: once per kernel, with tiles in layout Tile.
template <class Tile>
cudaError_t tc_opt_in_kernel(const void* kernel) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(TcSmem<Tile>::kBytes));
}

// Kernels with tiles in layout Tile opted in (tc_opt_in_kernel above); the first error, if any.
template <class Tile, class... Kernels>
cudaError_t tc_opt_in(Kernels*... kernels) {
  cudaError_t first = cudaSuccess;
  for (const void* kernel : {reinterpret_cast<const void*>(kernels)...}) {
    const cudaError_t e = tc_opt_in_kernel<Tile>(kernel);
    if (first == cudaSuccess) first = e;
  }
  return first;
}

// Every kernel of family Family's producer with tiles in layout Tile opted in, once per process:
// both Q orders of the direct form, the indirect form with per-slot and per-group partials.
// Asked by the launch and by the occupancy query, which may come first (tc_batched_ctas asks it
// once per layer ahead of the layer's launches) and must see the opted-in size.
template <class Family, class Tile>
cudaError_t tc_producer_opted_in() {
  static const cudaError_t opt_in = tc_opt_in<Tile>(
      producer_tc_kernel<Family, Tile, TcQOrder::after_wait>, producer_tc_kernel<Family, Tile, TcQOrder::before_copies>,
      producer_tc_kernel_indirect<Family, Tile>, producer_tc_kernel_indirect<Family, Tile, TcPartials::per_group>);
  return opt_in;
}

// The grid form's two kernels (padded tiles) opted in, once per process; as above.
template <class Family>
cudaError_t tc_grid_opted_in() {
  static const cudaError_t opt_in =
      tc_opt_in<TcPaddedTile>(producer_tc_grid_kernel<Family>, producer_tc_grid_kernel_indirect<Family>);
  return opt_in;
}

// Which kernel of a family the occupancy is asked for.
enum class TcKernel { walk, grid };

// CTAs of a family's batched (walk, tiles in layout Tile) or grid (padded) kernel CUDA device
// `device` holds at once (occupancy x SMs, resident_ctas); 0 when unknown (one CTA per slot; no
// grid form). The occupancy of a kernel that has not opted in reads 0 CTAs: without the opt-in
// the first captured call walked one slot per CTA (128 CTAs per entry at 8,192 instead of 8) for
// as long as its graph was replayed.
template <class Family, TcKernel Which, class Tile = TcPaddedTile>
long long tc_resident_ctas(int device) {
  static_assert(Which == TcKernel::walk || Tile::kLayout == TcTiles::padded, "the grid form's tiles are padded");
  static ResidentCache cache;
  const void* kernel = nullptr;
  cudaError_t opt_in = cudaSuccess;
  if constexpr (Which == TcKernel::grid) {
    kernel = reinterpret_cast<const void*>(producer_tc_grid_kernel_indirect<Family>);
    opt_in = tc_grid_opted_in<Family>();
  } else {
    kernel = reinterpret_cast<const void*>(producer_tc_kernel_indirect<Family, Tile>);
    opt_in = tc_producer_opted_in<Family, Tile>();
  }
  if (opt_in != cudaSuccess) return 0;
  return resident_ctas(kernel, kTcThreads, TcSmem<Tile>::kBytes, cache, device);
}

// The y extent of family Family's batched launch over `batch` with tiles in layout Tile: the
// slots of the largest schedule the batch can reach (indirect_slots) walked c.tc_slots_per_cta
// per CTA when given, else tc_walk_extent's rule (heuristics.hpp).
template <class Family, class Tile>
unsigned tc_walk_ctas(const HeadShape& shape, const BatchSpan& batch, const ProducerChoice& c) {
  const unsigned slots = indirect_slots(batch);
  if (c.tc_slots_per_cta > 0) {
    const auto walk = static_cast<unsigned>(c.tc_slots_per_cta);
    return (slots + walk - 1) / walk;
  }
  const long long groups = tc_groups(shape) * static_cast<long long>(batch.count);
  return static_cast<unsigned>(
      tc_walk_extent(groups, static_cast<int>(slots), tc_resident_ctas<Family, TcKernel::walk, Tile>(c.device)));
}

// How a tensor-core kernel's CTAs are launched: ordinary (the producer, the fused kernel), or
// cooperative (the grid form without PDL: the driver refuses a grid whose CTAs cannot all be
// resident at once, where an ordinary launch would hang at the grid barrier).
enum class TcGridKind { ordinary, cooperative };

// The attributes one launch carries; they must outlive the launch call.
struct TcLaunchAttrs {
  std::array<cudaLaunchAttribute, 2> a{};
};

// A tensor-core kernel's launch: kTcThreads threads and `smem_bytes` of shared memory (its tile
// layout's TcSmem::kBytes), with PDL when `programmatic`. The config points into `attrs`; the
// caller sets gridDim.
inline cudaLaunchConfig_t tc_launch_config(TcLaunchAttrs& attrs, std::size_t smem_bytes, bool programmatic,
                                           cudaStream_t stream, TcGridKind kind = TcGridKind::ordinary) {
  attrs.a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs.a[0].val.programmaticStreamSerializationAllowed = programmatic ? 1 : 0;
  attrs.a[1].id = cudaLaunchAttributeCooperative;
  attrs.a[1].val.cooperative = kind == TcGridKind::cooperative ? 1 : 0;
  cudaLaunchConfig_t cfg{};
  cfg.blockDim = dim3(kTcThreads);
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = stream;
  cfg.attrs = attrs.a.data();
  cfg.numAttrs = kind == TcGridKind::cooperative ? 2 : 1;
  return cfg;
}

// The producer's launch with tiles in layout Tile (launch_producer_tc below picks it).
template <class Family, class Tile>
cudaError_t launch_producer_tc_tiles(const ProducerParams& p, const ProducerParams* dp, const ProducerChoice& c,
                                     cudaStream_t stream, BatchSpan batch, bool programmatic) {
  if (const cudaError_t opt_in = tc_producer_opted_in<Family, Tile>(); opt_in != cudaSuccess) return opt_in;
  const auto x = static_cast<unsigned>(tc_groups(p.shape));
  TcLaunchAttrs attrs;
  cudaLaunchConfig_t cfg = tc_launch_config(attrs, TcSmem<Tile>::kBytes, programmatic, stream);
  if (dp == nullptr) {
    if (p.sched.slots() <= 0) return cudaSuccess;
    cfg.gridDim = dim3(x, static_cast<unsigned>(p.sched.slots()));
    // Without PDL, q's loads go out before the first copies (change 33). Batched launches keep
    // them after the copies: with q first a batch-16 layer at 2,048 was 1.4 % slower (docs/perf.md).
    return programmatic ? cudaLaunchKernelEx(&cfg, producer_tc_kernel<Family, Tile, TcQOrder::after_wait>, p)
                        : cudaLaunchKernelEx(&cfg, producer_tc_kernel<Family, Tile, TcQOrder::before_copies>, p);
  }
  // The layer's one extent (enqueue_layer_batch), else this launch's own; CTAs past this token's
  // slots exit at once.
  const unsigned ys = batch.tc_ctas > 0 ? batch.tc_ctas : tc_walk_ctas<Family, Tile>(p.shape, batch, c);
  cfg.gridDim = dim3(x, ys, static_cast<unsigned>(batch.count));
  // No entry folds where every CTA walks at most one slot (tc_folded_groups_per_cta needs a
  // walk of two or more): the per-slot kernel then.
  const bool may_fold = batch.tc_partials == TcPartials::per_group && ys < indirect_slots(batch);
  return may_fold ? cudaLaunchKernelEx(&cfg, producer_tc_kernel_indirect<Family, Tile, TcPartials::per_group>, dp,
                                       batch.stride, batch.entries)
                  : cudaLaunchKernelEx(&cfg, producer_tc_kernel_indirect<Family, Tile>, dp, batch.stride, batch.entries);
}

// c: its tiles (the shared-memory layout: tiles_direct / tiles_batched), tc_slots_per_cta (warp
// slots one CTA of a batched launch walks; 0: tc_walk_extent's rule) and device. programmatic:
// launched with PDL (only a family whose current row never comes from the plane).
template <class Family>
cudaError_t launch_producer_tc(const ProducerParams& p, const ProducerParams* dp, const ProducerChoice& c,
                               cudaStream_t stream, BatchSpan batch, bool programmatic = false) {
  const TcTiles tiles = dp == nullptr ? c.tiles_direct(p.visible) : c.tiles_batched(batch.count);
  if (tiles == TcTiles::swizzled)
    return launch_producer_tc_tiles<Family, TcSwizzledTile>(p, dp, c, stream, batch, programmatic);
  return launch_producer_tc_tiles<Family, TcPaddedTile>(p, dp, c, stream, batch, programmatic);
}

// The grid form's launch (GpuFusion::grid). It walks w slots per CTA, w the smallest count
// (from c.tc_slots_per_cta when given) at which every CTA of the launch is resident at once, and
// launches the grid kernel cooperatively (without PDL; with it, the grid sizing alone keeps the
// CTAs co-resident: a dependent launches only once every CTA of this grid has started). When
// no walk fits (the batch is larger than the device holds CTAs, or the occupancy is unknown) it
// launches the store-fused producer instead and leaves `merged` false: the caller then launches
// the reducer, which gives the same bits.
template <class Family>
cudaError_t launch_producer_tc_grid(const ProducerParams& p, const ProducerParams* dp, const ReduceParams& r,
                                    const ReduceParams* dr, unsigned* counter, const ProducerChoice& c,
                                    cudaStream_t stream, BatchSpan batch, bool& merged) {
  merged = false;
  if (const cudaError_t opt_in = tc_grid_opted_in<Family>(); opt_in != cudaSuccess) return opt_in;
  const long long x = tc_groups(p.shape);
  const bool direct = dp == nullptr;
  const long long slots = direct ? p.sched.slots() : indirect_slots(batch);
  const long long entries = direct ? 1 : batch.count;
  const bool programmatic = c.programmatic;
  const int slots_per_cta = c.tc_slots_per_cta;
  const long long resident = tc_resident_ctas<Family, TcKernel::grid>(c.device);
  const auto ctas = [&](long long w) { return x * ((slots + w - 1) / w) * entries; };
  long long walk = slots_per_cta > 0 ? slots_per_cta : 1;
  if (slots_per_cta <= 0)
    while (walk < slots && ctas(walk) > resident) ++walk;
  if (counter == nullptr || slots <= 0 || resident <= 0 || ctas(walk) > resident)
    return launch_producer_tc<Family>(p, dp, c, stream, batch, programmatic);
  TcLaunchAttrs attrs;
  cudaLaunchConfig_t cfg = tc_launch_config(attrs, TcPaddedSmem::kBytes, programmatic, stream,
                                            programmatic ? TcGridKind::ordinary : TcGridKind::cooperative);
  const unsigned ys = static_cast<unsigned>((slots + walk - 1) / walk);
  cfg.gridDim = dim3(static_cast<unsigned>(x), ys, static_cast<unsigned>(entries));
  const cudaError_t e = direct ? cudaLaunchKernelEx(&cfg, producer_tc_grid_kernel<Family>, p, r, counter)
                               : cudaLaunchKernelEx(&cfg, producer_tc_grid_kernel_indirect<Family>, dp, dr,
                                                    batch.stride, counter, batch.entries);
  merged = e == cudaSuccess;
  return e;
}

}  // namespace ladder::cuda_detail
