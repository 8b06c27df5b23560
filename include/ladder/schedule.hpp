// G6: the chapter's pinned split-K schedule (llama.cpp's Metal launch rule), shared by every
// route's producer on CPU and GPU. It is a function of the sequence's own visible length only
// — never of batch composition, SM count or load — which is what makes P4 possible.
#pragma once

#include "ladder/hd.hpp"
#include "ladder/heuristics.hpp"

namespace ladder {

// kBlockTokens, kMaxWorkgroups and kMaxWarpsPerWorkgroup live in heuristics.hpp with their reasons.

struct Schedule {
  int blocks = 0;  // ceil(visible / 32)
  int nwg = 0;     // workgroups per head: min(blocks, 32)
  int nsg = 0;     // warps per workgroup: 1, 2 or 4

  // Block b is owned by the (workgroup, warp) pair whose flat slot is b % (nwg * nsg);
  // slot = workgroup * nsg + warp. Each owner walks its blocks in increasing order.
  LADDER_HD int slots() const { return nwg * nsg; }
  LADDER_HD int first_block(int workgroup, int warp) const { return workgroup * nsg + warp; }
  LADDER_HD int block_stride() const { return nwg * nsg; }
};

LADDER_HD Schedule pinned_schedule(int visible) {
  Schedule s;
  if (visible <= 0) return s;
  s.blocks = (visible + kBlockTokens - 1) / kBlockTokens;
  s.nwg = s.blocks < kMaxWorkgroups ? s.blocks : kMaxWorkgroups;
  s.nsg = 1;
  while (2 * s.nwg * s.nsg * kBlockTokens < visible && s.nsg < kMaxWarpsPerWorkgroup) s.nsg *= 2;
  return s;
}

// The GPU tensor-core producer's partition (src/cuda/producer_tc.cuh): pinned_schedule with
// its warp slots halved (nsg first, then nwg) while a slot holds fewer than kTcMinSlotBlocks
// blocks on average and the halved count still gives a layer kTcMinLayerCtas CTAs at batch 1;
// ctas_per_slot = KV heads x tiles of 16 sibling query heads (the CTAs that fold one slot).
// heuristics.hpp gives the measured reason. Like pinned_schedule it is a function of the
// sequence's own visible length and the model's shape only, never of the batch (P4). It never
// has more slots than pinned_schedule at the same or any longer length (the scratch every route
// reserves holds its partials, and a batched launch sized by the longest sequence's pinned
// slots covers every entry), and every slot owns at least one block.
LADDER_HD Schedule tc_schedule(int visible, int ctas_per_slot) {
  Schedule s = pinned_schedule(visible);
  while (s.blocks < kTcMinSlotBlocks * s.slots() && ctas_per_slot * (s.slots() / 2) >= kTcMinLayerCtas) {
    if (s.nsg > 1)
      s.nsg /= 2;
    else
      s.nwg = (s.nwg + 1) / 2;
  }
  return s;
}

// The tensor-core path's merge shape over schedule s (kernel_params.hpp, steps 4 and 5): its
// slots() warp slots form `groups` fold groups of `parts` slots each, group j holding slots j,
// j + groups, j + 2 groups, ... (interleaved: a walking CTA that folds groups y, y + ctas, ...
// reads, at any moment, blocks next to those the launch's other CTAs read, as a strided walk
// over single slots does). Step 4 folds a group's slots left in that order into one state,
// step 5 merges the groups. parts is kTcFoldSlots, halved until it divides the slots. A function
// of the schedule only, so of the sequence's own visible length (P4).
static_assert(kTcFoldSlots >= 1 && kTcFoldSlots <= kMaxWarpsPerWorkgroup && (kTcFoldSlots & (kTcFoldSlots - 1)) == 0,
              "a fold group's parts are a count the reducer is instantiated for (1, 2 or 4)");
struct FoldGroups {
  int groups = 0;  // states merged by step 5
  int parts = 0;   // warp slots folded into each (step 4)
  // Warp slot of part g of group j, and back: the group of warp slot `flat`.
  LADDER_HD int slot(int j, int g) const { return g * groups + j; }
  LADDER_HD int group_of(int flat) const { return flat % groups; }
};
LADDER_HD FoldGroups tc_fold_groups(const Schedule& s) {
  int parts = kTcFoldSlots;
  while (parts > 1 && s.slots() % parts != 0) parts /= 2;
  return FoldGroups{s.slots() / parts, parts};
}

}  // namespace ladder
