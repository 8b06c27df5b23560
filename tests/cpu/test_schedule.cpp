// G6: the pinned schedule — values at the rule's boundaries, and every block owned exactly once.
#include <gtest/gtest.h>

#include <algorithm>
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

// The tensor-core partition (tc_schedule), worked by hand for Muse Glimmer (2 KV heads x one
// tile of 16 sibling heads: 2 CTAs per slot): halve while blocks < 4 x slots and 2 x slots / 2 >= 128.
//   2048   -> pinned 32 x 1 (64 blocks); 2 x 16 = 32 < 128                   -> pinned
//   4096   -> pinned 32 x 2 (128 blocks); 2 x 32 = 64 < 128                  -> pinned
//   4097   -> pinned 32 x 4 (129 blocks); 129 < 512, 2 x 64 = 128 -> nsg 2;
//             129 < 256 but 2 x 32 = 64 < 128                                -> 32 x 2
//   8192   -> pinned 32 x 4 (256 blocks) -> 32 x 2; 256 < 256 false          -> 32 x 2
//   16384  -> pinned 32 x 4 (512 blocks); 512 < 512 false                    -> pinned
//   131072 -> pinned                                                          -> 32 x 4
// With 8 CTAs per slot (8 KV heads, up to 16 sibling heads each), 2048 tokens (64 blocks, 32 x 1):
// 64 < 128 and 8 x 16 = 128 -> nwg 16; 64 < 64 false -> 16 x 1.
struct TcExpect {
  int visible, ctas_per_slot, nwg, nsg;
};
constexpr TcExpect kTcValues[] = {
    {2048, 2, 32, 1},  {4096, 2, 32, 2},   {4097, 2, 32, 2},   {8192, 2, 32, 2},
    {16384, 2, 32, 4}, {131072, 2, 32, 4}, {2048, 8, 16, 1},   {8192, 1, 32, 4},
};

TEST(Schedule, TensorCoreValues) {
  for (const TcExpect& e : kTcValues) {
    const Schedule s = tc_schedule(e.visible, e.ctas_per_slot);
    EXPECT_EQ(s.blocks, pinned_schedule(e.visible).blocks) << "visible " << e.visible;
    EXPECT_EQ(s.nwg, e.nwg) << "visible " << e.visible << ", " << e.ctas_per_slot << " CTAs per slot";
    EXPECT_EQ(s.nsg, e.nsg) << "visible " << e.visible << ", " << e.ctas_per_slot << " CTAs per slot";
  }
}

// What the GPU relies on, at every length and shape: no more slots than the pinned schedule at
// the same or any longer length (the scratch, and a batched grid sized by the longest
// sequence), every block owned once and no slot empty, nsg a power of two within the reducer's
// limit, and never fewer than kTcMinLayerCtas CTAs where the pinned schedule had twice that.
TEST(Schedule, TensorCorePartitionsFitWhatTheGpuReserves) {
  constexpr int kMaxVisible = 20000;
  for (const int ctas : {1, 2, 3, 4, 8, 16, 64}) {
    int most_slots_so_far = 0;
    for (int visible = 1; visible <= kMaxVisible; ++visible) {
      const Schedule s = tc_schedule(visible, ctas);
      const Schedule pinned = pinned_schedule(visible);
      most_slots_so_far = std::max(most_slots_so_far, s.slots());
      ASSERT_LE(most_slots_so_far, pinned.slots()) << "visible " << visible << ", " << ctas << " CTAs per slot";
      ASSERT_TRUE(s.nsg == 1 || s.nsg == 2 || s.nsg == 4) << visible;
      ASSERT_GE(s.nwg, 1) << visible;
      ASSERT_LE(s.nwg, kMaxWorkgroups) << visible;
      ASSERT_LE(s.slots(), s.blocks) << "visible " << visible << ": an empty slot";
      if (s.slots() < pinned.slots()) {
        ASSERT_GE(ctas * s.slots(), kTcMinLayerCtas) << visible;
      }
    }
  }
}

}  // namespace
}  // namespace ladder
