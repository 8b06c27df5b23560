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

}  // namespace ladder
