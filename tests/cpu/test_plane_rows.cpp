// A plane's row storage (include/ladder/plane_rows.hpp): large allocations start on a huge-page
// boundary (what the kernel needs to back them with huge pages), small ones are ordinary, the
// rows behave as a vector's, and a count whose bytes overflow is std::bad_alloc.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <new>
#include <string>
#include <utility>

#include "ladder/plane.hpp"
#include "ladder/plane_rows.hpp"

namespace ladder::test {
namespace {

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
constexpr std::size_t kWordsPerHugePage = detail::kHugePageBytes / sizeof(KvWord);
constexpr std::size_t kWordsAtThreshold = detail::kHugePageMinBytes / sizeof(KvWord);

TEST(PlaneRows, LargeRowsStartOnAHugePageBoundary) {
  for (const std::size_t words : {kWordsAtThreshold, kWordsAtThreshold + 1, kWordsPerHugePage, kWordsPerHugePage + 1,
                                  5 * kWordsPerHugePage + 123}) {
    PlaneRows rows(words, KvWord{0x1234});
    EXPECT_EQ(address(rows.data()) % detail::kHugePageBytes, 0u) << words << " words";
    EXPECT_EQ(rows.front(), KvWord{0x1234});
    EXPECT_EQ(rows.back(), KvWord{0x1234});
  }
}

TEST(PlaneRows, SmallRowsAndCopiesHoldTheirValues) {
  PlaneRows small(100);
  for (std::size_t i = 0; i < small.size(); ++i) small[i] = static_cast<KvWord>(i * 7 + 1);
  PlaneRows big(kWordsPerHugePage + 17);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<KvWord>(i % 65521);
  const PlaneRows small_copy = small;
  PlaneRows big_copy = big;
  EXPECT_EQ(small_copy, small);
  EXPECT_EQ(big_copy, big);
  EXPECT_EQ(address(big_copy.data()) % detail::kHugePageBytes, 0u);
  const PlaneRows moved = std::move(big_copy);
  EXPECT_EQ(moved, big);
}

// /proc/self/smaps' entry for the mapping holding `p`: its "start-end" line and VmFlags, or
// empty strings when nothing maps it.
struct Mapping {
  std::string range, flags;
};
Mapping mapping_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  Mapping m;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = address(p) >= lo && address(p) < hi;
      if (inside) m.range = line;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      m.flags = line;
    }
  }
  return m;
}

// Change 76: on Linux a large plane is a mapping of its own, asked for huge pages (VmFlags "hg")
// before its first touch, and gone when the rows are freed, so the next plane starts on fresh
// pages, not on heap memory that earlier planes faulted on small pages.
TEST(PlaneRows, LargeRowsAreMappingsOfTheirOwnAskedForHugePages) {
  if (!detail::planes_are_own_mappings())
    GTEST_SKIP() << "this build keeps the allocator (not Linux, or AddressSanitizer, whose redzones check plane bounds)";
  // A larger plane freed first: under glibc's allocator that raised its mmap threshold, and the
  // next, smaller plane came from the heap.
  { PlaneRows larger(6 * kWordsPerHugePage, KvWord{3}); }
  const void* where = nullptr;
  {
    PlaneRows rows(3 * kWordsPerHugePage + 5, KvWord{7});
    where = rows.data();
    const Mapping m = mapping_of(where);
    ASSERT_FALSE(m.range.empty()) << "no mapping holds the rows";
    EXPECT_NE((" " + m.flags + " ").find(" hg "), std::string::npos) << m.range << "\n" << m.flags;
  }
  EXPECT_TRUE(mapping_of(where).range.empty()) << "the rows' pages are still mapped after they were freed";
}

// A count whose bytes (or their rounding to huge pages) overflow is refused before anything is
// asked of the system (sizes the system refuses are std::bad_alloc from a refused mapping or
// aligned_alloc's null; not tried here: the sanitizer builds abort on such a request instead of
// returning null).
TEST(PlaneRows, ACountWhoseBytesOverflowIsBadAlloc) {
  PlaneAllocator<KvWord> alloc;
  EXPECT_THROW((void)alloc.allocate(std::numeric_limits<std::size_t>::max() / sizeof(KvWord) + 1), std::bad_alloc);
  // Bytes that fit but whose rounding up to whole huge pages would wrap around.
  EXPECT_THROW((void)alloc.allocate(std::numeric_limits<std::size_t>::max() / sizeof(KvWord)), std::bad_alloc);
}

// A ring plane of `window` = capacity rows, 2 KV heads x 128 dims: its K and V rows, `bytes` each,
// start on huge-page boundaries.
void expect_ring_on_huge_pages(int window, std::size_t bytes) {
  PlaneConfig cfg;
  cfg.kind = PlaneKind::ring;
  cfg.n_kv_heads = 2;
  cfg.head_dim = 128;
  cfg.window = window;
  cfg.capacity = window;
  cfg.max_context = 1 << 20;
  Result<HostPlane> plane = HostPlane::create(cfg);
  ASSERT_TRUE(plane.ok()) << plane.status().to_string();
  ASSERT_EQ(plane->elements() * sizeof(KvWord), bytes) << "the plane this test is about";
  EXPECT_EQ(address(plane->k()) % detail::kHugePageBytes, 0u);
  EXPECT_EQ(address(plane->v()) % detail::kHugePageBytes, 0u);
}

TEST(PlaneRows, AHostPlaneOfADeepRingIsOnHugePageBoundaries) {
  expect_ring_on_huge_pages(32768, 8 * detail::kHugePageBytes);
}

// Muse Glimmer's sliding-window plane (window 2,048): 1 MiB of K and 1 MiB of V, each at the
// threshold (change 62).
TEST(PlaneRows, AHostPlaneOfAWindow2048RingIsOnHugePageBoundaries) {
  expect_ring_on_huge_pages(2048, detail::kHugePageMinBytes);
}

}  // namespace
}  // namespace ladder::test
