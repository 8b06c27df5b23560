// PlaneAllocator's allocation (include/ladder/plane_rows.hpp).
#include "ladder/plane_rows.hpp"

#include <cstdlib>
#include <limits>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ladder::detail {

void* plane_allocate(std::size_t bytes) {
  if (bytes < kHugePageMinBytes) {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  // aligned_alloc wants a multiple of the alignment; the tail of the last huge page is unused.
  if (bytes > std::numeric_limits<std::size_t>::max() - kHugePageBytes) throw std::bad_alloc();
  const std::size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, rounded);
  if (p == nullptr) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
  // Before the first touch (the vector fills the rows next): a refusal keeps ordinary pages.
  (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

void plane_free(void* p) noexcept { std::free(p); }

}  // namespace ladder::detail
