// The storage of a host plane's rows (HostPlane, PreparedAppend): a std::vector whose large
// allocations sit on transparent huge pages where the kernel offers them on request.
//
// A Muse Glimmer layer's K and V streams at 32,768 tokens cross a 4 KiB page every 8 to 16 tokens,
// and a decode step's planes are far beyond what the TLB maps; on a kernel that gives huge pages
// only on request (/sys/kernel/mm/transparent_hugepage/enabled = madvise, the build machine's),
// glibc's own tunable for it (GLIBC_TUNABLES=glibc.malloc.hugetlb=1) sped the single layers at
// 32,768 up by 4-10 % on one worker (docs/perf.md, 2026-12-04, "huge pages"). The allocator does
// that for the planes alone: an allocation of at least kHugePageMinBytes is a mapping of its own
// (fresh pages, whatever was freed before: docs/perf.md change 76), starts on a huge-page
// boundary, is rounded up to whole huge pages and is asked for huge pages before anything
// touches it; a refusal (another OS, THP off) leaves ordinary pages. Smaller planes are allocated
// as before. The rows' values and every computation on them are unchanged.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

#include "ladder/kv_dtype.hpp"

namespace ladder {

namespace detail {
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;  // x86-64 and AArch64 (4 KiB base pages)
// The smallest allocation put on huge pages: half of one. A ring of window 2,048 with 2 KV heads
// (Muse Glimmer's 39 sliding-window layers) has K and V planes of 1 MiB each, which at a 2 MiB
// threshold stayed on 4 KiB pages: its tasks ran 13 % slower than an 8,192-token ring's of the
// same work, and vec/ring at 2,048 took 242 us against 211-216 with this threshold (2-vCPU Zen 5,
// one worker; docs/perf.md, change 62). The deficit: a plane of 1 to 2 MiB occupies a whole
// 2 MiB page once touched, up to twice its bytes (78 MiB more for those 39 layers of one
// sequence).
inline constexpr std::size_t kHugePageMinBytes = kHugePageBytes / 2;
// Throws std::bad_alloc; a zero-byte request returns a unique non-null pointer.
void* plane_allocate(std::size_t bytes);
// `bytes` is what plane_allocate was asked for.
void plane_free(void* p, std::size_t bytes) noexcept;
// Whether this build gives each allocation of at least kHugePageMinBytes a mapping of its own
// (Linux, not under AddressSanitizer, which keeps the allocator's redzones); else aligned_alloc.
bool planes_are_own_mappings() noexcept;
}  // namespace detail

template <class T>
struct PlaneAllocator {
  using value_type = T;
  PlaneAllocator() = default;
  template <class U>
  PlaneAllocator(const PlaneAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(detail::plane_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { detail::plane_free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PlaneAllocator<U>&) const noexcept {
    return true;
  }
};

// A plane's K or V rows.
using PlaneRows = std::vector<KvWord, PlaneAllocator<KvWord>>;

}  // namespace ladder
