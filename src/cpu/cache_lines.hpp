// What the CPU producers and the reducer tell __builtin_prefetch, spelled once: the cache line
// they step by, the intent (read or write) and the locality (how close to the core the line is
// asked for). The builtin's arguments are spelled the same by GCC and clang, unlike
// _mm_prefetch's hint type.
#pragma once

namespace ladder::cpu::detail {

// Every x86-64 core ladder builds for (AVX2 and AVX-512 paths alike) has 64-byte lines.
inline constexpr int kCacheLineBytes = 64;

// __builtin_prefetch's second argument.
inline constexpr int kPrefetchRead = 0;
inline constexpr int kPrefetchWrite = 1;

// __builtin_prefetch's third argument: 2 asks for the line into L2 (`prefetcht1`), 3 into L1 as
// well (`prefetcht0`).
inline constexpr int kIntoL2 = 2;
inline constexpr int kIntoL1 = 3;

}  // namespace ladder::cpu::detail
