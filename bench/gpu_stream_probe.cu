// How fast can one SM stream a decode layer's KV tiles, by copy mechanism and plane layout?
// The tensor-core producer's copies alone read at ~0.67 of the read ceiling (docs/perf.md,
// change 9); this probe takes the arithmetic away entirely and times only the copy pattern of
// one layer: n_kv KV heads, `tokens` tokens, head_dim 128 in 2-byte elements, 32-token blocks,
// each block a K tile and a V tile of 32 rows x 256 B (16 KB per block). A CTA takes the blocks
// of one KV head, b = slot, slot + slots, ... (the producer's split), and "consumes" a block by
// reading one 16-byte word per thread from shared memory (or registers) into an xor that only
// escapes when it equals a value never passed, so no copy can be dropped.
//
// Mechanisms, each a separate kernel:
//   cpasync  16-byte cp.async.cg into per-pair rings of padded 272-byte rows, kStages deep, one
//            CTA barrier per block: the producer's copy path as it is.
//   ldg      the same 16-byte words loaded into registers (no shared memory).
//   tma      cp.async.bulk.tensor.2d: one thread issues a block's K and V tiles (box 64 elements
//            x 32 rows, 128-byte swizzle, two boxes per tile), an mbarrier per stage counts the
//            bytes; kTmaStages deep.
//   bulk     cp.async.bulk (1D) of a whole tile: only where a tile is one contiguous run
//            (head-major planes).
//   bulkrows the producer's rings (per pair, padded 272-byte rows, kStages deep) filled by one
//            cp.async.bulk (1D) per 256-byte row, a thread per row, an mbarrier per stage counting
//            the bytes: any layout (a ring's wrap is only another row address), and the padded
//            rows keep ldmatrix conflict-free without a swizzle.
// Layouts: token-major (row = token, the KV heads of a token side by side: the ring's layout)
// and head-major (row = (head, token): each head's tile is contiguous).
//
// Usage: ladder_stream_probe [tokens=131072] [n_kv=2] [reps=20]; prints one line per
// (mechanism, layout, CTAs per SM) with the median time and GB/s, and the library's own read
// probe (src/cuda/device.cu, what `ladder bench` measures its read ceiling with) as the reference.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda/kernels.hpp"
#include "probe_async.cuh"
#include "probe_host.hpp"

namespace {

using namespace probe_async;
using probe_host::median_us;

constexpr int kHeadDim = 128;
constexpr int kRowBytes = kHeadDim * 2;
constexpr int kBlockRows = 32;
constexpr int kTileBytes = kBlockRows * kRowBytes;  // 8 KB
constexpr int kPairThreads = 64;
constexpr int kPairs = 2;
constexpr int kThreads = kPairs * kPairThreads;
constexpr int kStages = 3;
constexpr int kPadRowBytes = kRowBytes + 16;
constexpr int kPadTileBytes = kBlockRows * kPadRowBytes;
constexpr int kWordsPerBlock = 2 * kTileBytes / 16;  // 1024 16-byte words: K tile then V tile
constexpr int kWordsPerRow = kRowBytes / 16;
constexpr int kSwizzleBytes = 128;  // a 128-byte swizzle span: the box's inner extent
constexpr int kBoxElems = kSwizzleBytes / 2;


// Where row r of KV head h starts, in bytes from the plane's base.
struct Layout {
  bool head_major;
  int tokens;
  int n_kv;
  __host__ __device__ std::int64_t row(int h, int r) const {
    return head_major ? (static_cast<std::int64_t>(h) * tokens + r) * kRowBytes
                      : (static_cast<std::int64_t>(r) * n_kv + h) * kRowBytes;
  }
};

struct Work {
  const char* k;
  const char* v;
  Layout layout;
  int slots;  // CTAs per KV head
  unsigned never;
  unsigned* sink;
  __device__ int blocks() const { return layout.tokens / kBlockRows; }
};

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void escape(const Work& w, unsigned acc) {
  if (acc == w.never) w.sink[0] = acc;
}

// ---- cp.async: the producer's copy path -----------------------------------------------------
__device__ __forceinline__ void issue_block(const Work& w, int h, int b, char* stage, int t) {
  for (int i = t; i < kWordsPerBlock; i += kPairThreads) {
    const int tile = i / (kWordsPerBlock / 2);
    const int r = (i % (kWordsPerBlock / 2)) / kWordsPerRow;
    const int c = i % kWordsPerRow;
    const char* src = (tile ? w.v : w.k) + w.layout.row(h, b * kBlockRows + r) + 16 * c;
    const unsigned dst = smem_u32(stage + tile * kPadTileBytes + r * kPadRowBytes + 16 * c);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
  }
}

template <int kDepth>
__global__ void __launch_bounds__(kThreads) cpasync_kernel(Work w) {
  extern __shared__ __align__(128) char smem[];
  const int h = blockIdx.x % w.layout.n_kv;
  const int slot = blockIdx.x / w.layout.n_kv;
  const int pair = threadIdx.x / kPairThreads;
  const int t = threadIdx.x % kPairThreads;
  char* ring = smem + pair * kDepth * 2 * kPadTileBytes;
  // Pair p takes this slot's blocks p, p + kPairs, ...; every pair runs the same trip count.
  const int mine = (w.blocks() / w.slots) / kPairs;
  auto block_of = [&](int i) { return slot + w.slots * (pair + kPairs * i); };
  for (int i = 0; i < kDepth - 1; ++i) {
    if (i < mine) issue_block(w, h, block_of(i), ring + i * 2 * kPadTileBytes, t);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
  unsigned acc = 0;
  for (int i = 0; i < mine; ++i) {
    const int next = i + kDepth - 1;
    if (next < mine) issue_block(w, h, block_of(next), ring + (next % kDepth) * 2 * kPadTileBytes, t);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kDepth - 1) : "memory");
    __syncthreads();
    const uint4 x = *reinterpret_cast<const uint4*>(ring + (i % kDepth) * 2 * kPadTileBytes + 16 * t);
    acc ^= x.x ^ x.w;
    __syncthreads();
  }
  escape(w, acc);
}

// ---- ldg: the same words into registers ------------------------------------------------------
__global__ void __launch_bounds__(kThreads) ldg_kernel(Work w) {
  const int h = blockIdx.x % w.layout.n_kv;
  const int slot = blockIdx.x / w.layout.n_kv;
  const int pair = threadIdx.x / kPairThreads;
  const int t = threadIdx.x % kPairThreads;
  const int mine = (w.blocks() / w.slots) / kPairs;
  unsigned acc = 0;
  for (int i = 0; i < mine; ++i) {
    const int b = slot + w.slots * (pair + kPairs * i);
    uint4 x[kWordsPerBlock / kPairThreads];
#pragma unroll
    for (int u = 0; u < kWordsPerBlock / kPairThreads; ++u) {
      const int idx = t + kPairThreads * u;
      const int tile = idx / (kWordsPerBlock / 2);
      const int r = (idx % (kWordsPerBlock / 2)) / kWordsPerRow;
      const int c = idx % kWordsPerRow;
      x[u] = __ldcg(reinterpret_cast<const uint4*>((tile ? w.v : w.k) + w.layout.row(h, b * kBlockRows + r) +
                                                   16 * c));
    }
#pragma unroll
    for (int u = 0; u < kWordsPerBlock / kPairThreads; ++u) acc ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
  }
  escape(w, acc);
}

// The ring's plane as a tensor map: boxes of kBoxElems dims x one block's rows.
CUtensorMap plane_map(probe_host::EncodeTiled encode, const void* base, int tokens, int n_kv) {
  return probe_host::token_major_map(encode, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, base, tokens, n_kv * kHeadDim, kBoxElems,
                                     kBlockRows);
}

// ---- tma: 2D tensor-map tiles with mbarriers --------------------------------------------------
struct TmaMaps {
  CUtensorMap k;
  CUtensorMap v;
};


// One stage: the K tile then the V tile, unpadded (the swizzle spreads the banks instead).
constexpr int kTmaStageBytes = 2 * kTileBytes;

template <bool kBulk1d>
__device__ __forceinline__ void tma_issue(const Work& w, const TmaMaps& maps, int h, int b, char* stage, unsigned bar) {
  mbar_expect(bar, kTmaStageBytes);
  if constexpr (kBulk1d) {
    bulk_1d(smem_u32(stage), w.k + w.layout.row(h, b * kBlockRows), kTileBytes, bar);
    bulk_1d(smem_u32(stage + kTileBytes), w.v + w.layout.row(h, b * kBlockRows), kTileBytes, bar);
  } else {
    // Token-major coordinates: x = element column (head h's 128 columns), y = token row.
    for (int half = 0; half < kHeadDim / kBoxElems; ++half) {
      const int x = h * kHeadDim + half * kBoxElems;
      tma_2d(smem_u32(stage + half * (kTileBytes / 2)), &maps.k, x, b * kBlockRows, bar);
      tma_2d(smem_u32(stage + kTileBytes + half * (kTileBytes / 2)), &maps.v, x, b * kBlockRows, bar);
    }
  }
}

template <bool kBulk1d, int kTmaStages>
__global__ void __launch_bounds__(kThreads) tma_kernel(Work w, const __grid_constant__ TmaMaps maps) {
  extern __shared__ __align__(1024) char smem_raw[];
  char* smem = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~std::uintptr_t{1023});
  __shared__ __align__(8) unsigned long long bars[kTmaStages];
  const int h = blockIdx.x % w.layout.n_kv;
  const int slot = blockIdx.x / w.layout.n_kv;
  const int mine = w.blocks() / w.slots;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kTmaStages; ++s) mbar_init(smem_u32(&bars[s]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int i = 0; i < kTmaStages && i < mine; ++i)
      tma_issue<kBulk1d>(w, maps, h, slot + w.slots * i, smem + i * kTmaStageBytes, smem_u32(&bars[i]));
  unsigned acc = 0;
  for (int i = 0; i < mine; ++i) {
    const int s = i % kTmaStages;
    mbar_wait(smem_u32(&bars[s]), (i / kTmaStages) & 1);
    const uint4 x = *reinterpret_cast<const uint4*>(smem + s * kTmaStageBytes + 16 * threadIdx.x);
    acc ^= x.x ^ x.w;
    __syncthreads();
    const int next = i + kTmaStages;
    if (threadIdx.x == 0 && next < mine)
      tma_issue<kBulk1d>(w, maps, h, slot + w.slots * next, smem + s * kTmaStageBytes, smem_u32(&bars[s]));
  }
  escape(w, acc);
}

// ---- bulkrows: the producer's rings, a 1D bulk copy per row ---------------------------------
// Thread t of a pair copies row t % 32 of the K tile (t < 32) or of the V tile; thread 0 tells
// the stage's mbarrier the block's bytes (the copies may land first: the barrier's transaction
// count may run negative until then).
__device__ __forceinline__ void issue_rows(const Work& w, int h, int b, char* stage, int t, unsigned bar) {
  if (t == 0) mbar_expect(bar, 2 * kTileBytes);
  const int tile = t / kBlockRows;
  const int r = t % kBlockRows;
  bulk_1d(smem_u32(stage + tile * kPadTileBytes + r * kPadRowBytes),
          (tile ? w.v : w.k) + w.layout.row(h, b * kBlockRows + r), kRowBytes, bar);
}

template <int kDepth>
__global__ void __launch_bounds__(kThreads) bulkrows_kernel(Work w) {
  static_assert(kPairThreads == 2 * kBlockRows, "a thread per row of the K and V tiles");
  extern __shared__ __align__(128) char smem[];
  __shared__ __align__(8) unsigned long long bars[kPairs][kDepth];
  const int h = blockIdx.x % w.layout.n_kv;
  const int slot = blockIdx.x / w.layout.n_kv;
  const int pair = threadIdx.x / kPairThreads;
  const int t = threadIdx.x % kPairThreads;
  char* ring = smem + pair * kDepth * 2 * kPadTileBytes;
  if (t == 0) {
    for (int s = 0; s < kDepth; ++s) mbar_init(smem_u32(&bars[pair][s]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int mine = (w.blocks() / w.slots) / kPairs;
  auto block_of = [&](int i) { return slot + w.slots * (pair + kPairs * i); };
  for (int i = 0; i < kDepth - 1 && i < mine; ++i)
    issue_rows(w, h, block_of(i), ring + i * 2 * kPadTileBytes, t, smem_u32(&bars[pair][i]));
  unsigned acc = 0;
  for (int i = 0; i < mine; ++i) {
    const int next = i + kDepth - 1;
    if (next < mine)
      issue_rows(w, h, block_of(next), ring + (next % kDepth) * 2 * kPadTileBytes, t,
                 smem_u32(&bars[pair][next % kDepth]));
    mbar_wait(smem_u32(&bars[pair][i % kDepth]), (i / kDepth) & 1);
    __syncthreads();
    const uint4 x = *reinterpret_cast<const uint4*>(ring + (i % kDepth) * 2 * kPadTileBytes + 16 * t);
    acc ^= x.x ^ x.w;
    __syncthreads();
  }
  escape(w, acc);
}




}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf(
        "usage: %s [tokens=131072: a multiple of 32] [n_kv=2] [reps=20]\n"
        "Times one decode layer's KV copy pattern (head_dim 128, 2-byte elements) under each copy mechanism\n"
        "and plane layout on GPU 0 (Hopper: the TMA kernels need sm_90), beside a contiguous read.\n",
        argv[0]);
    return 0;
  }
  const int tokens = argc > 1 ? std::atoi(argv[1]) : 131072;
  const int n_kv = argc > 2 ? std::atoi(argv[2]) : 2;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 20;
  if (tokens <= 0 || tokens % kBlockRows != 0 || n_kv <= 0 || reps <= 0) {
    std::fprintf(stderr, "usage: %s [tokens: a multiple of 32] [n_kv > 0] [reps > 0]\n", argv[0]);
    return 2;
  }
  int sms = 0;
  PROBE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const std::int64_t plane = static_cast<std::int64_t>(tokens) * n_kv * kRowBytes;
  const double bytes = 2.0 * static_cast<double>(plane);
  char* k = nullptr;
  char* v = nullptr;
  unsigned* sink = nullptr;
  PROBE_CHECK(cudaMalloc(&k, plane));
  PROBE_CHECK(cudaMalloc(&v, plane));
  PROBE_CHECK(cudaMalloc(&sink, sizeof(unsigned)));
  PROBE_CHECK(cudaMemset(k, 0x3c, plane));
  PROBE_CHECK(cudaMemset(v, 0x3b, plane));

  const probe_host::EncodeTiled encode = probe_host::get_encode();

  std::printf("tokens %d, n_kv %d, head_dim %d, %.1f MB per layer, %d SMs\n", tokens, n_kv, kHeadDim, bytes / 1e6, sms);
  std::printf("%-10s %-12s %6s %8s %10s %8s\n", "mechanism", "layout", "ctas", "slots", "median_us", "GB/s");
  auto report = [&](const char* mech, const char* layout, int ctas, int slots, float us) {
    std::printf("%-10s %-12s %6d %8d %10.2f %8.0f\n", mech, layout, ctas, slots, us, bytes / (us * 1e3));
  };

  char* both = nullptr;  // K and V in one run for the reference
  PROBE_CHECK(cudaMalloc(&both, 2 * plane));
  PROBE_CHECK(cudaMemset(both, 0x3c, 2 * plane));
  for (int per_sm : {2, 4, 8}) {
    const int ctas = per_sm * sms;
    report("read", "contiguous", ctas, 0, median_us(reps, [&] {
             PROBE_CHECK(ladder::cuda_detail::launch_read_stream(both, 2 * plane, static_cast<unsigned>(ctas), 1u, sink,
                                                          nullptr));
           }));
  }
  PROBE_CHECK(cudaFree(both));

  // Pipeline depths: the producer's (3 stages per pair, 6 TMA stages: two CTAs per SM) and a deep
  // one that fills an SM's shared memory with one CTA (6 per pair, 12 TMA stages).
  constexpr int kDeepStages = 6, kTmaShallow = 6, kTmaDeep = 12;
  const int cpasync_smem = kPairs * kStages * 2 * kPadTileBytes;
  const int cpasync_deep_smem = kPairs * kDeepStages * 2 * kPadTileBytes;
  const int tma_smem = kTmaShallow * kTmaStageBytes + 1024;
  const int tma_deep_smem = kTmaDeep * kTmaStageBytes + 1024;
  PROBE_CHECK(cudaFuncSetAttribute(cpasync_kernel<kStages>, cudaFuncAttributeMaxDynamicSharedMemorySize, cpasync_smem));
  PROBE_CHECK(cudaFuncSetAttribute(cpasync_kernel<kDeepStages>, cudaFuncAttributeMaxDynamicSharedMemorySize, cpasync_deep_smem));
  PROBE_CHECK(cudaFuncSetAttribute(bulkrows_kernel<kStages>, cudaFuncAttributeMaxDynamicSharedMemorySize, cpasync_smem));
  PROBE_CHECK(cudaFuncSetAttribute(bulkrows_kernel<kDeepStages>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             cpasync_deep_smem));
  PROBE_CHECK(cudaFuncSetAttribute(tma_kernel<false, kTmaShallow>, cudaFuncAttributeMaxDynamicSharedMemorySize, tma_smem));
  PROBE_CHECK(cudaFuncSetAttribute(tma_kernel<false, kTmaDeep>, cudaFuncAttributeMaxDynamicSharedMemorySize, tma_deep_smem));
  PROBE_CHECK(cudaFuncSetAttribute(tma_kernel<true, kTmaShallow>, cudaFuncAttributeMaxDynamicSharedMemorySize, tma_smem));
  const int blocks = tokens / kBlockRows;
  for (int head_major = 0; head_major <= 1; ++head_major) {
    const Layout layout{head_major != 0, tokens, n_kv};
    const char* lname = head_major ? "head-major" : "token-major";
    const TmaMaps maps{plane_map(encode, k, tokens, n_kv), plane_map(encode, v, tokens, n_kv)};
    // Slots per KV head: powers of two that divide the blocks evenly (and by kPairs for the pairs).
    for (int slots = 32; slots <= 512 && blocks % (slots * kPairs) == 0; slots *= 2) {
      const int ctas = slots * n_kv;
      const Work w{k, v, layout, slots, 1u, sink};
      report("cpasync", lname, ctas, slots, median_us(reps, [&] {
               cpasync_kernel<kStages><<<ctas, kThreads, cpasync_smem>>>(w);
             }));
      report("cpasync6", lname, ctas, slots, median_us(reps, [&] {
               cpasync_kernel<kDeepStages><<<ctas, kThreads, cpasync_deep_smem>>>(w);
             }));
      report("ldg", lname, ctas, slots, median_us(reps, [&] { ldg_kernel<<<ctas, kThreads>>>(w); }));
      report("bulkrows", lname, ctas, slots, median_us(reps, [&] {
               bulkrows_kernel<kStages><<<ctas, kThreads, cpasync_smem>>>(w);
             }));
      report("bulkrows6", lname, ctas, slots, median_us(reps, [&] {
               bulkrows_kernel<kDeepStages><<<ctas, kThreads, cpasync_deep_smem>>>(w);
             }));
      if (head_major) {
        report("bulk1d", lname, ctas, slots, median_us(reps, [&] {
                 tma_kernel<true, kTmaShallow><<<ctas, kThreads, tma_smem>>>(w, maps);
               }));
      } else {
        report("tma2d", lname, ctas, slots, median_us(reps, [&] {
                 tma_kernel<false, kTmaShallow><<<ctas, kThreads, tma_smem>>>(w, maps);
               }));
        report("tma2d12", lname, ctas, slots, median_us(reps, [&] {
                 tma_kernel<false, kTmaDeep><<<ctas, kThreads, tma_deep_smem>>>(w, maps);
               }));
      }
    }
  }
  PROBE_CHECK(cudaFree(k));
  PROBE_CHECK(cudaFree(v));
  PROBE_CHECK(cudaFree(sink));
  return 0;
}
