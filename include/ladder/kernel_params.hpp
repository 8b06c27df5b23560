// The parameter structs every kernel family takes, CPU twin and CUDA kernel alike (one struct
// per kernel, not thirty positional ints). Shapes at the boundary:
//   q, out      : f32 [n_heads][head_dim]
//   cur_k/cur_v : f32 [n_kv_heads][head_dim]         (this token's activations)
//   planes      : f16 bits, addressed by PlaneStrides  (see plane.hpp)
//   partials    : f32 [n_heads][nwg][2 + head_dim]    (m, s, o[head_dim]) per (head, workgroup)
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

// How a producer finds the t-th visible token (t in [0, visible)) of the window.
enum class RowOrder : std::uint8_t {
  ring_logical,  // row = state.physical(logical_start + t): walks the explicit origins (splitk)
  contiguous,    // row = t: one contiguous physical span starting at row 0 (vec, staged)
};

struct RowSource {
  const std::uint16_t* k = nullptr;
  const std::uint16_t* v = nullptr;
  PlaneStrides strides;
  RowOrder order = RowOrder::contiguous;
  PlaneState state;       // origins, for ring_logical
  int logical_start = 0;  // first visible logical token, for ring_logical

  LADDER_HD int row(int t) const {
    return order == RowOrder::ring_logical ? state.physical(logical_start + t) : t;
  }
};

// One producer struct for the three producer families (splitk, vec, interleaved); which
// fields are live is the family's contract:
//  * splitk:      rows.order = ring_logical; no tail; no current token.
//  * vec/staged:  rows.order = contiguous; tokens t >= tail_first come from `tail`
//                 (the pad scratch, rows t - tail_first) — tail_first = visible when no pad.
//  * interleaved: rows.order = contiguous (a growing plane never wraps); token visible-1 is
//                 read from cur_k/cur_v in f32 and also stored (f16) into store_k/store_v at
//                 store_slot by exactly one worker.
struct ProducerParams {
  HeadShape shape;
  int visible = 0;
  Schedule sched;
  const float* q = nullptr;
  RowSource rows;
  RowSource tail;
  int tail_first = 0;
  const float* cur_k = nullptr;
  const float* cur_v = nullptr;
  std::uint16_t* store_k = nullptr;
  std::uint16_t* store_v = nullptr;
  int store_slot = -1;
  float* partials = nullptr;
};

// Merges the nwg partials of each head (exp(m_i - M) corrections) and divides once.
struct ReduceParams {
  HeadShape shape;
  int nwg = 0;
  const float* partials = nullptr;
  float* out = nullptr;
};

// G1: f32 activations in, f16 plane rows out (one token, all KV heads).
struct StoreParams {
  int n_kv_heads = 0;
  int head_dim = 0;
  const float* k = nullptr;
  const float* v = nullptr;
  std::uint16_t* plane_k = nullptr;
  std::uint16_t* plane_v = nullptr;
  PlaneStrides strides;
  int slot = 0;
};

// G3 pad: copy the ragged tail [tail_first, tail_first + tail_count) of a contiguous span into a
// 32-row scratch block (rows past tail_count are zero and never weighted).
struct PadParams {
  int n_kv_heads = 0;
  int head_dim = 0;
  RowSource src;
  int tail_first = 0;
  int tail_count = 0;
  std::uint16_t* dst_k = nullptr;
  std::uint16_t* dst_v = nullptr;
  PlaneStrides dst_strides;
};

// G5 staging: copy the visible rows of a (wrapped) ring into absolute order: staged row t holds
// logical token logical_start + t; rows [visible, padded_rows) are zero-filled padding.
struct StageParams {
  int n_kv_heads = 0;
  int head_dim = 0;
  RowSource src;  // order = ring_logical
  int visible = 0;
  int padded_rows = 0;  // ceil(visible / 32) * 32
  std::uint16_t* dst_k = nullptr;
  std::uint16_t* dst_v = nullptr;
  PlaneStrides dst_strides;  // token-major
};

}  // namespace ladder
