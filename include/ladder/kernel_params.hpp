// The parameter structs every kernel family takes, CPU twin and CUDA kernel alike (one struct
// per kernel, not thirty positional ints). Shapes at the boundary:
//   q, out      : f32 [n_heads][head_dim]
//   cur_k/cur_v : f32 [n_kv_heads][head_dim]         (this token's activations)
//   planes      : KvWord elements of a KvDtype (kv_dtype.hpp), addressed by PlaneStrides (plane.hpp)
//   partials    : f32 [n_heads][parts][groups][2 + head_dim]  (m, s, o[head_dim]) per (head,
//                 part, group): groups = nwg and parts = 1 when the producer merged each
//                 workgroup's warps (step 4); on the tensor-core path groups and parts are
//                 tc_fold_groups (schedule.hpp), parts = 1 where a walking CTA folded its group
//
// THE PRODUCER DAG (shared by every producer family, CPU twin and CUDA kernel, so that their
// bits can agree; any change here is a change to both):
//  1. Schedule = pinned_schedule(visible). Head h, workgroup w, warp g walks blocks
//     b = w*nsg + g, b += nwg*nsg, in increasing order. Block b covers tokens
//     [32b, 32b + count), count = min(32, visible - 32b).
//  2. Score of token t for head h: the head_dim dims are dealt to 32 lanes in chunks of 4
//     (dims 4c..4c+3 belong to lane c % 32). Each lane accumulates its dims in increasing d,
//     acc = fmaf(q[d], k[d], acc) from acc = 0. Then a butterfly over lanes: for off = 16, 8,
//     4, 2, 1: acc[l] = acc[l] + acc[l ^ off]; the score is acc[0] * scale.
//  3. Per block: block_max = max of its scores; corr = fold_block_max(stats, block_max);
//     o[d] *= corr for every d; then for each token in increasing t:
//     w = score_weight(stats, score); stats.s += w; o[d] = fmaf(w, v[d], o[d]).
//  4. A workgroup merges its warps' (m, s, o) in warp order with the rule of softmax.hpp
//     (M = max m_g; c_g = rescale_factor(m_g, M); S = fmaf(s_g, c_g, S); O = fmaf(o_g, c_g, O),
//     S and O starting at 0) and writes [M, S, O] to partials[(h*nwg + w)*(2 + head_dim)].
//  5. The reducer merges workgroups 0..nwg-1 of a head by the same rule and writes O[d] / S.
// The GPU tensor-core path (producer_tc.cuh) has its own in-block arithmetic and its own merge
// shape: its step 4 folds each fold group's warp slots left in part order (softmax.hpp's
// fold_in; group j of tc_fold_groups(sched) is slots j, j + groups, ..., parts of them), and
// step 5 merges the groups by the rule above. Its producer writes each slot's (m, s, o) unmerged
// (parts = the group's slots) and the reducer folds them, or a walking CTA holding whole groups
// folds them itself (parts = 1): the same operations in the same order, so the same bits.
// The interleaved producer reads token visible-1 from cur_k/cur_v (f32) instead of the plane;
// everything else is identical, which is why the parity ledger can name its only difference.
#pragma once

#include <cstdint>

#include "ladder/hd.hpp"
#include "ladder/plane.hpp"
#include "ladder/schedule.hpp"

namespace ladder {

struct HeadShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 0.0f;  // 1/sqrt(head_dim)
  LADDER_HD int heads_per_kv() const { return n_heads / n_kv_heads; }
  LADDER_HD int kv_head_of(int head) const { return head / heads_per_kv(); }
};
LADDER_HD int partial_stride(int head_dim) { return 2 + head_dim; }

// The GPU tensor-core producer's M tile (mma.m16n8k16): the sibling query heads of one KV head
// that one CTA carries. heads_per_kv < 16 pads the tile with zero rows; more uses several tiles.
inline constexpr int kTcHeads = 16;
LADDER_HD int tc_tiles(int heads_per_kv) { return (heads_per_kv + kTcHeads - 1) / kTcHeads; }
// The CTAs that fold one warp slot of the tensor-core kernels (their grid's x): KV heads x tiles.
// tc_schedule's ctas_per_slot, and the fused kernel's arrival-counter groups.
LADDER_HD int tc_groups(const HeadShape& shape) { return shape.n_kv_heads * tc_tiles(shape.heads_per_kv()); }

// How a producer finds the t-th visible token (t in [0, visible)) of the window. Every route
// visits the window in logical order (t = 0 is the oldest visible token), so routes that read
// the same rows give the same bits (P6, P7); only where row t lives differs.
enum class RowOrder : std::uint8_t {
  // row = state.physical(logical_start + t): walks the explicit origins (splitk and vec on a
  // plane; a full wrapped ring is then read as two physical spans, the older one first).
  ring_logical,
  // row = t: rows that already sit in logical order from row 0 (staged and pad copies, the
  // interleaved route's growing plane, which never wraps).
  contiguous,
};

struct RowSource {
  const KvWord* k = nullptr;
  const KvWord* v = nullptr;
  PlaneStrides strides;
  RowOrder order = RowOrder::contiguous;
  PlaneState state;       // origins, for ring_logical
  int logical_start = 0;  // first visible logical token, for ring_logical

  LADDER_HD int row(int t) const {
    return order == RowOrder::ring_logical ? state.physical(logical_start + t) : t;
  }
};

// A plane's visible window as splitk and vec read it: token t is logical token logical_start + t,
// wherever the plane holds it (ring_logical through PlaneState::physical).
inline RowSource logical_window(const KvWord* k, const KvWord* v, const PlaneStrides& strides,
                                const PlaneState& state, int logical_start) {
  RowSource r;
  r.k = k;
  r.v = v;
  r.strides = strides;
  r.order = RowOrder::ring_logical;
  r.state = state;
  r.logical_start = logical_start;
  return r;
}

// One producer struct for the three producer families (splitk, vec, interleaved); which
// fields are live is the family's contract:
//  * splitk:      rows.order = ring_logical; no tail; no current token.
//  * vec:         rows.order = ring_logical (one span, or a full wrapped ring as two, in logical
//                 order); tokens t >= tail_first come from `tail` (the pad scratch, rows
//                 t - tail_first) — tail_first = visible when no pad.
//  * staged:      the vec kernel over the staged copy: rows.order = contiguous, no tail.
//  * interleaved: rows.order = contiguous (a growing plane never wraps); token visible-1 is
//                 read from cur_k/cur_v in f32 and also stored (kv_dtype) into store_k/store_v at
//                 store_slot by exactly one worker.
//  * splitk_fused, vec_fused (GPU): rows as splitk / vec, no tail (a ragged tail is read in
//                 place); token visible-1 is cur_k/cur_v rounded to kv_dtype, stored at store_slot.
// Which producer kernel a ProducerParams is for. A batched launch (one launch per layer and
// kernel family for every sequence of a call) reads one struct per sequence and skips those of
// another family; the direct form ignores it.
enum class KernelFamily : std::uint8_t { none, splitk, vec, interleaved, splitk_fused, vec_fused };

struct ProducerParams {
  KernelFamily family = KernelFamily::none;
  HeadShape shape;
  // The dtype of every plane and scratch row the producer reads or stores (rows, tail,
  // store_k/v) and the range bound it applies to q and the current token.
  KvDtype kv_dtype = KvDtype::f16;
  int visible = 0;
  Schedule sched;
  const float* q = nullptr;
  RowSource rows;
  RowSource tail;
  int tail_first = 0;
  const float* cur_k = nullptr;
  const float* cur_v = nullptr;
  KvWord* store_k = nullptr;
  KvWord* store_v = nullptr;
  int store_slot = -1;
  float* partials = nullptr;
  // GPU, tensor-core families: allow the next kernel of the stream (a reducer launched with PDL)
  // once the CTA's last slot is folded, before its partial is written.
  bool early_dependents = false;
  // Tests only (GPU, tensor-core families): nanoseconds warp slot `flat` sleeps after it allows
  // dependents, before its partial is written (nullptr: none).
  const unsigned* debug_delay_ns = nullptr;
};

// Merges the partials of each head (exp(m_i - M) corrections) and divides once: per group its
// `parts` partials folded left in index order (step 4, where the producer left it), then the
// `groups` states in order (step 5). The exact-DAG producers (CPU twins and GPU) merge whole
// workgroups themselves: groups = nwg, parts = 1. The tensor-core path: tc_fold_groups.
struct ReduceParams {
  HeadShape shape;
  int groups = 0;
  int parts = 1;
  const float* partials = nullptr;
  float* out = nullptr;
};

// GPU, batched tensor-core producer launches that may fold (cuda_detail::BatchSpan::tc_fold_ctas
// = `ctas`, the launch's CTAs per entry and tile group): how many whole fold groups (`groups` of
// `parts` warp slots each, tc_fold_groups) each CTA walks and folds itself (step 4 in the
// producer, one partial per group: parts 1), or 0 where the entry's slots stay one partial each.
// An entry folds where whole groups cost no CTA a longer walk than single slots would:
// parts ceil(groups / ctas) == ceil(groups parts / ctas). The producer and the reducer both read
// it from here, so a reducer entry's parts always match what its producer wrote (docs/perf.md,
// changes 49 and 50).
LADDER_HD constexpr int tc_folded_groups_per_cta(int groups, int parts, int ctas) {
  if (ctas <= 0 || parts <= 1 || groups <= 0) return 0;
  const int per = (groups + ctas - 1) / ctas;
  return parts * per == (groups * parts + ctas - 1) / ctas ? per : 0;
}
// A reducer entry's parts behind such a launch (as planned: 1 stays 1).
LADDER_HD constexpr int reduce_parts_after_fold(const ReduceParams& p, int ctas) {
  return tc_folded_groups_per_cta(p.groups, p.parts, ctas) > 0 ? 1 : p.parts;
}

// G1: f32 activations in, plane rows of kv_dtype out (one token, all KV heads).
struct StoreParams {
  KvDtype kv_dtype = KvDtype::f16;
  int n_kv_heads = 0;
  int head_dim = 0;
  const float* k = nullptr;
  const float* v = nullptr;
  KvWord* plane_k = nullptr;
  KvWord* plane_v = nullptr;
  PlaneStrides strides;
  int slot = 0;
};

// G3 pad and G5 staging are one operation: copy the `count` tokens first .. first+count-1 of
// `src` (in src's order) into dst rows 0 .. count-1 and zero-fill dst rows count .. rows-1
// (those rows are never weighted). rows == 0: nothing to do.
//  * pad (vec, head-major plane with a ragged tail): src in the vec route's order (ring_logical),
//    first = the window index of the tail's first token (the last visible % 32 logical tokens,
//    wherever the plane holds them), rows = one 32-row block, dst head-major, so the producer
//    never reads a plane row past len;
//  * staging (staged, wrapped token-major ring): src in ring_logical order, first = 0,
//    count = visible, rows = the schedule's blocks x 32, dst token-major: staged row t holds
//    logical token logical_start + t.
struct RowCopyParams {
  int n_kv_heads = 0;
  int head_dim = 0;
  RowSource src;
  int first = 0;
  int count = 0;
  int rows = 0;
  KvWord* dst_k = nullptr;
  KvWord* dst_v = nullptr;
  PlaneStrides dst_strides;
};

// The pad copy of the window of `visible` tokens that `window` reads (in its order) into the
// 32-row scratch block (`dst_k`, `dst_v`); rows == 0 when the window has no ragged tail or is a
// token-major ring (on the vec route a ring is a whole number of blocks: R1).
inline RowCopyParams pad_copy(const RowSource& window, PlaneKind kind, int visible, const HeadShape& shape,
                              KvWord* dst_k, KvWord* dst_v) {
  RowCopyParams c;
  c.n_kv_heads = shape.n_kv_heads;
  c.head_dim = shape.head_dim;
  c.src = window;
  c.dst_k = dst_k;
  c.dst_v = dst_v;
  c.dst_strides = plane_strides(PlaneKind::growing, kBlockTokens, shape.n_kv_heads, shape.head_dim);
  const int ragged = visible % kBlockTokens;
  c.first = visible - ragged;
  if (kind == PlaneKind::growing && ragged != 0) {
    c.count = ragged;
    c.rows = kBlockTokens;
  }
  return c;
}

// The staging copy of a ring's `visible` rows from logical token `first_logical` into
// `padded_rows` token-major rows at (`dst_k`, `dst_v`).
inline RowCopyParams stage_copy(const RowSource& ring, int first_logical, int visible, int padded_rows,
                                const HeadShape& shape, KvWord* dst_k, KvWord* dst_v) {
  RowCopyParams c;
  c.n_kv_heads = shape.n_kv_heads;
  c.head_dim = shape.head_dim;
  c.src = ring;
  c.src.order = RowOrder::ring_logical;
  c.src.logical_start = first_logical;
  c.first = 0;
  c.count = visible;
  c.rows = padded_rows;
  c.dst_k = dst_k;
  c.dst_v = dst_v;
  c.dst_strides = plane_strides(PlaneKind::ring, padded_rows, shape.n_kv_heads, shape.head_dim);
  return c;
}

// The rows a copy wrote, as the producer's row source (contiguous, dst layout).
inline RowSource copied_rows(const RowCopyParams& c) {
  RowSource r;
  r.k = c.dst_k;
  r.v = c.dst_v;
  r.strides = c.dst_strides;
  r.order = RowOrder::contiguous;
  return r;
}

// The geometry fields scratch_needs() reads, from a head shape.
inline Geometry shape_geometry(const HeadShape& shape) {
  Geometry g;
  g.n_heads = shape.n_heads;
  g.n_kv_heads = shape.n_kv_heads;
  g.head_dim = shape.head_dim;
  return g;
}

}  // namespace ladder
