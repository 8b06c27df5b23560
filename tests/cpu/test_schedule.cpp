// G6: the pinned schedule — values at the rule's boundaries, and every block owned exactly once.
#include <gtest/gtest.h>

#include <vector>

#include "ladder/schedule.hpp"

namespace ladder {
namespace {

struct Expect {
  int visible, blocks, nwg, nsg;
};

// Worked by hand from SPEC G6: blocks = ceil(visible / 32); nwg = min(blocks, 32); nsg starts at
// 1 and doubles while 2 * nwg * nsg * 32 < visible and nsg < 4.
//   1      -> 1 block, 1 wg; 2*1*1*32 = 64 < 1 is false                      -> nsg 1
//   32     -> 1 block (exactly full), 1 wg; 64 < 32 false                     -> nsg 1
//   33     -> 2 blocks, 2 wgs; 2*2*1*32 = 128 < 33 false                      -> nsg 1
//   1024   -> 32 blocks, 32 wgs; 2*32*1*32 = 2048 < 1024 false                -> nsg 1
//   1025   -> 33 blocks, wgs capped at 32; 2048 < 1025 false                  -> nsg 1
//   2048   -> 64 blocks, 32 wgs; 2048 < 2048 false                            -> nsg 1
//   2049   -> 65 blocks, 32 wgs; 2048 < 2049 -> 2; 4096 < 2049 false          -> nsg 2
//   4096   -> 128 blocks, 32 wgs; 2048 < 4096 -> 2; 4096 < 4096 false         -> nsg 2
//   4097   -> 129 blocks, 32 wgs; -> 2; 4096 < 4097 -> 4; capped              -> nsg 4
//   8192   -> 256 blocks, 32 wgs; -> 2 -> 4; capped                           -> nsg 4
//   131072 -> 4096 blocks, 32 wgs; capped at 4                                -> nsg 4
constexpr Expect kBoundaries[] = {
    {1, 1, 1, 1},         {32, 1, 1, 1},       {33, 2, 2, 1},       {1024, 32, 32, 1},
    {1025, 33, 32, 1},    {2048, 64, 32, 1},   {2049, 65, 32, 2},   {4096, 128, 32, 2},
    {4097, 129, 32, 4},   {8192, 256, 32, 4},  {131072, 4096, 32, 4},
};

TEST(Schedule, PinnedValuesAtBoundaries) {
  for (const Expect& e : kBoundaries) {
    const Schedule s = pinned_schedule(e.visible);
    EXPECT_EQ(s.blocks, e.blocks) << "visible " << e.visible;
    EXPECT_EQ(s.nwg, e.nwg) << "visible " << e.visible;
    EXPECT_EQ(s.nsg, e.nsg) << "visible " << e.visible;
  }
  const Schedule empty = pinned_schedule(0);
  EXPECT_EQ(empty.blocks, 0);
  EXPECT_EQ(empty.nwg, 0);
}

// Every block is walked by exactly one (workgroup, warp), each walk is increasing, and no
// warp is launched empty.
void expect_exact_ownership(int visible) {
  const Schedule s = pinned_schedule(visible);
  std::vector<int> owners(static_cast<std::size_t>(s.blocks), 0);
  for (int w = 0; w < s.nwg; ++w)
    for (int g = 0; g < s.nsg; ++g) {
      int walked = 0, last = -1;
      for (int b = s.first_block(w, g); b < s.blocks; b += s.block_stride()) {
        ASSERT_GT(b, last);
        last = b;
        ++owners[static_cast<std::size_t>(b)];
        ++walked;
      }
      ASSERT_GT(walked, 0) << "visible " << visible << ": workgroup " << w << " warp " << g << " is empty";
    }
  for (int b = 0; b < s.blocks; ++b) ASSERT_EQ(owners[static_cast<std::size_t>(b)], 1) << "visible " << visible;
  ASSERT_GE(s.blocks * kBlockTokens, visible);
  ASSERT_LT((s.blocks - 1) * kBlockTokens, visible);
}

TEST(Schedule, EveryBlockOwnedExactlyOnce) {
  constexpr int kDenseSweep = 5000;
  constexpr int kMaxContext = 131072;
  for (int visible = 1; visible <= kDenseSweep; ++visible) {
    expect_exact_ownership(visible);
    if (HasFatalFailure()) return;
  }
  expect_exact_ownership(kMaxContext);
}

}  // namespace
}  // namespace ladder
