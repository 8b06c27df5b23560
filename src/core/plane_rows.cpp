// PlaneAllocator's allocation (include/ladder/plane_rows.hpp).
#include "ladder/plane_rows.hpp"

#include <cstdint>
#include <cstdlib>
#include <limits>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ladder::detail {

namespace {

// Whole huge pages; plane_allocate refuses the sizes whose rounding (and over-mapping) would wrap.
std::size_t huge_rounded(std::size_t bytes) { return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes; }

// Large planes are mappings of their own on Linux: glibc serves a large aligned_alloc by a fresh
// mapping only until a freed one raises its mmap threshold (up to 32 MiB); after that a smaller
// plane came from heap memory that earlier planes had faulted on 4 KiB pages, which MADV_HUGEPAGE
// does not convert (PlaneRows.LargeRowsAreMappingsOfTheirOwnAskedForHugePages). Neutral on the
// bench's rows, whose planes at one depth are all one size (docs/perf.md, change 76). ASan builds
// keep the allocator, whose redzones check the planes' bounds.
#if defined(__SANITIZE_ADDRESS__)
#define LADDER_PLANES_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LADDER_PLANES_ASAN 1
#endif
#endif
#if defined(__linux__) && defined(MADV_HUGEPAGE) && !defined(LADDER_PLANES_ASAN)
#define LADDER_PLANES_OWN_MAPPINGS 1

void* map_huge(std::size_t rounded) {
  // Over-map by one huge page, then unmap the unaligned head and the tail beyond `rounded`.
  const std::size_t span = rounded + kHugePageBytes;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (base + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > base) munmap(raw, aligned - base);
  const std::size_t tail = base + span - (aligned + rounded);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + rounded), tail);
  void* p = reinterpret_cast<void*>(aligned);
  // Before the first touch (the vector fills the rows next): a refusal keeps ordinary pages.
  (void)madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}
#endif

}  // namespace

void* plane_allocate(std::size_t bytes) {
  if (bytes < kHugePageMinBytes) {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  // Whole huge pages from a huge-page boundary; the tail of the last one is unused.
  if (bytes > std::numeric_limits<std::size_t>::max() - 2 * kHugePageBytes) throw std::bad_alloc();
  const std::size_t rounded = huge_rounded(bytes);
#if defined(LADDER_PLANES_OWN_MAPPINGS)
  return map_huge(rounded);
#else
  void* p = std::aligned_alloc(kHugePageBytes, rounded);
  if (p == nullptr) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
  (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
#endif
}

void plane_free(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
#if defined(LADDER_PLANES_OWN_MAPPINGS)
  if (bytes >= kHugePageMinBytes) {
    munmap(p, huge_rounded(bytes));
    return;
  }
#endif
  std::free(p);
}

bool planes_are_own_mappings() noexcept {
#if defined(LADDER_PLANES_OWN_MAPPINGS)
  return true;
#else
  return false;
#endif
}

}  // namespace ladder::detail
