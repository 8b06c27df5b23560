// Would warpgroup MMA (wgmma) with a dedicated copy warp pay for the tensor-core producer, and
// what would it do to the bits? The probe for stages 1 and 2 of docs/bench/pending-wgmma/design.md
// (Muse Glimmer's shape: head_dim 128, 16 query heads per KV head, f16 or bf16 planes, f32
// accumulation).
//
//   bits  Stage 1. One CTA per trial computes the producer's two chains twice:
//           * scores of a 64-token K tile against 16 heads: 8 k-steps of 16 dims, each adding
//             K.q_hi then K.q_lo into one f32 accumulator. Way A is the producer's own code
//             (producer_tc.cuh: tc_scores on two 32-row swizzled tiles, q fragments by ldmatrix
//             from its staging rows); way B is wgmma.m64n16k16 with A = the K tile (K-major,
//             128-byte swizzle, 64 rows) and B = Q^T (K-major: q's rows), hi then lo per k-step.
//           * P.V of both pairs' 32-token blocks: o += P_hi.V then P_lo.V per 16-token step on a
//             given initial o. Way A is the producer's tc_pv (warp 2p + h: pair p, dims 64h..);
//             way B is wgmma.m64n16k16 with A = V^T read from the V tile transposed
//             (imm-trans-a = 1), B = P^T ([head][64 tokens], K-major), two m64 halves of dims.
//         Inputs: random rows, rows with subnormals, wide exponent spreads and cancelling sums.
//         Per dtype, chain and input kind it counts the f32 results whose bits differ, the
//         largest ulp distance, and each way's largest error against an f64 sum of the same split
//         operands, relative to the sum of the terms' magnitudes (a broken descriptor reads as
//         ~1, a last-bit difference as ~1e-7).
//   time  Stage 2. One layer's copy and arithmetic structure without the exact trees: CTA = the
//         consumer warpgroup (warps 0-3) + one producer warp (160 threads, 2 CTAs per SM). The
//         producer's lane 0 fills a kStages-deep ring of 64-row K and V tiles (two 32-row
//         blocks each) by TMA 2-D boxes (64 dims x 32 rows, 128-byte swizzle) on full/empty
//         mbarriers.
//           ws  the consumers only wait, read one word per thread and release;
//           wg  ws plus per tile the 32 wgmma (16 scores with q hi/lo, 16 P.V with P hi/lo), a
//               stand-in softmax (block max by shuffles and one exchange, ex2, the split of P,
//               stmatrix.trans of P^T, fence.proxy.async), o's rescale, and per slot one
//               16 x 130-float partial (m, s, o[128] per head: the two pairs merged).
//           wgp wg software-pipelined within the warpgroup, every accumulation order kept (its
//               partials are checked against wg's bits too): two score accumulators in
//               registers; within a slot tile u + 1's 16 score wgmma are issued (after its full
//               barrier) before tile u's softmax and complete under it; at a slot end the next
//               slot's q (loaded into registers a slot earlier) is staged and its first tile's
//               scores are issued before the slot's partial, which runs under them. Same ring
//               (3 stages, at most 2 held), same single P^T buffer.
//           wgk wg with each stage's K given back once the tile's scores are computed and its V
//               after the P.V (K and V on their own barriers, K filled one tile ahead of V).
//           wgs2, wgs3, wgs4  wg's tile in 2, 3 or 4 consumer warpgroups of one CTA an SM over
//               one shared ring of 6, 5 or 5 stages, each warpgroup walking its own slots.
//         Every wgmma kernel keeps wg's per-slot math: its partials must be wg's bits.
//         --hold C adds ws rows whose consumers hold each tile C clock cycles before the release.
//         Shapes (design.md, stage 2): (a) 1 sequence x 32,768 tokens, 256 CTAs of one 8-block
//         slot; (b) 16 x 2,048, 1,024 two-block slots walked 4 per CTA; (c) 16 x 32,768, 8-block
//         slots walked 16 per CTA. Both KV heads of a layer, token-major planes (row = token, 2
//         heads x 128 dims x 2 B), K and V separate; enough copies to rotate beyond L2. Before
//         timing, every wgmma kernel's partials of a few slots are checked against an f64 host
//         reference of the same stand-in math (a wrong descriptor fails loudly), and all its
//         partials against the first checked kernel's bits. The read ceiling is the library's read probe
//         (src/cuda/device.cu) over the same bytes.
//
// wgmma exists only in the sm_90a image (__CUDA_ARCH_FEAT_SM90_ALL); the sm_90 image compiles the
// same kernels with a trap in its place, and the binary refuses at run time when the device runs
// that image.
//
// Usage: ladder_wgmma_probe --help.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "cuda/kernels.hpp"
#include "cuda/producer_tc.cuh"
#include "probe_async.cuh"
#include "probe_host.hpp"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_HAS_WGMMA 1
#else
#define WG_HAS_WGMMA 0
#endif

namespace wgprobe {

namespace lc = ladder::cuda_detail;
using ladder::KvDtype;
using ladder::KvWord;
using namespace probe_async;
using probe_host::median_us;

constexpr int kHeadDim = 128;
constexpr int kHeads = 16;            // query heads per KV head: wgmma's N
constexpr int kBlockRows = 32;        // one producer block (kBlockTokens)
constexpr int kTileRows = 64;         // one wgmma tile: wgmma's M, two blocks
constexpr int kBlocksPerTile = kTileRows / kBlockRows;
constexpr int kKStep = 16;            // wgmma / mma k
constexpr int kScoreSteps = kHeadDim / kKStep;     // 8
constexpr int kPairTokenSteps = kBlockRows / kKStep;  // 2: a pair's block in P.V
constexpr int kPairs = 2;             // rows 0-31: pair 0's block, 32-63: pair 1's
constexpr int kWarpSize = 32;
constexpr int kConsumerWarps = 4;     // one warpgroup
constexpr int kConsumerThreads = kConsumerWarps * kWarpSize;
constexpr int kAccRegs = kTileRows * kHeads / kConsumerThreads;  // 8 f32 of a m64n16 accumulator
constexpr int kPartialFloats = 2 + kHeadDim;  // m, s, o: partial_stride(128)
constexpr float kLog2e = 1.44269504088896341f;

static_assert(kHeads == ladder::kTcHeads, "the producer's tile of sibling heads");
static_assert(kBlockRows == ladder::kBlockTokens, "a block is the producer's");
static_assert(kHeadDim == lc::kHeadDim, "head_dim 128");
static_assert(kAccRegs == 8, "m64n16 f32: 8 registers a thread");


// ---- shared-memory operand layouts --------------------------------------------------------------
// A rows x cols matrix of 2-byte elements in the TMA unit's SWIZZLE_128B layout: boxes of 64
// columns (128 bytes a row), rows of a box 128 bytes apart, and within a box the eight 16-byte
// chunks of row r at chunk ^ (r % 8). A box starts on 1024 bytes, so the swizzle (address bits
// 4-6 ^= bits 7-9) is the same whether one reads it from the row index or from the address: what
// both the TMA unit and wgmma's 128-byte-swizzle descriptors assume.
//   K tile  [dim box][64 tokens][128 B]   wgmma A of the scores (K-major: dims contiguous)
//   V tile  [dim box][64 tokens][128 B]   wgmma A of P.V read transposed (M = dims contiguous)
//   Q^T     [dim box][16 heads][128 B]    wgmma B of the scores (K-major: q's rows)
//   P^T     [16 heads][64 tokens: 128 B]  wgmma B of P.V (K-major)
template <int kRows, int kCols>
struct Sw128 {
  static constexpr int kElemBytes = 2;
  static constexpr int kRowBytes = 128;  // the swizzle span: one box row
  static constexpr int kBoxCols = kRowBytes / kElemBytes;
  static constexpr int kChunkBytes = 16;
  static constexpr int kChunkCols = kChunkBytes / kElemBytes;
  static constexpr int kAtomRows = 8;    // rows of one swizzle pattern
  static constexpr int kAtomBytes = kAtomRows * kRowBytes;  // 1024: the descriptors' SBO
  static constexpr int kBoxes = kCols / kBoxCols;
  static constexpr int kBoxBytes = kRows * kRowBytes;
  static constexpr int kBytes = kBoxes * kBoxBytes;
  static_assert(kRows % kAtomRows == 0 && kCols % kBoxCols == 0, "whole atoms and boxes");
  static_assert(kBoxBytes % kAtomBytes == 0, "every box starts on 1024 bytes");
  // Byte offset of element (row, col).
  __host__ __device__ static constexpr int offset(int row, int col) {
    const int box = col / kBoxCols;
    const int chunk = (col % kBoxCols) / kChunkCols;
    return box * kBoxBytes + row * kRowBytes + (chunk ^ (row % kAtomRows)) * kChunkBytes +
           (col % kChunkCols) * kElemBytes;
  }
};
using KvTile = Sw128<kTileRows, kHeadDim>;  // 16 KB
using QTile = Sw128<kHeads, kHeadDim>;      // 4 KB
using PTile = Sw128<kHeads, kTileRows>;     // 2 KB

// The layout is the producer's swizzled tile (tc_tile.hpp) with 64 rows a box instead of 32.
consteval bool same_as_producer_tile() {
  using Tc = lc::TcSwizzledTile;
  using Half = Sw128<kBlockRows, kHeadDim>;
  for (int r = 0; r < kBlockRows; ++r)
    for (int d = 0; d < kHeadDim; ++d)
      if (Half::offset(r, d) != Tc::offset(r, d) * 2) return false;
  return true;
}
static_assert(same_as_producer_tile(), "Sw128<32, 128> is TcSwizzledTile in bytes");
// Row 33, dim 70: box 1, chunk 0 of the box moved to 0 ^ (33 % 8) = 1, element 6 of the chunk.
static_assert(KvTile::offset(33, 70) == KvTile::kBoxBytes + 33 * 128 + 1 * 16 + 6 * 2, "one element by hand");

// ---- wgmma matrix descriptors (PTX ISA 9.7.15.5.1) ------------------------------------------------
// bits 0-13 start address >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4,
// 49-51 base offset (0: every atom starts on 1024 bytes), 62-63 layout (1 = 128-byte swizzle).
//  * K-major, 128-byte swizzle (K tile, Q^T, P^T): 8-row groups SBO = 1024 bytes apart; LBO is
//    not used (a k16 step's 32 bytes lie within one 128-byte row), set to 16 as CUTLASS does.
//    A k-step moves the start address 32 bytes along the row (the hardware applies the swizzle
//    to the full address, so a start inside an atom reads the swizzled chunks), four k-steps a
//    box, then the next box.
//  * MN-major, 128-byte swizzle (V^T, imm-trans-a = 1): one atom is 64 M-elements (a box row) x
//    8 K-rows; SBO = 1024 bytes between 8-token groups; LBO would step to the next 64 M-elements,
//    which an m64 instruction never needs. Set to 1024 as well, so that the tokens step right
//    even if the hardware read the two fields the other way round (the one point of this layout
//    where public sources disagree in wording).
struct Sw128Desc {
  static constexpr std::uint64_t kSwizzle128 = std::uint64_t{1} << 62;
  static constexpr unsigned kFieldMask = 0x3FFFFu;  // 14 bits of (bytes >> 4)
  __host__ __device__ static constexpr std::uint64_t make(unsigned smem_addr, unsigned lbo, unsigned sbo) {
    return static_cast<std::uint64_t>((smem_addr & kFieldMask) >> 4) |
           (static_cast<std::uint64_t>((lbo & kFieldMask) >> 4) << 16) |
           (static_cast<std::uint64_t>((sbo & kFieldMask) >> 4) << 32) | kSwizzle128;
  }
  static constexpr unsigned kKMajorLbo = 16;
  static constexpr unsigned kSbo = KvTile::kAtomBytes;
  __host__ __device__ static constexpr std::uint64_t k_major(unsigned addr) { return make(addr, kKMajorLbo, kSbo); }
  __host__ __device__ static constexpr std::uint64_t mn_major(unsigned addr) { return make(addr, kSbo, kSbo); }

  // The same descriptors as a low word computed once per tile base and a constant high word (SBO
  // and layout): a k-step's descriptor is then one 32-bit add of (offset >> 4) to the low word. The
  // start-address field cannot carry into LBO's: shared addresses stay below 2^18 bytes. (Built
  // from scratch per wgmma they took ~5 uniform instructions each, ~160 a tile.)
  static constexpr unsigned kHigh = (kSbo >> 4) | static_cast<unsigned>(kSwizzle128 >> 32);
  __host__ __device__ static constexpr unsigned k_major_lo(unsigned base) {
    return static_cast<unsigned>(k_major(base));
  }
  __host__ __device__ static constexpr unsigned mn_major_lo(unsigned base) {
    return static_cast<unsigned>(mn_major(base));
  }
  __host__ __device__ static constexpr std::uint64_t at(unsigned lo, unsigned offset_bytes) {
    return (static_cast<std::uint64_t>(kHigh) << 32) | (lo + (offset_bytes >> 4));
  }
};
static_assert(Sw128Desc::make(0x400, 1024, 1024) == 0x4000004000400040ull, "field positions");
static_assert(Sw128Desc::k_major(0x12340) == (0x1234ull | (1ull << 16) | (64ull << 32) | (1ull << 62)), "K-major");
static_assert(KvTile::kAtomBytes == 1024 && QTile::kAtomBytes == 1024 && PTile::kAtomBytes == 1024, "SBO");
static_assert(Sw128Desc::kHigh == Sw128Desc::make(0, 0, Sw128Desc::kSbo) >> 32, "the high word");
static_assert(Sw128Desc::at(Sw128Desc::k_major_lo(0x1FC00), 8192 + 96) == Sw128Desc::k_major(0x1FC00 + 8192 + 96) &&
                  Sw128Desc::at(Sw128Desc::mn_major_lo(0x20400), 12288) == Sw128Desc::mn_major(0x20400 + 12288),
              "a base's low word plus an offset is the descriptor of base + offset");

// Where k-step kk of a K-major operand starts: box kk / 4, 32 bytes further per step within it.
template <class Tile>
__host__ __device__ constexpr unsigned kstep_offset(int kk) {
  constexpr int kStepsPerBox = Tile::kBoxCols / kKStep;
  return static_cast<unsigned>((kk / kStepsPerBox) * Tile::kBoxBytes + (kk % kStepsPerBox) * kKStep * Tile::kElemBytes);
}
static_assert(kstep_offset<KvTile>(5) == 8192 + 32, "k-step 5: box 1, second step");
static_assert(kstep_offset<QTile>(7) == 2048 + 96, "k-step 7 of Q^T");
// Where the V^T operand of pair p, 16-token step kk and dim half h starts: box h, token row
// 32 p + 16 kk (1024-aligned: two whole atoms per step).
__host__ __device__ constexpr unsigned vt_offset(int pair, int kk, int half) {
  return static_cast<unsigned>(half * KvTile::kBoxBytes + (pair * kBlockRows + kk * kKStep) * KvTile::kRowBytes);
}
static_assert(vt_offset(1, 1, 1) % 1024 == 0, "V^T steps start on an atom");
// P^T of pair p, step kk: tokens 32 p + 16 kk of the head's 128-byte row.
__host__ __device__ constexpr unsigned pt_offset(int pair, int kk) {
  return static_cast<unsigned>((pair * kPairTokenSteps + kk) * kKStep * PTile::kElemBytes);
}

// ---- device helpers ------------------------------------------------------------------------------
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// A consumer warpgroup's own named barrier: warpgroup c of a CTA uses id 1 + c (id 0 is
// __syncthreads).
constexpr int kConsumerBarrier = 1;
__device__ __forceinline__ void consumer_sync(int bar = kConsumerBarrier) {  // bar: an immediate where inlined
  asm volatile("bar.sync %0, %1;\n" ::"r"(bar), "n"(kConsumerThreads) : "memory");
}

__device__ __forceinline__ void wgmma_fence() {
#if WG_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if WG_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if WG_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving reads or writes of an accumulator across a wgmma fence or wait
// (the asm statements' outputs are only final after wgmma.wait_group).
__device__ __forceinline__ void fence_operand(float (&d)[kAccRegs]) {
#pragma unroll
  for (int i = 0; i < kAccRegs; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (64 x 16, f32) += A (64 x 16) * B (16 x 16), both from shared memory by descriptor; scale-d = 1
// (accumulate, also into zeros: the producer's chains start from +0.0f the same way).
template <KvDtype D, int kTransA>
__device__ __forceinline__ void wgmma_m64n16k16(float (&d)[kAccRegs], std::uint64_t a, std::uint64_t b) {
#if WG_HAS_WGMMA
  if constexpr (D == KvDtype::bf16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, "
        "%11, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(a), "l"(b), "n"(1), "n"(kTransA)
        : "memory");
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, "
        "%11, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(a), "l"(b), "n"(1), "n"(kTransA)
        : "memory");
  }
#else
  (void)d;
  (void)a;
  (void)b;
  __trap();
#endif
}

// The accumulator fragment of m64nNk16 (PTX 9.7.15.5, "register fragments"): warp w of the
// warpgroup holds rows 16 w .. 16 w + 15; lane 4 g + q register i holds row 16 w + g + 8 ((i >> 1)
// & 1), column 8 (i >> 2) + 2 q + (i & 1) (per 8-column n-tile, mma.m16n8's C layout).
struct AccAt {
  int row, col;
};
__host__ __device__ constexpr AccAt acc_at(int warp, int lane, int i) {
  return AccAt{16 * warp + lane / 4 + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * (lane % 4) + (i & 1)};
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Whether this image has wgmma (the sm_90a one).
__global__ void arch_probe_kernel(int* has_wgmma) { *has_wgmma = WG_HAS_WGMMA; }

// =================================================================================================
// bits: the chains by the producer's mma.sync (way A) and by wgmma (way B)
// =================================================================================================
struct BitsIo {
  // inputs, per trial
  const KvWord* k;    // [64 tokens][128]
  const KvWord* v;    // [64 tokens][128]
  const float* q;     // [16 heads][128]
  const float* p;     // [16 heads][64 tokens]: pair p's block is tokens 32p..32p+31
  const float* o0;    // [2 pairs][16 heads][128]: o before the block
  // outputs, per trial
  float* s_a;         // [64 tokens][16 heads]
  float* s_b;
  float* o_a;         // [2 pairs][16 heads][128]
  float* o_b;
  KvWord* q_split;    // [hi, lo][16][128]: the operands both ways used
  KvWord* p_split;    // [hi, lo][16][64]
};
constexpr int kTrialKv = kTileRows * kHeadDim;
constexpr int kTrialQ = kHeads * kHeadDim;
constexpr int kTrialP = kHeads * kTileRows;
constexpr int kTrialO = kPairs * kHeads * kHeadDim;
constexpr int kTrialS = kTileRows * kHeads;

struct BitsSmem {
  // way B's operands
  alignas(1024) unsigned char k_wg[KvTile::kBytes];
  alignas(1024) unsigned char v_wg[KvTile::kBytes];
  alignas(1024) unsigned char q_wg[2][QTile::kBytes];  // hi, lo
  alignas(1024) unsigned char p_wg[2][PTile::kBytes];  // hi, lo
  // way A's: the producer's two 32-row swizzled tiles and its q staging rows (hi 0-15, lo 16-31)
  alignas(1024) KvWord k_tc[kBlocksPerTile][lc::TcSwizzledTile::kHalfs];
  alignas(1024) KvWord v_tc[kBlocksPerTile][lc::TcSwizzledTile::kHalfs];
  alignas(16) KvWord q_stage[2 * kHeads * lc::kTcQRowHalfs];
};
constexpr int kSmemAlignSlack = 1024;  // dynamic shared memory is rounded up to 1024 in the kernel
constexpr std::size_t kBitsSmemBytes = sizeof(BitsSmem) + kSmemAlignSlack;

__device__ __forceinline__ unsigned char* align1024(unsigned char* raw) {
  const unsigned mis = lc::smem_u32(raw) % 1024u;
  return mis == 0 ? raw : raw + (1024u - mis);
}

template <KvDtype D>
__global__ void __launch_bounds__(kConsumerThreads) bits_kernel(BitsIo io) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  BitsSmem& sm = *reinterpret_cast<BitsSmem*>(align1024(smem_raw));
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / kWarpSize;
  const int lane = tid % kWarpSize;
  const std::int64_t trial = blockIdx.x;
  const KvWord* kg = io.k + trial * kTrialKv;
  const KvWord* vg = io.v + trial * kTrialKv;
  const float* qg = io.q + trial * kTrialQ;
  const float* pg = io.p + trial * kTrialP;
  const float* o0 = io.o0 + trial * kTrialO;

  // K and V rows into both layouts, 16 bytes at a time.
  constexpr int kChunksPerRow = kHeadDim / 8;
  for (int c = tid; c < kTileRows * kChunksPerRow; c += kConsumerThreads) {
    const int row = c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * 8;
    const uint4 kx = *reinterpret_cast<const uint4*>(kg + row * kHeadDim + col);
    const uint4 vx = *reinterpret_cast<const uint4*>(vg + row * kHeadDim + col);
    *reinterpret_cast<uint4*>(sm.k_wg + KvTile::offset(row, col)) = kx;
    *reinterpret_cast<uint4*>(sm.v_wg + KvTile::offset(row, col)) = vx;
    const int blk = row / kBlockRows;
    *reinterpret_cast<uint4*>(sm.k_tc[blk] + lc::TcSwizzledTile::offset(row % kBlockRows, col)) = kx;
    *reinterpret_cast<uint4*>(sm.v_tc[blk] + lc::TcSwizzledTile::offset(row % kBlockRows, col)) = vx;
  }
  // q split as tc_stage_q splits it (in_range is the identity on these inputs), into Q^T and the
  // producer's staging rows.
  for (int e = 2 * tid; e < kTrialQ; e += 2 * kConsumerThreads) {
    const int h = e / kHeadDim;
    const int d = e % kHeadDim;
    unsigned hi, lo;
    lc::split_pair<D>(qg[e], qg[e + 1], hi, lo);
    *reinterpret_cast<unsigned*>(sm.q_wg[0] + QTile::offset(h, d)) = hi;
    *reinterpret_cast<unsigned*>(sm.q_wg[1] + QTile::offset(h, d)) = lo;
    *reinterpret_cast<unsigned*>(sm.q_stage + h * lc::kTcQRowHalfs + d) = hi;
    *reinterpret_cast<unsigned*>(sm.q_stage + (kHeads + h) * lc::kTcQRowHalfs + d) = lo;
    *reinterpret_cast<unsigned*>(io.q_split + trial * 2 * kTrialQ + e) = hi;
    *reinterpret_cast<unsigned*>(io.q_split + trial * 2 * kTrialQ + kTrialQ + e) = lo;
  }
  // P split (elementwise: the pairing does not change a bit), into P^T.
  for (int e = 2 * tid; e < kTrialP; e += 2 * kConsumerThreads) {
    const int h = e / kTileRows;
    const int t = e % kTileRows;
    unsigned hi, lo;
    lc::split_pair<D>(pg[e], pg[e + 1], hi, lo);
    *reinterpret_cast<unsigned*>(sm.p_wg[0] + PTile::offset(h, t)) = hi;
    *reinterpret_cast<unsigned*>(sm.p_wg[1] + PTile::offset(h, t)) = lo;
    *reinterpret_cast<unsigned*>(io.p_split + trial * 2 * kTrialP + e) = hi;
    *reinterpret_cast<unsigned*>(io.p_split + trial * 2 * kTrialP + kTrialP + e) = lo;
  }
  // Generic-proxy stores, read below by wgmma through the async proxy.
  fence_proxy_async();
  __syncthreads();

  const int g = lane / 4;
  const int qd = lane % 4;
  // ---- way A: the producer's functions ----
  {
    // Scores: warp w scores block w / 2 (both warps of a pair score the whole block, as in the
    // producer; the even one writes).
    lc::TcQ q;
    const int row = lane % kHeads;
    const int col = (lane / kHeads) * 8;
#pragma unroll
    for (int kk = 0; kk < kScoreSteps; ++kk) {
      lc::ldmatrix_x4(lc::smem_u32(sm.q_stage + row * lc::kTcQRowHalfs + kKStep * kk + col), q.hi[kk]);
      lc::ldmatrix_x4(lc::smem_u32(sm.q_stage + (kHeads + row) * lc::kTcQRowHalfs + kKStep * kk + col), q.lo[kk]);
    }
    const int blk = warp / 2;
    lc::TcBlockScores acc;
#pragma unroll
    for (int hb = 0; hb < 2; ++hb)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[hb][j][e] = 0.0f;
    lc::tc_scores<D, lc::TcSwizzledTile>(q, sm.k_tc[blk], lane, acc);
    if (warp % 2 == 0) {
#pragma unroll
      for (int hb = 0; hb < 2; ++hb)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int head = g + 8 * (e >> 1);
            const int tok = blk * kBlockRows + 16 * hb + 8 * j + 2 * qd + (e & 1);
            io.s_a[trial * kTrialS + tok * kHeads + head] = acc[hb][j][e];
          }
    }
    // P.V: warp 2p + h is pair p's half h (dims 64h..64h+63), P's A fragments split from the
    // weights as tc_fold_block splits them (registers 2j, 2j+1: heads g, g + 8, tokens 8j + 2q).
    const int pair = warp / 2;
    const int half = warp % 2;
    float o[kHeadDim / 16][4];
#pragma unroll
    for (int j = 0; j < kHeadDim / 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        o[j][e] = o0[(pair * kHeads + g + 8 * (e >> 1)) * kHeadDim + 64 * half + 8 * j + 2 * qd + (e & 1)];
    unsigned phi[2][4], plo[2][4];
#pragma unroll
    for (int hb = 0; hb < kPairTokenSteps; ++hb)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int t = pair * kBlockRows + 16 * hb + 8 * j + 2 * qd;
        lc::split_pair<D>(pg[g * kTileRows + t], pg[g * kTileRows + t + 1], phi[hb][2 * j], plo[hb][2 * j]);
        lc::split_pair<D>(pg[(g + 8) * kTileRows + t], pg[(g + 8) * kTileRows + t + 1], phi[hb][2 * j + 1],
                          plo[hb][2 * j + 1]);
      }
    lc::tc_pv<D, lc::TcSwizzledTile>(phi, plo, sm.v_tc[pair], half, lane, o);
#pragma unroll
    for (int j = 0; j < kHeadDim / 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        io.o_a[trial * kTrialO + (pair * kHeads + g + 8 * (e >> 1)) * kHeadDim + 64 * half + 8 * j + 2 * qd + (e & 1)] =
            o[j][e];
  }

  // ---- way B: wgmma, the warpgroup together ----
  {
    // Scores S^T = K . Q^T: per k-step (K, q_hi) then (K, q_lo) on one accumulator.
    float acc[kAccRegs];
#pragma unroll
    for (int i = 0; i < kAccRegs; ++i) acc[i] = 0.0f;
    const unsigned k_lo = Sw128Desc::k_major_lo(lc::smem_u32(sm.k_wg));
    const unsigned qhi_lo = Sw128Desc::k_major_lo(lc::smem_u32(sm.q_wg[0]));
    const unsigned qlo_lo = Sw128Desc::k_major_lo(lc::smem_u32(sm.q_wg[1]));
    fence_operand(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kScoreSteps; ++kk) {
      const std::uint64_t a = Sw128Desc::at(k_lo, kstep_offset<KvTile>(kk));
      wgmma_m64n16k16<D, 0>(acc, a, Sw128Desc::at(qhi_lo, kstep_offset<QTile>(kk)));
      wgmma_m64n16k16<D, 0>(acc, a, Sw128Desc::at(qlo_lo, kstep_offset<QTile>(kk)));
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_operand(acc);
#pragma unroll
    for (int i = 0; i < kAccRegs; ++i) {
      const AccAt at = acc_at(warp, lane, i);  // row = token, col = head
      io.s_b[trial * kTrialS + at.row * kHeads + at.col] = acc[i];
    }

    // O^T = V^T . P^T per pair and dim half: per 16-token step (V^T, P_hi) then (V^T, P_lo).
    float o[kPairs][2][kAccRegs];
#pragma unroll
    for (int p = 0; p < kPairs; ++p)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < kAccRegs; ++i) {
          const AccAt at = acc_at(warp, lane, i);  // row = dim within the half, col = head
          o[p][h][i] = o0[(p * kHeads + at.col) * kHeadDim + 64 * h + at.row];
        }
    const unsigned v_lo = Sw128Desc::mn_major_lo(lc::smem_u32(sm.v_wg));
    const unsigned phi_lo = Sw128Desc::k_major_lo(lc::smem_u32(sm.p_wg[0]));
    const unsigned plo_lo = Sw128Desc::k_major_lo(lc::smem_u32(sm.p_wg[1]));
#pragma unroll
    for (int p = 0; p < kPairs; ++p)
#pragma unroll
      for (int h = 0; h < 2; ++h) fence_operand(o[p][h]);
    wgmma_fence();
#pragma unroll
    for (int p = 0; p < kPairs; ++p)
#pragma unroll
      for (int kk = 0; kk < kPairTokenSteps; ++kk)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const std::uint64_t a = Sw128Desc::at(v_lo, vt_offset(p, kk, h));
          wgmma_m64n16k16<D, 1>(o[p][h], a, Sw128Desc::at(phi_lo, pt_offset(p, kk)));
          wgmma_m64n16k16<D, 1>(o[p][h], a, Sw128Desc::at(plo_lo, pt_offset(p, kk)));
        }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int p = 0; p < kPairs; ++p)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        fence_operand(o[p][h]);
#pragma unroll
        for (int i = 0; i < kAccRegs; ++i) {
          const AccAt at = acc_at(warp, lane, i);
          io.o_b[trial * kTrialO + (p * kHeads + at.col) * kHeadDim + 64 * h + at.row] = o[p][h][i];
        }
      }
  }
}

// =================================================================================================
// time: the copy warp's ring (ws) and the wgmma tile (wg)
// =================================================================================================
// The ring's shape: kWgs consumer warpgroups (warps 0 .. 4 kWgs - 1) and one producer warp per
// CTA, kStages K+V stages shared by the warpgroups, kCtasPerSm CTAs an SM. ws, wg and wgp run
// WgLayout (one warpgroup, 3 stages, 2 CTAs an SM); wgs runs layouts of 2-4 warpgroups over one
// ring in one CTA an SM: more consumer warps an SM than two CTAs of one warpgroup hold, for the
// shared memory of fewer stages per warpgroup.
template <int kWarpgroups, int kRingStages, int kCtasPerSmValue>
struct RingLayout {
  static constexpr int kWgs = kWarpgroups;
  static constexpr int kStages = kRingStages;
  static constexpr int kCtasPerSm = kCtasPerSmValue;
  static constexpr int kProducerWarp = kWgs * kConsumerWarps;
  static constexpr int kThreads = kWgs * kConsumerThreads + kWarpSize;
};
constexpr int kStages = 3;
constexpr int kCtasPerSm = 2;
using WgLayout = RingLayout<1, kStages, kCtasPerSm>;
constexpr int kTimeThreads = WgLayout::kThreads;  // 160
constexpr int kStageBytes = 2 * KvTile::kBytes;  // K and V tiles: what one stage's barrier counts
constexpr int kBoxRows = kBlockRows;             // a TMA box: 64 dims x one 32-row block
constexpr int kBoxCols = KvTile::kBoxCols;

// One consumer warpgroup's own operands and exchange rows.
struct WgBufs {
  alignas(1024) unsigned char q[2][QTile::kBytes];  // hi, lo
  // One P^T buffer (hi, lo): every warp has waited for the tile's P.V (wgmma.wait_group 0) before
  // the next tile's first consumer barrier, and P^T is written only after that barrier. A second
  // buffer (design.md's 8 KB) would take the CTA over half an SM's shared memory.
  alignas(1024) unsigned char pt[2][PTile::kBytes];
  float red_max[kConsumerWarps][kHeads];  // each warp's block max per head
  float red_sum[kConsumerWarps][kHeads];  // each warp's weight sum per head (slot end)
};
// When a consumer gives a stage back: whole (K and V together, after the tile's P.V), or
// k_after_scores (K once the scores are computed, V after the P.V: K and V then have their own
// full and empty barriers, and the producer fills K one tile ahead of V).
enum class StageRelease { whole, k_after_scores };
template <class L>
struct RingSmem {
  alignas(1024) unsigned char k[L::kStages][KvTile::kBytes];
  alignas(1024) unsigned char v[L::kStages][KvTile::kBytes];
  WgBufs b[L::kWgs];
  alignas(8) unsigned long long full[L::kStages];   // whole: K and V; k_after_scores: K
  alignas(8) unsigned long long empty[L::kStages];
  alignas(8) unsigned long long full_v[L::kStages];  // k_after_scores only
  alignas(8) unsigned long long empty_v[L::kStages];
};
using TimeSmem = RingSmem<WgLayout>;
template <class L>
constexpr std::size_t ring_smem_bytes() {
  return sizeof(RingSmem<L>) + kSmemAlignSlack;
}
constexpr std::size_t kSmemPerSm = 228 * 1024;
constexpr std::size_t kSmemReservedPerCta = 1024;
constexpr std::size_t kMaxSmemPerCta = 227 * 1024;  // cudaFuncAttributeMaxDynamicSharedMemorySize's limit
template <class L>
constexpr bool ring_fits() {
  return ring_smem_bytes<L>() <= kMaxSmemPerCta &&
         L::kCtasPerSm * (ring_smem_bytes<L>() + kSmemReservedPerCta) <= kSmemPerSm;
}
static_assert(ring_fits<WgLayout>(), "two CTAs per SM");
// Each warpgroup holds at most one stage, so with more stages than warpgroups the producer is
// never more than one phase ahead of a stage's previous consumer (see walk()).
template <class L>
constexpr bool ring_sound() {
  return L::kStages > L::kWgs;
}

struct TmaMaps {
  CUtensorMap k;
  CUtensorMap v;
};

// One layer's work: seqs sequences of `tokens` tokens, n_kv KV heads side by side in each plane
// row; per (sequence, KV head) slots_per_head slots, slot s taking blocks s, s + slots_per_head, ...
// (the schedule's round robin), two a tile: rows 0-31 block 2i (pair 0), rows 32-63 block 2i + 1.
struct TimeWork {
  int seqs, tokens, n_kv, slots_per_head;
  int tiles_per_slot;
  int slots;  // seqs * n_kv * slots_per_head
  const float* q;       // [seqs][n_kv][16][128]
  float* partials;      // [slots][16][130]
  float scale_log2;     // log2(e) / sqrt(128): scores in log2 units
  unsigned never;
  long long hold_cycles;  // ws only: clock cycles each consumer warp holds a tile before releasing it
  unsigned* sink;
};
struct SlotAt {
  int seq, kvh, s;
};
__host__ __device__ inline SlotAt slot_at(const TimeWork& w, int flat) {
  return SlotAt{flat / (w.n_kv * w.slots_per_head), (flat / w.slots_per_head) % w.n_kv, flat % w.slots_per_head};
}
__host__ __device__ inline int slot_block(const TimeWork& w, const SlotAt& a, int i) {
  return a.s + w.slots_per_head * i;
}

// Warpgroup c of CTA x walks slots v, v + walkers, ... with v = x kWgs + c (a "walker": one
// consumer warpgroup, as wg's CTA is), walkers = gridDim.x kWgs. Its tiles, in walk order:
template <class L>
__device__ __forceinline__ int walker_tiles(const TimeWork& w, int walker) {
  const int walkers = static_cast<int>(gridDim.x) * L::kWgs;
  return walker < w.slots ? ((w.slots - 1 - walker) / walkers + 1) * w.tiles_per_slot : 0;
}
// The producer fills the shared ring tile by tile in rounds over the CTA's warpgroups (tile j of
// warpgroup 0, 1, ..., then tile j + 1 ...), skipping one whose walk has ended; warpgroup c's
// tile j is fill number fill_index(c, j), so it sits in stage fill % kStages, phase fill / kStages.
// One warpgroup: fill j.
template <class L>
__device__ __forceinline__ int fill_index(const int (&tiles)[L::kWgs], int c, int j) {
  int f = 0;
#pragma unroll
  for (int c2 = 0; c2 < L::kWgs; ++c2) f += min(tiles[c2], j) + ((c2 < c && tiles[c2] > j) ? 1 : 0);
  return f;
}
template <class L>
__device__ __forceinline__ void all_walker_tiles(const TimeWork& w, int (&tiles)[L::kWgs]) {
#pragma unroll
  for (int c = 0; c < L::kWgs; ++c) tiles[c] = walker_tiles<L>(w, static_cast<int>(blockIdx.x) * L::kWgs + c);
}

template <class L>
__device__ __forceinline__ RingSmem<L>& ring_smem(unsigned char* raw) {
  return *reinterpret_cast<RingSmem<L>*>(align1024(raw));
}
__device__ __forceinline__ TimeSmem& time_smem(unsigned char* raw) { return ring_smem<WgLayout>(raw); }

template <class L>
__device__ __forceinline__ void init_ring(RingSmem<L>& sm) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < L::kStages; ++s) {
      mbar_init(lc::smem_u32(&sm.full[s]), 1);                // the producer's expect_tx arrival
      mbar_init(lc::smem_u32(&sm.empty[s]), kConsumerWarps);  // one release per warp of the consuming warpgroup
      mbar_init(lc::smem_u32(&sm.full_v[s]), 1);
      mbar_init(lc::smem_u32(&sm.empty_v[s]), kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}

// Tile i of the slot at `at` from one plane (map) into one tile of a stage at shared address dst:
// per 32-row block, its 64-dim boxes, all completing on the mbarrier `full`.
__device__ __forceinline__ void copy_tile(const TimeWork& w, const SlotAt& at, int i, const CUtensorMap* map,
                                          unsigned dst, unsigned full) {
#pragma unroll
  for (int blk = 0; blk < kBlocksPerTile; ++blk) {
    const int y = at.seq * w.tokens + slot_block(w, at, kBlocksPerTile * i + blk) * kBlockRows;
#pragma unroll
    for (int box = 0; box < KvTile::kBoxes; ++box) {
      const int x = at.kvh * kHeadDim + box * kBoxCols;
      tma_2d(dst + box * KvTile::kBoxBytes + blk * kBoxRows * KvTile::kRowBytes, map, x, y, full);
    }
  }
}

// The producer warp's lane 0: every tile of every walker of this CTA, in fill order, each into
// the next stage once its consumers released it.
template <class L>
__device__ __forceinline__ void produce(const TimeWork& w, const TmaMaps& maps, RingSmem<L>& sm) {
  if (threadIdx.x % kWarpSize != 0) return;
  int tiles[L::kWgs];
  all_walker_tiles<L>(w, tiles);
  int most = 0;
#pragma unroll
  for (int c = 0; c < L::kWgs; ++c) most = max(most, tiles[c]);
  const int walkers = static_cast<int>(gridDim.x) * L::kWgs;
  int fill = 0;
  for (int j = 0; j < most; ++j) {
#pragma unroll
    for (int c = 0; c < L::kWgs; ++c) {
      if (j >= tiles[c]) continue;
      const int flat = static_cast<int>(blockIdx.x) * L::kWgs + c + (j / w.tiles_per_slot) * walkers;
      const int i = j % w.tiles_per_slot;
      const SlotAt at = slot_at(w, flat);
      const int s = fill % L::kStages;
      const int round = fill / L::kStages;
      ++fill;
      if (round > 0) mbar_wait(lc::smem_u32(&sm.empty[s]), (round - 1) & 1);
      const unsigned full = lc::smem_u32(&sm.full[s]);
      mbar_expect(full, kStageBytes);
      copy_tile(w, at, i, &maps.k, lc::smem_u32(sm.k[s]), full);
      copy_tile(w, at, i, &maps.v, lc::smem_u32(sm.v[s]), full);
    }
  }
}

// k_after_scores' producer (one warpgroup: fill j is tile j of the walk): K(j + 1) is issued before
// V(j), each into its stage once its previous occupant's consumers released that half.
template <class L>
__device__ __forceinline__ void produce_split(const TimeWork& w, const TmaMaps& maps, RingSmem<L>& sm) {
  static_assert(L::kWgs == 1, "K ahead of V is built for one warpgroup");
  if (threadIdx.x % kWarpSize != 0) return;
  const int tiles = walker_tiles<L>(w, static_cast<int>(blockIdx.x));
  const int walkers = static_cast<int>(gridDim.x);
  auto issue = [&](int j, bool is_k) {
    const int flat = static_cast<int>(blockIdx.x) + (j / w.tiles_per_slot) * walkers;
    const int i = j % w.tiles_per_slot;
    const SlotAt at = slot_at(w, flat);
    const int s = j % L::kStages;
    const int round = j / L::kStages;
    if (round > 0) mbar_wait(lc::smem_u32(is_k ? &sm.empty[s] : &sm.empty_v[s]), (round - 1) & 1);
    const unsigned full = lc::smem_u32(is_k ? &sm.full[s] : &sm.full_v[s]);
    mbar_expect(full, KvTile::kBytes);
    copy_tile(w, at, i, is_k ? &maps.k : &maps.v, lc::smem_u32(is_k ? sm.k[s] : sm.v[s]), full);
  };
  for (int j = 0; j <= tiles; ++j) {
    if (j < tiles) issue(j, true);
    if (j > 0) issue(j - 1, false);
  }
}

// One consumer warp's release of an empty barrier (its lane 0 arrives once the warp is done).
__device__ __forceinline__ void release_bar(unsigned long long& bar, int lane) {
  __syncwarp();
  if (lane == 0) mbar_arrive(lc::smem_u32(&bar));
}
// A whole stage given back: its empty barrier.
template <class L>
__device__ __forceinline__ void release(RingSmem<L>& sm, int s, int lane) {
  release_bar(sm.empty[s], lane);
}

// ws: the ring alone; the consumers read one 16-byte word of each tile into an xor that escapes
// only when it equals a value never passed.
__global__ void __launch_bounds__(kTimeThreads, kCtasPerSm) ws_kernel(TimeWork w, const __grid_constant__ TmaMaps maps) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  TimeSmem& sm = time_smem(smem_raw);
  init_ring(sm);
  const int tid = static_cast<int>(threadIdx.x);
  if (tid / kWarpSize == WgLayout::kProducerWarp) {
    produce(w, maps, sm);
    return;
  }
  unsigned acc = 0;
  int use = 0;
  for (int flat = blockIdx.x; flat < w.slots; flat += gridDim.x)
    for (int i = 0; i < w.tiles_per_slot; ++i, ++use) {
      const int s = use % kStages;
      mbar_wait(lc::smem_u32(&sm.full[s]), (use / kStages) & 1);
      const uint4 kx = *reinterpret_cast<const uint4*>(sm.k[s] + 16 * tid);
      const uint4 vx = *reinterpret_cast<const uint4*>(sm.v[s] + 16 * tid);
      acc ^= kx.x ^ vx.w;
      // A stand-in for a tile's arithmetic: the stage stays held, no issue slot or byte is used
      // but the clock reads (how long a consumer may hold a tile before the stream slows).
      if (w.hold_cycles > 0) {
        const long long start = clock64();
        while (clock64() - start < w.hold_cycles) {
        }
      }
      release(sm, s, tid % kWarpSize);
    }
  if (acc == w.never) w.sink[0] = acc;
}

// wg's per-thread state of one slot: per pair the running max m and sum s of this thread's 4
// heads (8 (i >> 2) + 2 q + (i & 1) for i = 0, 1, 4, 5), and o^T of both pairs and dim halves.
struct WgState {
  float m[kPairs][4];
  float s[4];  // this warp's pair only: its own tokens, reduced over the warp per block
  float o[kPairs][2][kAccRegs];
};
// The accumulator registers i of head slot c4 (0..3): i = 4 (c4 >> 1) + (c4 & 1) and i + 2
// (rows g and g + 8).
__device__ __forceinline__ constexpr int head_reg(int c4) { return 4 * (c4 >> 1) + (c4 & 1); }

// stmatrix.x4.trans of this thread's four P words (token rows g, g + 8 x head n-tiles 0, 1) as
// P^T rows (head) x token chunks: matrix m = 2 j + r is heads 8 j .. + 7 at tokens 16 w + 8 r ..
// + 7, i.e. chunk 2 w + r of the head's row; lane 8 m + i addresses row i of matrix m.
__device__ __forceinline__ void store_pt(unsigned char* pt, int warp, int lane, const unsigned (&r)[4]) {
  const int m = lane / 8;
  const int i = lane % 8;
  const int head = 8 * (m >> 1) + i;
  const int token = 16 * warp + 8 * (m & 1);
  const unsigned addr = lc::smem_u32(pt + PTile::offset(head, token));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// =================================================================================================
// wgp: wg software-pipelined within the warpgroup
// =================================================================================================
// The same tile math in the same accumulation orders (scores chain, softmax, split, P.V chains,
// rescale, slot merge: a port's bits would not change), reordered so that the tensor pipe works
// while the warps do the softmax or the partial. The tiles of the CTA's whole walk form one stream
// u = 0, 1, ... (the producer's fill order), with two score accumulators in registers: S(u),
// complete where tile u starts, and S(u + 1). wgmma groups complete in commit order, and
// wait_group N returns once at most N of this warp's groups are pending:
//   within a slot (u + 1 in the same slot):
//     wait full(u + 1); commit S(u + 1) (16 wgmma); softmax(u), P^T store, o rescale; commit
//     P.V(u) (16 wgmma); wait_group 0 -> S(u + 1) (committed first, run under the softmax) and
//     P.V(u) done; release stage u.
//   at a slot end (u the slot's last tile):
//     softmax(u); commit P.V(u); the next slot's q (loaded into registers a slot earlier) split
//     into Q^T (every warp waited for S(u), Q^T's last reader, before the softmax's barriers); wait
//     full(u + 1); commit S(u + 1); wait_group 1 -> P.V(u) done, S(u + 1) pending; release stage
//     u; the slot's partial; wait_group 0 -> S(u + 1).
// No group is pending where a tile starts or ends, nor across a branch that rejoins: with S(u)
// still in flight across the loop's back edge, ptxas moved the accumulator, waited for it
// (C7517) and serialized every wgmma of the kernel (C7518). The P^T buffer stays single: P(u + 1)
// is stored after a barrier that every warp reaches only once its P.V(u) completed. The ring
// keeps 3 stages: a tile holds at most two (u and u + 1), so at least one fill is in flight.
constexpr int kQQuads = kTrialQ / 4 / kConsumerThreads;  // float4 of q per consumer thread
struct QRegs {
  float4 x[kQQuads];
};
__device__ __forceinline__ QRegs load_q(const TimeWork& w, const SlotAt& at, int tid) {
  const float* qg = w.q + (static_cast<std::int64_t>(at.seq) * w.n_kv + at.kvh) * kHeads * kHeadDim;
  QRegs r;
#pragma unroll
  for (int c = 0; c < kQQuads; ++c) r.x[c] = reinterpret_cast<const float4*>(qg)[tid + c * kConsumerThreads];
  return r;
}
// stage_q's split and stores from registers; the caller guarantees that no wgmma reads Q^T.
template <KvDtype D>
__device__ __forceinline__ void store_q(const QRegs& r, WgBufs& b, int bar, int tid) {
#pragma unroll
  for (int c = 0; c < kQQuads; ++c) {
    const int e = 4 * (tid + c * kConsumerThreads);
    const int h = e / kHeadDim;
    const int d = e % kHeadDim;
    unsigned hi[2], lo[2];
    lc::split_pair<D>(r.x[c].x, r.x[c].y, hi[0], lo[0]);
    lc::split_pair<D>(r.x[c].z, r.x[c].w, hi[1], lo[1]);
    *reinterpret_cast<uint2*>(b.q[0] + QTile::offset(h, d)) = make_uint2(hi[0], hi[1]);
    *reinterpret_cast<uint2*>(b.q[1] + QTile::offset(h, d)) = make_uint2(lo[0], lo[1]);
  }
  fence_proxy_async();
  consumer_sync(bar);
}

__device__ __forceinline__ void reset_state(WgState& st) {
#pragma unroll
  for (int c4 = 0; c4 < 4; ++c4) {
    st.m[0][c4] = -INFINITY;
    st.m[1][c4] = -INFINITY;
    st.s[c4] = 0.0f;
  }
#pragma unroll
  for (int p = 0; p < kPairs; ++p)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int i = 0; i < kAccRegs; ++i) st.o[p][h][i] = 0.0f;
}

// wg's 16 score wgmma of one tile into acc (zeroed first), committed as one group; no wait.
template <KvDtype D>
__device__ __forceinline__ void issue_scores(float (&acc)[kAccRegs], unsigned k_lo, unsigned q_hi, unsigned q_lo) {
#pragma unroll
  for (int i = 0; i < kAccRegs; ++i) acc[i] = 0.0f;
  fence_operand(acc);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kScoreSteps; ++kk) {
    const std::uint64_t a = Sw128Desc::at(k_lo, kstep_offset<KvTile>(kk));
    wgmma_m64n16k16<D, 0>(acc, a, Sw128Desc::at(q_hi, kstep_offset<QTile>(kk)));
    wgmma_m64n16k16<D, 0>(acc, a, Sw128Desc::at(q_lo, kstep_offset<QTile>(kk)));
  }
  wgmma_commit();
}

// wg's tile from the completed scores to P^T in shared memory: the stand-in softmax, P's split
// and stmatrix, o's rescale, and the barrier after which every warp's P^T is written.
template <KvDtype D>
__device__ __forceinline__ void softmax_p(float (&acc)[kAccRegs], WgState& st, WgBufs& b, int bar, float scale_log2,
                                          int warp, int lane) {
  const int g = lane / 4;
  const int qd = lane % 4;
  const int my_pair = warp / 2;
  float wmax[4];
#pragma unroll
  for (int c4 = 0; c4 < 4; ++c4) {
    const int i = head_reg(c4);
    acc[i] *= scale_log2;
    acc[i + 2] *= scale_log2;
    float mx = fmaxf(acc[i], acc[i + 2]);
    mx = fmaxf(mx, __shfl_xor_sync(lc::kFullMask, mx, 4));
    mx = fmaxf(mx, __shfl_xor_sync(lc::kFullMask, mx, 8));
    mx = fmaxf(mx, __shfl_xor_sync(lc::kFullMask, mx, 16));
    wmax[c4] = mx;
  }
  if (g == 0) {
#pragma unroll
    for (int c4 = 0; c4 < 4; ++c4) b.red_max[warp][8 * (c4 >> 1) + 2 * qd + (c4 & 1)] = wmax[c4];
  }
  consumer_sync(bar);
  float corr[kPairs][4];
#pragma unroll
  for (int p = 0; p < kPairs; ++p)
#pragma unroll
    for (int c4 = 0; c4 < 4; ++c4) {
      const int head = 8 * (c4 >> 1) + 2 * qd + (c4 & 1);
      const float bm = fmaxf(b.red_max[2 * p][head], b.red_max[2 * p + 1][head]);
      const float m_new = fmaxf(st.m[p][c4], bm);
      corr[p][c4] = ex2(st.m[p][c4] - m_new);
      st.m[p][c4] = m_new;
    }
  unsigned phi[4], plo[4];
#pragma unroll
  for (int c4 = 0; c4 < 4; ++c4) {
    const int i = head_reg(c4);
    const float m = my_pair == 0 ? st.m[0][c4] : st.m[1][c4];
    acc[i] = ex2(acc[i] - m);
    acc[i + 2] = ex2(acc[i + 2] - m);
    float sum = acc[i] + acc[i + 2];
    sum += __shfl_xor_sync(lc::kFullMask, sum, 4);
    sum += __shfl_xor_sync(lc::kFullMask, sum, 8);
    sum += __shfl_xor_sync(lc::kFullMask, sum, 16);
    st.s[c4] = st.s[c4] * (my_pair == 0 ? corr[0][c4] : corr[1][c4]) + sum;
  }
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = 4 * j + 2 * r;
      lc::split_pair<D>(acc[i], acc[i + 1], phi[2 * j + r], plo[2 * j + r]);
    }
  store_pt(b.pt[0], warp, lane, phi);
  store_pt(b.pt[1], warp, lane, plo);
  fence_proxy_async();
#pragma unroll
  for (int p = 0; p < kPairs; ++p)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int i = 0; i < kAccRegs; ++i) st.o[p][h][i] *= corr[p][(i >> 2) * 2 + (i & 1)];
  consumer_sync(bar);
}
// The tile's 16 P.V wgmma (V^T from the stage, P^T hi then lo), committed as one group; no wait.
template <KvDtype D>
__device__ __forceinline__ void issue_pv(WgState& st, unsigned v_lo, unsigned pt_hi, unsigned pt_lo) {
#pragma unroll
  for (int p = 0; p < kPairs; ++p)
#pragma unroll
    for (int h = 0; h < 2; ++h) fence_operand(st.o[p][h]);
  wgmma_fence();
#pragma unroll
  for (int p = 0; p < kPairs; ++p)
#pragma unroll
    for (int kk = 0; kk < kPairTokenSteps; ++kk)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const std::uint64_t a = Sw128Desc::at(v_lo, vt_offset(p, kk, h));
        wgmma_m64n16k16<D, 1>(st.o[p][h], a, Sw128Desc::at(pt_hi, pt_offset(p, kk)));
        wgmma_m64n16k16<D, 1>(st.o[p][h], a, Sw128Desc::at(pt_lo, pt_offset(p, kk)));
      }
  wgmma_commit();
}
// softmax_p then issue_pv: instruction for instruction wg's tile after its scores.
template <KvDtype D>
__device__ __forceinline__ void softmax_pv(float (&acc)[kAccRegs], WgState& st, WgBufs& b, int bar, float scale_log2,
                                           unsigned v_lo, unsigned pt_hi, unsigned pt_lo, int warp, int lane) {
  softmax_p<D>(acc, st, b, bar, scale_log2, warp, lane);
  issue_pv<D>(st, v_lo, pt_hi, pt_lo);
}

__device__ __forceinline__ void fence_o(WgState& st) {
#pragma unroll
  for (int p = 0; p < kPairs; ++p)
#pragma unroll
    for (int h = 0; h < 2; ++h) fence_operand(st.o[p][h]);
}

// wg's slot end: the pairs' sums, the pairs merged, one partial per head (o must be complete).
__device__ __forceinline__ void write_partial(const TimeWork& w, int flat, const WgState& st, WgBufs& b, int bar, int warp,
                                              int lane) {
  const int g = lane / 4;
  const int qd = lane % 4;
  if (g == 0) {
#pragma unroll
    for (int c4 = 0; c4 < 4; ++c4) b.red_sum[warp][8 * (c4 >> 1) + 2 * qd + (c4 & 1)] = st.s[c4];
  }
  consumer_sync(bar);
  float* part = w.partials + static_cast<std::int64_t>(flat) * kHeads * kPartialFloats;
#pragma unroll
  for (int c4 = 0; c4 < 4; ++c4) {
    const int head = 8 * (c4 >> 1) + 2 * qd + (c4 & 1);
    const float m_all = fmaxf(st.m[0][c4], st.m[1][c4]);
    const float c0 = ex2(st.m[0][c4] - m_all);
    const float c1 = ex2(st.m[1][c4] - m_all);
    const float s_all =
        (b.red_sum[0][head] + b.red_sum[1][head]) * c0 + (b.red_sum[2][head] + b.red_sum[3][head]) * c1;
    if (warp == 0 && g == 0) {
      part[head * kPartialFloats + 0] = m_all;
      part[head * kPartialFloats + 1] = s_all;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = head_reg(c4) + 2 * r;
        const AccAt a = acc_at(warp, lane, i);
        part[head * kPartialFloats + 2 + 64 * h + a.row] = st.o[0][h][i] * c0 + st.o[1][h][i] * c1;
      }
  }
}

// =================================================================================================
// wg and wgs: one walker's tiles in series, kWgs walkers a CTA over one ring
// =================================================================================================
// Warpgroup c is walker v = x kWgs + c: for each of its slots it stages q (when the sequence or KV
// head changes), and per tile waits for its stage, issues the 16 score wgmma, waits, runs the
// stand-in softmax and the 16 P.V wgmma, waits and releases the stage; at the slot end it writes
// the partial. A slot's math depends on the slot alone, so every layout gives wg's partials bit for
// bit (checked). wg = WgLayout (2 CTAs of one warpgroup an SM); wgs = 2-4 warpgroups over one
// shared ring, one CTA an SM.
// Warpgroup C's walk. C is a template argument so that its buffers' addresses, and so the wgmma
// descriptors, stay warp-uniform to the compiler (uniform registers): with C read from the warp
// index, ptxas moved them to vector registers (R2UR before every wgmma) and wg took 161
// registers instead of 111.
template <KvDtype D, class L, StageRelease R, int C>
__device__ __forceinline__ void walk(const TimeWork& w, RingSmem<L>& sm, int warp, int tid) {
  const int lane = tid % kWarpSize;
  constexpr int kBar = kConsumerBarrier + C;
  WgBufs& b = sm.b[C];
  int tiles[L::kWgs];
  all_walker_tiles<L>(w, tiles);
  const int walkers = static_cast<int>(gridDim.x) * L::kWgs;
  const unsigned q_hi = Sw128Desc::k_major_lo(lc::smem_u32(b.q[0]));
  const unsigned q_lo = Sw128Desc::k_major_lo(lc::smem_u32(b.q[1]));
  const unsigned pt_hi = Sw128Desc::k_major_lo(lc::smem_u32(b.pt[0]));
  const unsigned pt_lo = Sw128Desc::k_major_lo(lc::smem_u32(b.pt[1]));
  int j = 0;
  int staged = -1;  // the (sequence, KV head) whose q is staged
  for (int flat = static_cast<int>(blockIdx.x) * L::kWgs + C; flat < w.slots; flat += walkers) {
    const SlotAt at = slot_at(w, flat);
    const int qkey = at.seq * w.n_kv + at.kvh;
    if (qkey != staged) {
      consumer_sync(kBar);  // every warp's wgmma reads of the old Q^T are over (each waited for its groups)
      store_q<D>(load_q(w, at, tid), b, kBar, tid);
      staged = qkey;
    }
    WgState st;
    reset_state(st);
    for (int t = 0; t < w.tiles_per_slot; ++t, ++j) {
      const int fill = fill_index<L>(tiles, C, j);
      const int s = fill % L::kStages;
      const int round = fill / L::kStages;
      // A parity wait is only sound one phase ahead. With several warpgroups the stage's previous
      // fill (round - 1) belongs to another one and may still be in flight: its full phase then
      // has round - 2's parity, which is ours, and the wait would pass on old bytes (probe 80's
      // first run: a fault and a hang). Its release (empty phase round - 1) proves it landed. The
      // fill before it was released before the producer issued round - 1 (kStages > kWgs).
      if (L::kWgs > 1 && round > 0) mbar_wait(lc::smem_u32(&sm.empty[s]), (round - 1) & 1);
      mbar_wait(lc::smem_u32(&sm.full[s]), round & 1);
      float acc[kAccRegs];
      issue_scores<D>(acc, Sw128Desc::k_major_lo(lc::smem_u32(sm.k[s])), q_hi, q_lo);
      wgmma_wait<0>();
      fence_operand(acc);
      const unsigned v_lo = Sw128Desc::mn_major_lo(lc::smem_u32(sm.v[s]));
      if constexpr (R == StageRelease::whole) {
        softmax_pv<D>(acc, st, b, kBar, w.scale_log2, v_lo, pt_hi, pt_lo, warp, lane);
        wgmma_wait<0>();
        fence_o(st);
        release(sm, s, lane);
      } else {
        release_bar(sm.empty[s], lane);  // this warp's score wgmma are done: its reads of K are over
        softmax_p<D>(acc, st, b, kBar, w.scale_log2, warp, lane);
        mbar_wait(lc::smem_u32(&sm.full_v[s]), round & 1);
        issue_pv<D>(st, v_lo, pt_hi, pt_lo);
        wgmma_wait<0>();
        fence_o(st);
        release_bar(sm.empty_v[s], lane);
      }
    }
    write_partial(w, flat, st, b, kBar, warp, lane);
  }
}
template <KvDtype D, class L, StageRelease R, int C = 0>
__device__ __forceinline__ void walk_of(int c, const TimeWork& w, RingSmem<L>& sm, int warp, int tid) {
  if constexpr (C < L::kWgs) {
    if (c == C) {
      walk<D, L, R, C>(w, sm, warp, tid);
    } else {
      walk_of<D, L, R, C + 1>(c, w, sm, warp, tid);
    }
  }
}
template <KvDtype D, class L, StageRelease R = StageRelease::whole>
__global__ void __launch_bounds__(L::kThreads, L::kCtasPerSm) wgs_kernel(TimeWork w, const __grid_constant__ TmaMaps maps) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  RingSmem<L>& sm = ring_smem<L>(smem_raw);
  init_ring(sm);
  const int warp_all = static_cast<int>(threadIdx.x) / kWarpSize;
  if (warp_all == L::kProducerWarp) {
    if constexpr (R == StageRelease::whole) {
      produce(w, maps, sm);
    } else {
      produce_split(w, maps, sm);
    }
    return;
  }
  walk_of<D, L, R>(warp_all / kConsumerWarps, w, sm, warp_all % kConsumerWarps,
                   static_cast<int>(threadIdx.x) % kConsumerThreads);
}
// Two warpgroups over 6 stages (the shared memory of wg's two CTAs in one), three over 5, four
// over 5: 8, 12 and 16 consumer warps an SM, 3, 1.7 and 1.25 stages a warpgroup.
using Wgs2Layout = RingLayout<2, 6, 1>;
using Wgs3Layout = RingLayout<3, 5, 1>;
using Wgs4Layout = RingLayout<4, 5, 1>;
static_assert(ring_fits<Wgs2Layout>() && ring_fits<Wgs3Layout>() && ring_fits<Wgs4Layout>(), "one CTA an SM");
static_assert(ring_sound<Wgs2Layout>() && ring_sound<Wgs3Layout>() && ring_sound<Wgs4Layout>(), "parity waits");

template <KvDtype D>
__global__ void __launch_bounds__(kTimeThreads, kCtasPerSm) wgp_kernel(TimeWork w, const __grid_constant__ TmaMaps maps) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  TimeSmem& sm = time_smem(smem_raw);
  init_ring(sm);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / kWarpSize;
  if (warp == WgLayout::kProducerWarp) {
    produce(w, maps, sm);
    return;
  }
  int flat = static_cast<int>(blockIdx.x);
  if (flat >= w.slots) return;
  const int lane = tid % kWarpSize;
  const int step_slots = static_cast<int>(gridDim.x);
  const unsigned q_hi = Sw128Desc::k_major_lo(lc::smem_u32(sm.b[0].q[0]));
  const unsigned q_lo = Sw128Desc::k_major_lo(lc::smem_u32(sm.b[0].q[1]));
  const unsigned pt_hi = Sw128Desc::k_major_lo(lc::smem_u32(sm.b[0].pt[0]));
  const unsigned pt_lo = Sw128Desc::k_major_lo(lc::smem_u32(sm.b[0].pt[1]));
  auto full_bar = [&](int u) { return lc::smem_u32(&sm.full[u % kStages]); };
  auto k_desc = [&](int u) { return Sw128Desc::k_major_lo(lc::smem_u32(sm.k[u % kStages])); };
  auto v_desc = [&](int u) { return Sw128Desc::mn_major_lo(lc::smem_u32(sm.v[u % kStages])); };

  // Prologue: the first slot's q (no wgmma has run: init_ring's __syncthreads orders it), the
  // next slot's q into registers, S(0).
  store_q<D>(load_q(w, slot_at(w, flat), tid), sm.b[0], kConsumerBarrier, tid);
  QRegs q_next{};
  if (flat + step_slots < w.slots) q_next = load_q(w, slot_at(w, flat + step_slots), tid);
  float sa[kAccRegs], sb[kAccRegs];
  mbar_wait(full_bar(0), 0);
  issue_scores<D>(sa, k_desc(0), q_hi, q_lo);
  wgmma_wait<0>();
  fence_operand(sa);
  WgState st;
  reset_state(st);
  int t = 0, use = 0;

  // One tile: sc holds S(use), complete; sn receives S(use + 1), complete on return. No wgmma is
  // in flight where a tile starts or ends, nor across a branch that rejoins, so that ptxas need
  // not move (and so wait for) an in-flight accumulator. False after the CTA's last tile.
  auto tile = [&](float (&sc)[kAccRegs], float (&sn)[kAccRegs]) -> bool {
    const int s = use % kStages;
    if (t + 1 < w.tiles_per_slot) {
      mbar_wait(full_bar(use + 1), ((use + 1) / kStages) & 1);
      issue_scores<D>(sn, k_desc(use + 1), q_hi, q_lo);  // runs during the softmax
      softmax_pv<D>(sc, st, sm.b[0], kConsumerBarrier, w.scale_log2, v_desc(use), pt_hi, pt_lo, warp, lane);
      wgmma_wait<0>();  // pending were S(use + 1), P.V(use): both done (in order)
      fence_o(st);
      fence_operand(sn);
      release(sm, s, lane);
      ++t;
      ++use;
      return true;
    }
    softmax_pv<D>(sc, st, sm.b[0], kConsumerBarrier, w.scale_log2, v_desc(use), pt_hi, pt_lo, warp, lane);
    const int next = flat + step_slots;
    if (next >= w.slots) {
      wgmma_wait<0>();  // P.V(use)
      fence_o(st);
      release(sm, s, lane);
      write_partial(w, flat, st, sm.b[0], kConsumerBarrier, warp, lane);
      return false;
    }
    // The next slot's q, restaged every slot (wg skips a slot of the same q; no shape here has
    // one: (a) is one slot a CTA, (b) and (c) change sequence every slot). S(use), Q^T's last
    // reader, completed in every warp before the softmax's barriers.
    store_q<D>(q_next, sm.b[0], kConsumerBarrier, tid);
    mbar_wait(full_bar(use + 1), ((use + 1) / kStages) & 1);
    issue_scores<D>(sn, k_desc(use + 1), q_hi, q_lo);  // runs during the partial
    wgmma_wait<1>();  // pending were P.V(use), S(use + 1): P.V(use) done
    fence_o(st);
    release(sm, s, lane);
    write_partial(w, flat, st, sm.b[0], kConsumerBarrier, warp, lane);
    wgmma_wait<0>();  // S(use + 1)
    fence_operand(sn);
    flat = next;
    t = 0;
    ++use;
    reset_state(st);
    if (flat + step_slots < w.slots) q_next = load_q(w, slot_at(w, flat + step_slots), tid);
    return true;
  };
  while (tile(sa, sb) && tile(sb, sa)) {
  }
}

// Random f16/bf16 values in [-1, 1) for the planes (a hash of the index: no host copy).
template <KvDtype D>
__global__ void fill_plane_kernel(KvWord* dst, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t z = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull + seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
    if constexpr (D == KvDtype::bf16) {
      const __nv_bfloat16 b = __float2bfloat16_rn(u);
      dst[i] = *reinterpret_cast<const KvWord*>(&b);
    } else {
      const __half b = __float2half_rn(u);
      dst[i] = *reinterpret_cast<const KvWord*>(&b);
    }
  }
}

// =================================================================================================
// host
// =================================================================================================
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uni() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  double uni(double a, double b) { return a + (b - a) * uni(); }
  bool coin(double p) { return uni() < p; }
  double sign() { return coin(0.5) ? -1.0 : 1.0; }
};

template <KvDtype D>
KvWord enc(float x) {
  if constexpr (D == KvDtype::bf16) {
    const __nv_bfloat16_raw r = __float2bfloat16_rn(x);
    return r.x;
  } else {
    const __half_raw r = __float2half_rn(x);
    return r.x;
  }
}
template <KvDtype D>
double dec(KvWord b) {
  if constexpr (D == KvDtype::bf16) {
    const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  } else {
    const int e = (b >> 10) & 31;
    const int m = b & 1023;
    const double sg = (b & 0x8000) ? -1.0 : 1.0;
    if (e == 31) return m ? NAN : sg * INFINITY;
    if (e == 0) return sg * std::ldexp(static_cast<double>(m), -24);
    return sg * std::ldexp(static_cast<double>(1024 + m), e - 25);
  }
}
template <KvDtype D>
constexpr const char* dtype_name() {
  return D == KvDtype::bf16 ? "bf16" : "f16";
}
// A random subnormal of D (exponent field 0, mantissa nonzero), with a random sign.
template <KvDtype D>
KvWord subnormal(Rng& r) {
  constexpr unsigned kMantBits = D == KvDtype::bf16 ? 7 : 10;
  const unsigned m = 1u + static_cast<unsigned>(r.next() % ((1u << kMantBits) - 1u));
  return static_cast<KvWord>((r.coin(0.5) ? 0x8000u : 0u) | m);
}

// Input kinds of the bit probe.
enum class Kind { random, subnormal, spread, cancel };
constexpr int kKinds = 4;
constexpr const char* kKindName[kKinds] = {"random", "subnormal", "spread", "cancel"};

struct TrialIn {
  std::vector<KvWord> k, v;
  std::vector<float> q, p, o0;
};

// Trial `n` of kind n % 4 (o before the block is zero for every other trial of a kind).
template <KvDtype D>
void make_trial(Rng& r, int n, KvWord* k, KvWord* v, float* q, float* p, float* o0) {
  const Kind kind = static_cast<Kind>(n % kKinds);
  const bool zero_o = (n / kKinds) % 2 == 0;
  constexpr bool kBf = D == KvDtype::bf16;
  auto enc_d = [](double x) { return enc<D>(static_cast<float>(x)); };
  auto pow2 = [&](double lo, double hi) { return std::exp2(r.uni(lo, hi)); };
  for (int i = 0; i < kTrialKv; ++i) {
    switch (kind) {
      case Kind::random:
      case Kind::cancel:
        k[i] = enc_d(r.uni(-1, 1) * (kind == Kind::cancel ? pow2(-8, 8) : 1.0));
        v[i] = enc_d(r.uni(-1, 1) * (kind == Kind::cancel ? pow2(-8, 8) : 1.0));
        break;
      case Kind::subnormal:
        k[i] = r.coin(0.5) ? subnormal<D>(r) : enc_d(r.uni(-1, 1) * pow2(-8, 0));
        v[i] = r.coin(0.5) ? subnormal<D>(r) : enc_d(r.uni(-1, 1) * pow2(-8, 0));
        break;
      case Kind::spread: {
        // f16: the whole range (2^-24 .. 2^15); bf16: 2^-133 .. 2^60, so no product overflows f32.
        const double lo = kBf ? -133 : -24, hi = kBf ? 60 : 14.9;
        k[i] = enc_d(r.sign() * pow2(lo, hi));
        v[i] = enc_d(r.sign() * pow2(lo, hi));
        break;
      }
    }
  }
  for (int i = 0; i < kTrialQ; ++i) {
    switch (kind) {
      case Kind::random: q[i] = static_cast<float>(r.uni(-1, 1)); break;
      case Kind::cancel: q[i] = static_cast<float>(r.uni(-1, 1) * pow2(-4, 4)); break;
      case Kind::subnormal:
        // Small q: q_lo (and for f16 q_hi) subnormal in D, or zero.
        q[i] = static_cast<float>(r.sign() * (kBf ? (r.coin(0.5) ? pow2(-130, -100) : pow2(-8, 0)) : pow2(-30, 0)));
        break;
      // Products stay under 2^111 (bf16) or 2^29 (f16), sums of 256 of them under f32's range.
      case Kind::spread: q[i] = static_cast<float>(r.sign() * (kBf ? pow2(-60, 50) : pow2(-20, 14))); break;
    }
  }
  for (int h = 0; h < kHeads; ++h) {
    int top = static_cast<int>(r.next() % kTileRows);
    for (int t = 0; t < kTileRows; ++t) {
      float x = 0.0f;
      switch (kind) {
        case Kind::random:
        case Kind::cancel: x = t == top ? 1.0f : static_cast<float>(r.uni()); break;
        case Kind::subnormal: x = static_cast<float>(std::exp2(-r.uni(0, kBf ? 140 : 30))); break;
        case Kind::spread: x = static_cast<float>(std::exp2(-r.uni(0, kBf ? 60 : 24))); break;
      }
      p[h * kTileRows + t] = x;
    }
  }
  for (int i = 0; i < kTrialO; ++i) {
    o0[i] = zero_o ? 0.0f
                   : static_cast<float>(kind == Kind::spread ? r.sign() * pow2(-10, 10) : r.uni(-1, 1));
  }
  if (kind == Kind::cancel) {
    auto near_neg = [&](KvWord x) {  // -x, or -x slightly off (a quarter of the time)
      const double f = -dec<D>(x);
      return enc_d(r.coin(0.25) ? f * (1.0 + std::exp2(-r.uni(3, 10))) : f);
    };
    for (int t = 0; t < kTileRows; ++t) {
      // Within a k-step (dims 0-31): dim 16 kk + 8 + i cancels dim 16 kk + i under the same q.
      for (int kk = 0; kk < 2; ++kk)
        for (int i = 0; i < 8; ++i)
          k[t * kHeadDim + 16 * kk + 8 + i] = near_neg(k[t * kHeadDim + 16 * kk + i]);
      // Across k-steps: dims 96-127 cancel dims 32-63; dims 64-95 leave a small residual.
      for (int d = 32; d < 64; ++d) k[t * kHeadDim + d + 64] = near_neg(k[t * kHeadDim + d]);
      for (int d = 64; d < 96; ++d) k[t * kHeadDim + d] = enc_d(r.sign() * pow2(-16, -6));
    }
    for (int h = 0; h < kHeads; ++h) {
      for (int kk = 0; kk < 2; ++kk)
        for (int i = 0; i < 8; ++i) q[h * kHeadDim + 16 * kk + 8 + i] = q[h * kHeadDim + 16 * kk + i];
      for (int d = 32; d < 64; ++d) q[h * kHeadDim + d + 64] = q[h * kHeadDim + d];
    }
    // P.V: a pair's second 16-token step cancels its first under the same weights.
    for (int pr = 0; pr < kPairs; ++pr)
      for (int i = 0; i < 16; ++i) {
        const int t0 = pr * kBlockRows + i;
        for (int d = 0; d < kHeadDim; ++d) v[(t0 + 16) * kHeadDim + d] = near_neg(v[t0 * kHeadDim + d]);
        for (int h = 0; h < kHeads; ++h) p[h * kTileRows + t0 + 16] = p[h * kTileRows + t0];
      }
  }
}

std::int64_t ordered(float x) {
  std::int32_t i;
  std::memcpy(&i, &x, sizeof i);
  return i < 0 ? -static_cast<std::int64_t>(i & 0x7fffffff) : static_cast<std::int64_t>(i);
}
std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

struct ChainStats {
  std::int64_t compared = 0, differing = 0, max_ulp = 0, nonfinite = 0;
  double err_a = 0, err_b = 0;
  void add(float a, float b, double ref, double mag) {
    ++compared;
    if (!std::isfinite(a) || !std::isfinite(b)) {
      ++nonfinite;
      if (bits_of(a) != bits_of(b)) ++differing;
      return;
    }
    if (bits_of(a) != bits_of(b)) {
      ++differing;
      const std::int64_t ulp = ordered(a) - ordered(b);
      max_ulp = std::max(max_ulp, ulp < 0 ? -ulp : ulp);
    }
    auto err = [&](double x) { return mag > 0 ? std::fabs(x - ref) / mag : (x == ref ? 0.0 : INFINITY); };
    err_a = std::max(err_a, err(a));
    err_b = std::max(err_b, err(b));
  }
  void merge(const ChainStats& o) {
    compared += o.compared;
    differing += o.differing;
    nonfinite += o.nonfinite;
    max_ulp = std::max(max_ulp, o.max_ulp);
    err_a = std::max(err_a, o.err_a);
    err_b = std::max(err_b, o.err_b);
  }
};

// An error bound that a correct f32 accumulation of these chains stays far below, and garbage far
// above (errors are relative to the sum of the terms' magnitudes).
constexpr double kBrokenErr = 1e-3;

template <KvDtype D>
bool run_bits(int trials, int batch) {
  int has = 0;
  {
    int* d = nullptr;
    PROBE_CHECK(cudaMalloc(&d, sizeof(int)));
    arch_probe_kernel<<<1, 1>>>(d);
    PROBE_CHECK(cudaMemcpy(&has, d, sizeof(int), cudaMemcpyDeviceToHost));
    PROBE_CHECK(cudaFree(d));
  }
  if (!has) {
    std::fprintf(stderr, "the device runs the sm_90 image: no wgmma (needs sm_90a, an H100/H200)\n");
    std::exit(3);
  }
  PROBE_CHECK(cudaFuncSetAttribute(bits_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kBitsSmemBytes)));
  TrialIn in;
  in.k.resize(static_cast<std::size_t>(batch) * kTrialKv);
  in.v.resize(in.k.size());
  in.q.resize(static_cast<std::size_t>(batch) * kTrialQ);
  in.p.resize(static_cast<std::size_t>(batch) * kTrialP);
  in.o0.resize(static_cast<std::size_t>(batch) * kTrialO);
  std::vector<float> s_a(static_cast<std::size_t>(batch) * kTrialS), s_b(s_a.size());
  std::vector<float> o_a(static_cast<std::size_t>(batch) * kTrialO), o_b(o_a.size());
  std::vector<KvWord> q_split(static_cast<std::size_t>(batch) * 2 * kTrialQ);
  std::vector<KvWord> p_split(static_cast<std::size_t>(batch) * 2 * kTrialP);
  std::vector<void*> allocs;
  auto dev = [&allocs](std::size_t bytes) {
    void* p = nullptr;
    PROBE_CHECK(cudaMalloc(&p, bytes));
    allocs.push_back(p);
    return p;
  };
  BitsIo io{};
  io.k = static_cast<KvWord*>(dev(in.k.size() * sizeof(KvWord)));
  io.v = static_cast<KvWord*>(dev(in.v.size() * sizeof(KvWord)));
  io.q = static_cast<float*>(dev(in.q.size() * sizeof(float)));
  io.p = static_cast<float*>(dev(in.p.size() * sizeof(float)));
  io.o0 = static_cast<float*>(dev(in.o0.size() * sizeof(float)));
  io.s_a = static_cast<float*>(dev(s_a.size() * sizeof(float)));
  io.s_b = static_cast<float*>(dev(s_b.size() * sizeof(float)));
  io.o_a = static_cast<float*>(dev(o_a.size() * sizeof(float)));
  io.o_b = static_cast<float*>(dev(o_b.size() * sizeof(float)));
  io.q_split = static_cast<KvWord*>(dev(q_split.size() * sizeof(KvWord)));
  io.p_split = static_cast<KvWord*>(dev(p_split.size() * sizeof(KvWord)));

  ChainStats scores[kKinds], pv[kKinds];
  // Trial 0 (random rows) kept whole: where way B goes wrong, which reference element each wrong
  // result equals tells a permuted layout from garbage.
  std::vector<double> ref_s0(kTrialS), ref_o0(kTrialO);
  std::vector<float> b_s0(kTrialS), b_o0(kTrialO);
  Rng rng{D == KvDtype::bf16 ? 0xB16B16ull : 0xF16F16ull};
  for (int first = 0; first < trials; first += batch) {
    const int n = std::min(batch, trials - first);
    for (int t = 0; t < n; ++t)
      make_trial<D>(rng, first + t, &in.k[static_cast<std::size_t>(t) * kTrialKv],
                    &in.v[static_cast<std::size_t>(t) * kTrialKv], &in.q[static_cast<std::size_t>(t) * kTrialQ],
                    &in.p[static_cast<std::size_t>(t) * kTrialP], &in.o0[static_cast<std::size_t>(t) * kTrialO]);
    auto up = [&](const void* dst, const void* src, std::size_t bytes) {
      PROBE_CHECK(cudaMemcpy(const_cast<void*>(dst), src, bytes, cudaMemcpyHostToDevice));
    };
    up(io.k, in.k.data(), static_cast<std::size_t>(n) * kTrialKv * sizeof(KvWord));
    up(io.v, in.v.data(), static_cast<std::size_t>(n) * kTrialKv * sizeof(KvWord));
    up(io.q, in.q.data(), static_cast<std::size_t>(n) * kTrialQ * sizeof(float));
    up(io.p, in.p.data(), static_cast<std::size_t>(n) * kTrialP * sizeof(float));
    up(io.o0, in.o0.data(), static_cast<std::size_t>(n) * kTrialO * sizeof(float));
    bits_kernel<D><<<n, kConsumerThreads, kBitsSmemBytes>>>(io);
    PROBE_CHECK(cudaGetLastError());
    PROBE_CHECK(cudaDeviceSynchronize());
    auto down = [&](void* dst, const void* src, std::size_t bytes) {
      PROBE_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    };
    down(s_a.data(), io.s_a, static_cast<std::size_t>(n) * kTrialS * sizeof(float));
    down(s_b.data(), io.s_b, static_cast<std::size_t>(n) * kTrialS * sizeof(float));
    down(o_a.data(), io.o_a, static_cast<std::size_t>(n) * kTrialO * sizeof(float));
    down(o_b.data(), io.o_b, static_cast<std::size_t>(n) * kTrialO * sizeof(float));
    down(q_split.data(), io.q_split, static_cast<std::size_t>(n) * 2 * kTrialQ * sizeof(KvWord));
    down(p_split.data(), io.p_split, static_cast<std::size_t>(n) * 2 * kTrialP * sizeof(KvWord));

    std::vector<double> kd(kTrialKv), vd(kTrialKv), qh(kTrialQ), ql(kTrialQ), ph(kTrialP), pl(kTrialP);
    for (int t = 0; t < n; ++t) {
      const int kind = (first + t) % kKinds;
      const std::size_t tk = static_cast<std::size_t>(t);
      for (int i = 0; i < kTrialKv; ++i) {
        kd[i] = dec<D>(in.k[tk * kTrialKv + i]);
        vd[i] = dec<D>(in.v[tk * kTrialKv + i]);
      }
      for (int i = 0; i < kTrialQ; ++i) {
        qh[i] = dec<D>(q_split[tk * 2 * kTrialQ + i]);
        ql[i] = dec<D>(q_split[tk * 2 * kTrialQ + kTrialQ + i]);
      }
      for (int i = 0; i < kTrialP; ++i) {
        ph[i] = dec<D>(p_split[tk * 2 * kTrialP + i]);
        pl[i] = dec<D>(p_split[tk * 2 * kTrialP + kTrialP + i]);
      }
      for (int tok = 0; tok < kTileRows; ++tok)
        for (int h = 0; h < kHeads; ++h) {
          double ref = 0, mag = 0;
          for (int d = 0; d < kHeadDim; ++d) {
            const double a = kd[tok * kHeadDim + d] * qh[h * kHeadDim + d];
            const double b = kd[tok * kHeadDim + d] * ql[h * kHeadDim + d];
            ref += a + b;
            mag += std::fabs(a) + std::fabs(b);
          }
          scores[kind].add(s_a[tk * kTrialS + tok * kHeads + h], s_b[tk * kTrialS + tok * kHeads + h], ref, mag);
          if (first + t == 0) {
            ref_s0[tok * kHeads + h] = ref;
            b_s0[tok * kHeads + h] = s_b[tk * kTrialS + tok * kHeads + h];
          }
        }
      for (int pr = 0; pr < kPairs; ++pr)
        for (int h = 0; h < kHeads; ++h)
          for (int d = 0; d < kHeadDim; ++d) {
            const std::size_t oi = (static_cast<std::size_t>(pr) * kHeads + h) * kHeadDim + d;
            const double o_in = in.o0[tk * kTrialO + oi];
            double ref = o_in, mag = std::fabs(o_in);
            for (int i = 0; i < kBlockRows; ++i) {
              const int tok = pr * kBlockRows + i;
              const double a = ph[h * kTileRows + tok] * vd[tok * kHeadDim + d];
              const double b = pl[h * kTileRows + tok] * vd[tok * kHeadDim + d];
              ref += a + b;
              mag += std::fabs(a) + std::fabs(b);
            }
            pv[kind].add(o_a[tk * kTrialO + oi], o_b[tk * kTrialO + oi], ref, mag);
            if (first + t == 0) {
              ref_o0[oi] = ref;
              b_o0[oi] = o_b[tk * kTrialO + oi];
            }
          }
    }
  }
  for (void* p : allocs) PROBE_CHECK(cudaFree(p));

  bool broken = false;
  // Up to 8 of trial 0's wrong way-B results and the reference positions they equal (rel 1e-5).
  auto diagnose = [](const char* chain, const std::vector<double>& ref, const std::vector<float>& got, int cols,
                     const char* row_name, const char* col_name) {
    int shown = 0;
    for (std::size_t i = 0; i < ref.size() && shown < 8; ++i) {
      if (std::fabs(got[i] - ref[i]) <= 1e-5 * (std::fabs(ref[i]) + 1e-30)) continue;
      std::printf("  %s trial 0: %s %zu %s %zu: wgmma %.7g, f64 %.7g; equals the f64 of", chain, row_name, i / cols,
                  col_name, i % cols, got[i], ref[i]);
      int found = 0;
      for (std::size_t j = 0; j < ref.size() && found < 4; ++j)
        if (std::fabs(got[i] - ref[j]) <= 1e-5 * (std::fabs(ref[j]) + 1e-30)) {
          std::printf(" (%zu, %zu)", j / cols, j % cols);
          ++found;
        }
      std::printf("%s\n", found ? "" : " nothing");
      ++shown;
    }
  };
  auto line = [&](const char* chain, const char* kind, const ChainStats& c) {
    std::printf("%-5s %-6s %-10s %10lld %10lld %8lld %10.3g %10.3g %6lld\n", dtype_name<D>(), chain, kind,
                static_cast<long long>(c.compared), static_cast<long long>(c.differing),
                static_cast<long long>(c.max_ulp), c.err_a, c.err_b, static_cast<long long>(c.nonfinite));
  };
  for (int which = 0; which < 2; ++which) {
    const ChainStats* st = which == 0 ? scores : pv;
    const char* chain = which == 0 ? "scores" : "pv";
    ChainStats all;
    for (int kd = 0; kd < kKinds; ++kd) {
      line(chain, kKindName[kd], st[kd]);
      all.merge(st[kd]);
    }
    line(chain, "ALL", all);
    // Judged on the random rows only: there no term is subnormal in f32, so a flushing tensor core
    // cannot pass for a broken layout.
    const ChainStats& plain = st[static_cast<int>(Kind::random)];
    if (plain.err_b > kBrokenErr || plain.err_a > kBrokenErr) {
      broken = true;
      std::printf("BROKEN: %s %s: way %s's error on random rows %.3g is far above f32 accumulation (descriptor, "
                  "layout or fragment mapping wrong)\n",
                  dtype_name<D>(), chain, plain.err_b > kBrokenErr ? "B (wgmma)" : "A (mma.sync)",
                  std::max(plain.err_a, plain.err_b));
      if (which == 0) diagnose("scores", ref_s0, b_s0, kHeads, "token", "head");
      else diagnose("pv", ref_o0, b_o0, kHeadDim, "pair*16+head", "dim");
    } else {
      std::printf("%s %s: %s\n", dtype_name<D>(), chain,
                  all.differing == 0 ? "BITS EQUAL: wgmma gives mma.sync's bits on every result"
                                     : "BITS DIFFER: wgmma and mma.sync disagree (both near the f64 sum)");
    }
  }
  return !broken;
}

// ---- time ---------------------------------------------------------------------------------------


// A token-major plane of `rows` rows x n_kv heads: boxes of 64 dims x 32 rows, 128-byte swizzle.
template <KvDtype D>
CUtensorMap plane_map(probe_host::EncodeTiled encode, const void* base, std::int64_t rows, int n_kv) {
  return probe_host::token_major_map(encode,
                                     D == KvDtype::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                                     base, rows, n_kv * kHeadDim, kBoxCols, kBoxRows);
}


struct Shape {
  const char* name;
  int seqs, tokens, slots_per_head, ctas;
};
constexpr int kNkv = 2;  // one layer of Muse Glimmer: 2 KV heads
// (a) and (b) read the same 33.5 MB in 256 x 4 tiles; (b) ends a slot every tile.
constexpr Shape kShapes[] = {
    {"a", 1, 32768, 128, 256},
    {"b", 16, 2048, 32, 256},
    {"c", 16, 32768, 128, 256},
};
constexpr std::size_t kRotateBytes = 256ull << 20;  // copies enough to leave L2 (50 MB) behind

// The host reference of wg's stand-in math for one slot: per head m (log2 units), s and o / s.
struct SlotCheck {
  double m_err = 0, s_err = 0, o_err = 0;
};
template <KvDtype D>
SlotCheck check_slot(const TimeWork& w, int flat, const KvWord* k_plane, const KvWord* v_plane,
                     const std::vector<float>& q, const std::vector<float>& part) {
  const SlotAt at = slot_at(w, flat);
  const int blocks = kBlocksPerTile * w.tiles_per_slot;
  const int rows = blocks * kBlockRows;
  std::vector<double> kr(static_cast<std::size_t>(rows) * kHeadDim), vr(kr.size());
  std::vector<KvWord> buf(kBlockRows * kNkv * kHeadDim);
  for (int b = 0; b < blocks; ++b) {
    const std::int64_t row0 = static_cast<std::int64_t>(at.seq) * w.tokens + slot_block(w, at, b) * kBlockRows;
    for (int plane = 0; plane < 2; ++plane) {
      PROBE_CHECK(cudaMemcpy(buf.data(), (plane ? v_plane : k_plane) + row0 * kNkv * kHeadDim, buf.size() * sizeof(KvWord),
                       cudaMemcpyDeviceToHost));
      for (int r = 0; r < kBlockRows; ++r)
        for (int d = 0; d < kHeadDim; ++d)
          (plane ? vr : kr)[(static_cast<std::size_t>(b) * kBlockRows + r) * kHeadDim + d] =
              dec<D>(buf[(r * kNkv + at.kvh) * kHeadDim + d]);
    }
  }
  SlotCheck c;
  const float* qh = &q[(static_cast<std::size_t>(at.seq) * w.n_kv + at.kvh) * kHeads * kHeadDim];
  for (int h = 0; h < kHeads; ++h) {
    std::vector<double> qs(kHeadDim);
    for (int d = 0; d < kHeadDim; ++d) {
      const float x = qh[h * kHeadDim + d];
      const KvWord hi = enc<D>(x);
      const KvWord lo = enc<D>(x - static_cast<float>(dec<D>(hi)));
      qs[d] = dec<D>(hi) + dec<D>(lo);
    }
    std::vector<double> x(rows);
    double m = -INFINITY;
    for (int t = 0; t < rows; ++t) {
      double acc = 0;
      for (int d = 0; d < kHeadDim; ++d) acc += kr[static_cast<std::size_t>(t) * kHeadDim + d] * qs[d];
      x[t] = acc * static_cast<double>(w.scale_log2);
      m = std::max(m, x[t]);
    }
    double s = 0;
    std::vector<double> o(kHeadDim, 0.0);
    for (int t = 0; t < rows; ++t) {
      const double p = std::exp2(x[t] - m);
      s += p;
      for (int d = 0; d < kHeadDim; ++d) o[d] += p * vr[static_cast<std::size_t>(t) * kHeadDim + d];
    }
    const float* got = &part[(static_cast<std::size_t>(flat) * kHeads + h) * kPartialFloats];
    c.m_err = std::max(c.m_err, std::fabs(got[0] - m) / (1.0 + std::fabs(m)));
    const double s_dev = got[1] * std::exp2(static_cast<double>(got[0]) - m);  // to the reference's max
    c.s_err = std::max(c.s_err, std::fabs(s_dev - s) / s);
    for (int d = 0; d < kHeadDim; ++d)
      c.o_err = std::max(c.o_err, std::fabs(got[2 + d] / got[1] - o[d] / s));  // V in [-1, 1]
  }
  return c;
}
constexpr double kMaxMErr = 1e-4, kMaxSErr = 1e-3, kMaxOErr = 1e-3;

// One timed kernel: its launch shape follows its layout.
struct TimedKernel {
  const char* name;
  void (*fn)(TimeWork, const TmaMaps);
  int wgs;                 // consumer warpgroups a CTA (walkers a CTA)
  int threads;
  std::size_t smem;
  bool wgmma;              // needs the sm_90a image; its partials are checked
};
template <class L>
TimedKernel timed(const char* name, void (*fn)(TimeWork, const TmaMaps), bool wgmma) {
  return TimedKernel{name, fn, L::kWgs, L::kThreads, ring_smem_bytes<L>(), wgmma};
}
// wg's walkers are the shape's CTAs (the schedule's 256); a layout of several warpgroups takes as
// many walkers as fill its CTAs on every SM (walks of k = ceil(slots / (SMs x warpgroups)) slots,
// ceil(slots / k) walkers), as tc_walk_extent would.
int ctas_for(const TimedKernel& k, const Shape& sh, int slots, int sms) {
  if (k.wgs == 1) return sh.ctas;
  const int per_walker = (slots + sms * k.wgs - 1) / (sms * k.wgs);
  const int walkers = (slots + per_walker - 1) / per_walker;
  return (walkers + k.wgs - 1) / k.wgs;
}

template <KvDtype D>
bool run_time(const std::vector<int>& shapes, const std::vector<std::string>& kernels, bool do_read, bool check,
              int reps, const std::vector<long long>& holds) {
  int has = 0;
  {
    int* d = nullptr;
    PROBE_CHECK(cudaMalloc(&d, sizeof(int)));
    arch_probe_kernel<<<1, 1>>>(d);
    PROBE_CHECK(cudaMemcpy(&has, d, sizeof(int), cudaMemcpyDeviceToHost));
    PROBE_CHECK(cudaFree(d));
  }
  const TimedKernel all[] = {
      timed<WgLayout>("ws", ws_kernel, false),
      timed<WgLayout>("wg", wgs_kernel<D, WgLayout>, true),
      timed<WgLayout>("wgp", wgp_kernel<D>, true),
      timed<WgLayout>("wgk", wgs_kernel<D, WgLayout, StageRelease::k_after_scores>, true),
      timed<Wgs2Layout>("wgs2", wgs_kernel<D, Wgs2Layout>, true),
      timed<Wgs3Layout>("wgs3", wgs_kernel<D, Wgs3Layout>, true),
      timed<Wgs4Layout>("wgs4", wgs_kernel<D, Wgs4Layout>, true),
  };
  std::vector<TimedKernel> run;
  for (const TimedKernel& k : all)
    if (std::find(kernels.begin(), kernels.end(), k.name) != kernels.end()) run.push_back(k);
  for (const TimedKernel& k : run)
    if (k.wgmma && !has) {
      std::fprintf(stderr, "the device runs the sm_90 image: no wgmma (needs sm_90a, an H100/H200)\n");
      std::exit(3);
    }
  const probe_host::EncodeTiled encode = probe_host::get_encode();
  int sms = 0;
  PROBE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::printf("dtype %s, %d SMs\n", dtype_name<D>(), sms);
  for (const TimedKernel& k : run) {
    PROBE_CHECK(cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(k.smem)));
    int occ = 0;
    PROBE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k.fn, k.threads, k.smem));
    cudaFuncAttributes fa{};
    PROBE_CHECK(cudaFuncGetAttributes(&fa, k.fn));
    std::printf("kernel %-5s %d warpgroups, %3d threads, smem %6zu B a CTA, %d CTAs per SM, %3d registers, %zu B local\n",
                k.name, k.wgs, k.threads, k.smem, occ, fa.numRegs, fa.localSizeBytes);
    if (occ < 1) {
      std::fprintf(stderr, "kernel %s cannot be resident\n", k.name);
      std::exit(2);
    }
  }
  unsigned* sink = nullptr;
  PROBE_CHECK(cudaMalloc(&sink, sizeof(unsigned)));
  bool ok = true;
  std::printf("%-8s %-6s %5s %6s %6s %6s %10s %10s %8s\n", "kernel", "shape", "seqs", "tokens", "slots", "ctas",
              "MB", "median_us", "GB/s");
  for (const int si : shapes) {
    const Shape& sh = kShapes[si];
    TimeWork w{};
    w.seqs = sh.seqs;
    w.tokens = sh.tokens;
    w.n_kv = kNkv;
    w.slots_per_head = sh.slots_per_head;
    const int blocks_per_head = sh.tokens / kBlockRows;
    w.tiles_per_slot = blocks_per_head / sh.slots_per_head / kBlocksPerTile;
    w.slots = sh.seqs * kNkv * sh.slots_per_head;
    w.scale_log2 = kLog2e / std::sqrt(static_cast<float>(kHeadDim));
    w.never = 1u;
    w.sink = sink;
    if (blocks_per_head % (sh.slots_per_head * kBlocksPerTile) != 0) {
      std::fprintf(stderr, "shape %s: slots must hold whole tiles\n", sh.name);
      std::exit(2);
    }
    const std::int64_t rows = static_cast<std::int64_t>(sh.seqs) * sh.tokens;
    const std::int64_t plane_elems = rows * kNkv * kHeadDim;
    const std::size_t plane_bytes = static_cast<std::size_t>(plane_elems) * sizeof(KvWord);
    const double bytes = 2.0 * static_cast<double>(plane_bytes);
    const int copies = std::max<int>(2, static_cast<int>((kRotateBytes + 2 * plane_bytes - 1) / (2 * plane_bytes)));
    // Copy c: K plane then V plane, contiguous (the read probe streams both as one run).
    KvWord* planes = nullptr;
    PROBE_CHECK(cudaMalloc(&planes, 2 * plane_bytes * copies));
    fill_plane_kernel<D><<<4 * sms, 256>>>(planes, 2 * plane_elems * copies, 0x5EEDull + si);
    PROBE_CHECK(cudaGetLastError());
    std::vector<TmaMaps> maps(copies);
    for (int c = 0; c < copies; ++c) {
      const KvWord* k = planes + 2 * plane_elems * c;
      maps[c] = TmaMaps{plane_map<D>(encode, k, rows, kNkv), plane_map<D>(encode, k + plane_elems, rows, kNkv)};
    }
    std::vector<float> q(static_cast<std::size_t>(sh.seqs) * kNkv * kHeads * kHeadDim);
    Rng rng{0x9000ull + si};
    for (float& x : q) x = static_cast<float>(rng.uni(-8, 8));  // scores spread ~2^+-8 apart
    float* qd = nullptr;
    float* partials = nullptr;
    const std::size_t part_floats = static_cast<std::size_t>(w.slots) * kHeads * kPartialFloats;
    PROBE_CHECK(cudaMalloc(&qd, q.size() * sizeof(float)));
    PROBE_CHECK(cudaMemcpy(qd, q.data(), q.size() * sizeof(float), cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMalloc(&partials, part_floats * sizeof(float)));
    w.q = qd;
    w.partials = partials;
    PROBE_CHECK(cudaDeviceSynchronize());

    auto report = [&](const char* kernel, int ctas, float us) {
      std::printf("%-8s %-6s %5d %6d %6d %6d %10.1f %10.2f %8.0f\n", kernel, sh.name, sh.seqs, sh.tokens, w.slots,
                  ctas, bytes / 1e6, us, bytes / (us * 1e3));
      std::fflush(stdout);
    };
    // Before timing: a kernel's partials of a few slots against an f64 host reference of the
    // stand-in math, and all of them against the first checked kernel's bits.
    std::vector<float> first_part;
    const char* first_name = nullptr;
    auto check_kernel = [&](const TimedKernel& k) {
      const int ctas = ctas_for(k, sh, w.slots, sms);
      PROBE_CHECK(cudaMemset(partials, 0xff, part_floats * sizeof(float)));
      k.fn<<<ctas, k.threads, k.smem>>>(w, maps[0]);
      PROBE_CHECK(cudaGetLastError());
      PROBE_CHECK(cudaDeviceSynchronize());
      std::vector<float> part(part_floats);
      PROBE_CHECK(cudaMemcpy(part.data(), partials, part.size() * sizeof(float), cudaMemcpyDeviceToHost));
      // The first slots of walker 0 (its second one restages q in the walking shapes), a middle
      // one, the last.
      std::vector<int> which = {0, 1, sh.ctas < w.slots ? sh.ctas : w.slots - 1, w.slots / 2 + 3, w.slots - 1};
      SlotCheck worst;
      for (int f : which) {
        const SlotCheck c = check_slot<D>(w, f, planes, planes + plane_elems, q, part);
        worst.m_err = std::max(worst.m_err, c.m_err);
        worst.s_err = std::max(worst.s_err, c.s_err);
        worst.o_err = std::max(worst.o_err, c.o_err);
      }
      const bool pass = worst.m_err <= kMaxMErr && worst.s_err <= kMaxSErr && worst.o_err <= kMaxOErr &&
                        std::isfinite(worst.m_err + worst.s_err + worst.o_err);
      std::printf("check  %-6s %s partials of %zu slots vs f64 stand-in: max m err %.2e, s rel err %.2e, o/s err "
                  "%.2e: %s\n",
                  sh.name, k.name, which.size(), worst.m_err, worst.s_err, worst.o_err, pass ? "PASS" : "FAIL");
      ok = ok && pass;
      // Every kernel keeps wg's accumulation order per slot: the partials should be the same bits.
      if (first_name == nullptr) {
        first_part = std::move(part);
        first_name = k.name;
        return;
      }
      std::size_t differ = 0;
      for (std::size_t i = 0; i < part.size(); ++i) differ += bits_of(part[i]) != bits_of(first_part[i]);
      std::printf("check  %-6s %s partials against %s's, all %zu floats: %zu differ in bits%s\n", sh.name, k.name,
                  first_name, part.size(), differ, differ ? " (FAIL: same math per slot)" : "");
      ok = ok && differ == 0;
    };
    if (check)
      for (const TimedKernel& k : run)
        if (k.wgmma) check_kernel(k);
    if (do_read) {
      // The library's read probe over the same bytes (K plane then V plane), best of 2, 4, 8 CTAs per SM.
      float best = 1e30f;
      for (int per_sm : {2, 4, 8})
        best = std::min(best, median_us(reps, [&](int i) {
                          PROBE_CHECK(lc::launch_read_stream(planes + 2 * plane_elems * (i % copies),
                                                       static_cast<std::int64_t>(2 * plane_bytes),
                                                       static_cast<unsigned>(per_sm * sms), 1u, sink, nullptr));
                        }));
      report("read", sms, best);
    }
    for (const TimedKernel& k : run) {
      const int ctas = ctas_for(k, sh, w.slots, sms);
      report(k.name, ctas, median_us(reps, [&](int i) { k.fn<<<ctas, k.threads, k.smem>>>(w, maps[i % copies]); }));
      if (std::strcmp(k.name, "ws") != 0) continue;
      for (const long long hold : holds) {
        TimeWork held = w;
        held.hold_cycles = hold;
        const std::string name = "ws@" + std::to_string(hold);
        report(name.c_str(), ctas,
               median_us(reps, [&](int i) { k.fn<<<ctas, k.threads, k.smem>>>(held, maps[i % copies]); }));
      }
    }
    PROBE_CHECK(cudaFree(planes));
    PROBE_CHECK(cudaFree(qd));
    PROBE_CHECK(cudaFree(partials));
  }
  PROBE_CHECK(cudaFree(sink));
  return ok;
}

// "a,b,,c" -> {"a", "b", "", "c"}: the items of a comma list as given (empty ones kept, so that the
// caller refuses them).
std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> items;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    items.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return items;
}

void usage(const char* argv0) {
  std::printf(
      "usage: %s bits [--trials N=4096] [--dtype f16|bf16|both=both]\n"
      "       %s time [--shape a|b|c|all=all] [--kernel LIST=all] [--reps N=20] [--dtype f16|bf16=f16]\n"
      "                [--no-check] [--hold CYCLES,...]\n"
      "\n"
      "bits  (design.md stage 1) the producer's score chain (8 k-steps of K.q_hi then K.q_lo, 64 tokens x 16\n"
      "      heads) and P.V chain (2 16-token steps of P_hi.V then P_lo.V per pair) by the producer's mma.sync\n"
      "      code (way A) and by wgmma.m64n16k16 from swizzled shared memory (way B), on random rows, rows with\n"
      "      subnormals, wide exponent spreads and cancelling sums. Columns: compared f32 results, results whose\n"
      "      bits differ, largest ulp distance, each way's largest error against an f64 sum of the same split\n"
      "      operands relative to the sum of the terms' magnitudes, non-finite results. 'BITS EQUAL' on every\n"
      "      chain: a wgmma port can be tested against today's bits. 'BROKEN' (exit 4): a way's error is far\n"
      "      above f32 rounding, i.e. a descriptor or fragment mapping is wrong.\n"
      "time  (design.md stage 2) one layer (2 KV heads, head_dim 128) through a 3-stage TMA ring filled by a\n"
      "      producer warp: ws = the ring alone, wg = the ring plus 32 wgmma a 64-token tile, a stand-in\n"
      "      softmax and a 16 x 130-float partial per slot; wgp = wg software-pipelined (tile u + 1's score\n"
      "      wgmma issued before tile u's softmax; at a slot end the next slot's q staged from registers and its\n"
      "      first scores issued before the partial), same math in the same order; read = the library's\n"
      "      streaming read of the same bytes. Shapes: a = 1 x 32768 tokens (256 CTAs, one 8-block slot each), b = 16 x 2048 (1024\n"
      "      two-block slots, 4 per CTA), c = 16 x 32768 (4096 8-block slots, 16 per CTA). Median of --reps\n"
      "      launches over copies of the planes that rotate past L2. wgs2, wgs3, wgs4 = wg's tile in 2, 3 or 4 consumer warpgroups of one CTA an SM,\n"
      "      sharing one ring of 6, 5 and 5 stages (each warpgroup walks its own slots; more consumer warps an SM\n"
      "      than wg's two CTAs hold). wgk = wg with each stage's K given back once the scores are computed and\n"
      "      its V after the P.V (K filled one tile ahead of V). LIST: comma-separated names of ws, wg, wgp, wgk,\n"
      "      wgs2, wgs3, wgs4, read, or all.\n"
      "      Every wgmma kernel's partials are checked against the f64 stand-in and against the first checked\n"
      "      kernel's bits (a slot's math does not depend on the layout): any FAIL exits 5.\n"
      "      --hold adds a ws row per cycle count: each consumer warp holds every tile that many clock\n"
      "      cycles (a spin on clock64) before releasing it, a stand-in for a tile's arithmetic.\n"
      "Needs an sm_90a device image (H100/H200): exits 3 when the device runs the sm_90 one.\n",
      argv0, argv0);
}

}  // namespace wgprobe

int main(int argc, char** argv) {
  using namespace wgprobe;
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage(argv[0]);
    return argc < 2 ? 2 : 0;
  }
  const std::string mode = argv[1];
  std::string dtype = mode == "bits" ? "both" : "f16";
  std::string shape = "all", kernel = "all";
  int trials = 4096, reps = 20;
  std::vector<long long> holds;
  bool check = true;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--trials") trials = std::atoi(value().c_str());
    else if (a == "--dtype") dtype = value();
    else if (a == "--shape") shape = value();
    else if (a == "--kernel") kernel = value();
    else if (a == "--reps") reps = std::atoi(value().c_str());
    else if (a == "--no-check") check = false;
    else if (a == "--hold") {
      for (const std::string& item : split_commas(value())) {
        const long long c = std::atoll(item.c_str());
        if (c <= 0) {
          std::fprintf(stderr, "--hold takes positive cycle counts\n");
          return 2;
        }
        holds.push_back(c);
      }
    }
    else {
      std::fprintf(stderr, "unknown argument %s (--help)\n", a.c_str());
      return 2;
    }
  }
  cudaDeviceProp prop{};
  PROBE_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  if (mode == "bits") {
    if (trials <= 0 || (dtype != "f16" && dtype != "bf16" && dtype != "both")) {
      usage(argv[0]);
      return 2;
    }
    constexpr int kBatch = 1024;
    std::printf("%-5s %-6s %-10s %10s %10s %8s %10s %10s %6s\n", "dtype", "chain", "inputs", "compared", "differing",
                "max_ulp", "err_A", "err_B", "nonfin");
    bool ok = true;
    if (dtype != "bf16") ok = run_bits<KvDtype::f16>(trials, kBatch) && ok;
    if (dtype != "f16") ok = run_bits<KvDtype::bf16>(trials, kBatch) && ok;
    return ok ? 0 : 4;
  }
  if (mode == "time") {
    std::vector<int> shapes;
    for (int s = 0; s < static_cast<int>(sizeof(kShapes) / sizeof(kShapes[0])); ++s)
      if (shape == "all" || shape == kShapes[s].name) shapes.push_back(s);
    static const char* const kKernelNames[] = {"ws", "wg", "wgp", "wgk", "wgs2", "wgs3", "wgs4", "read"};
    std::vector<std::string> kernels;
    if (kernel == "all") {
      kernels.assign(std::begin(kKernelNames), std::end(kKernelNames));
    } else {
      kernels = split_commas(kernel);
    }
    bool known = !kernels.empty();
    for (const std::string& k : kernels)
      known = known && std::find(std::begin(kKernelNames), std::end(kKernelNames), k) != std::end(kKernelNames);
    if (shapes.empty() || reps <= 0 || (dtype != "f16" && dtype != "bf16") || !known) {
      usage(argv[0]);
      return 2;
    }
    const bool rd = std::find(kernels.begin(), kernels.end(), "read") != kernels.end();
    const bool ok = dtype == "bf16" ? run_time<KvDtype::bf16>(shapes, kernels, rd, check, reps, holds)
                                    : run_time<KvDtype::f16>(shapes, kernels, rd, check, reps, holds);
    return ok ? 0 : 5;
  }
  usage(argv[0]);
  return 2;
}
