// The tensor-core producer's shared-memory tiles (producer_tc.cuh), as plain arithmetic that the
// host tests check (tests/cpu/test_tc_tile.cpp) and the kernels use. A tile is one block's 32
// rows of one plane (K or V) x 128 dims, in one of two layouts (TcTiles, heuristics.hpp):
//
//  * TcPaddedTile: rows at a 272-byte pitch (128 dims + 16 bytes). 272 / 16 = 17 is odd, so the 8
//    row addresses of one ldmatrix 8x8 matrix fall into 8 different 16-byte bank groups.
//  * TcSwizzledTile: two boxes of 64 dims (128 bytes a row); within a box the eight 16-byte chunks
//    of row r sit at chunk ^ (r % 8), the layout the TMA unit writes with
//    CU_TENSOR_MAP_SWIZZLE_128B when a box starts on a 1024-byte boundary. The 8 rows of one
//    ldmatrix matrix again fall into 8 bank groups, with no padding: 8 KB a tile, not 8.5.
//
// Addresses in a kernel: a lane's (row, chunk) is a constant part (unrolled loop indices) plus a
// lane part. In the swizzled layout, where the constant and lane parts of the row's low three bits
// and of the chunk share no bit, the swizzle's XOR splits too (lane_part / constant_part), so a
// kernel holds a few lane parts in registers and adds constants to them, as it does with padded
// rows, instead of recomputing the XOR for every ldmatrix (a first version that did held 60 more
// registers per thread, docs/perf.md change 43).
#pragma once

#include "ladder/geometry.hpp"
#include "ladder/hd.hpp"
#include "ladder/heuristics.hpp"

namespace ladder::cuda_detail {

inline constexpr int kTcTileChunkBytes = 16;  // one cp.async, one ldmatrix row of 8 halfs

struct TcPaddedTile {
  static constexpr TcTiles kLayout = TcTiles::padded;
  static constexpr int kRows = kBlockTokens;
  static constexpr int kDims = limits::kGpuHeadDim;
  static constexpr int kElementBytes = 2;
  static constexpr int kChunkHalfs = kTcTileChunkBytes / kElementBytes;
  static constexpr int kRowHalfs = kDims + kChunkHalfs;  // 272 bytes
  static constexpr int kHalfs = kRows * kRowHalfs;
  static constexpr int kAlignBytes = kTcTileChunkBytes;  // what cp.async and ldmatrix need
  static_assert(kRowHalfs * kElementBytes / kTcTileChunkBytes % 2 == 1, "an odd number of 16-byte groups a row");

  // Element offset of (row, dim); dims d .. d + 7 of one chunk are adjacent.
  LADDER_HD static constexpr int offset(int row, int dim) { return row * kRowHalfs + dim; }
};

struct TcSwizzledTile {
  static constexpr TcTiles kLayout = TcTiles::swizzled;
  static constexpr int kRows = kBlockTokens;
  static constexpr int kDims = limits::kGpuHeadDim;
  static constexpr int kElementBytes = 2;
  static constexpr int kSwizzleBytes = 128;  // the span one row of a box covers
  static constexpr int kBoxDims = kSwizzleBytes / kElementBytes;
  static constexpr int kBoxes = kDims / kBoxDims;
  static constexpr int kBoxHalfs = kRows * kBoxDims;
  static constexpr int kChunkHalfs = kTcTileChunkBytes / kElementBytes;
  static constexpr int kSwizzleRows = kBoxDims / kChunkHalfs;
  static constexpr int kHalfs = kBoxes * kBoxHalfs;
  // Where a box starts: a 128-byte-swizzled box of the TMA unit must start on 1024 bytes; the
  // bank-conflict freedom itself needs 128 (the tiles are placed as the measured variant D did).
  static constexpr int kAlignBytes = 1024;
  static_assert(kDims % kBoxDims == 0, "a row is whole boxes");
  static_assert(kBoxHalfs * kElementBytes % kAlignBytes == 0, "every box of a tile starts aligned");
  static_assert(kSwizzleRows == 8, "the 128-byte swizzle permutes a box row's 8 chunks by row % 8");

  LADDER_HD static constexpr int offset(int row, int dim) {
    const int box = dim / kBoxDims;
    const int chunk = (dim % kBoxDims) / kChunkHalfs;
    return box * kBoxHalfs + row * kBoxDims + (chunk ^ (row % kSwizzleRows)) * kChunkHalfs + dim % kChunkHalfs;
  }

  // offset(row_c + row_l, box * kBoxDims + (chunk_c + chunk_l) * kChunkHalfs) as constant_part +
  // lane_part, where row_c % 8 and row_l % 8 share no bit, chunk_c and chunk_l share no bit, and
  // chunk_c + chunk_l < 8 (then + is ^ on those bits, and the swizzle's XOR splits).
  LADDER_HD static constexpr int lane_part(int row_l, int chunk_l, int row_c, int chunk_c) {
    return row_l * kBoxDims + ((chunk_l ^ (row_l % kSwizzleRows)) ^ (chunk_c ^ (row_c % kSwizzleRows))) * kChunkHalfs;
  }
  LADDER_HD static constexpr int constant_part(int box, int row_c) { return box * kBoxHalfs + row_c * kBoxDims; }
};

// The swizzled tile's ldmatrix addressing of the producer's two tile reads, lane = 8 * mat + r:
//  * scores (tc_scores, K, x4): matrix mat of 16-dim step pair kk2 (dims 32 kk2 .. + 31) is
//    row 16 hb + 8 j + r, chunk 4 kk2 + mat: row_c = 16 hb + 8 j, row_l = r, chunk_c = (4 kk2) % 8
//    (0 or 4), chunk_l = mat < 4, box = 4 kk2 / 8. Two lane parts.
//  * P.V (tc_pv, V, x4 transposed): token step kk, n-tile pair jp of half h is row 16 kk + 8 (mat &
//    1) + r, chunk 2 jp + (mat >> 1) of box h: row_c = 16 kk, row_l = 8 (mat & 1) + r, chunk_c =
//    2 jp (0, 2, 4, 6), chunk_l = mat >> 1 < 2. Four lane parts.
struct TcSwizzledLdmatrix {
  using Tile = TcSwizzledTile;
  static constexpr int kScoreLaneParts = 2;  // chunk_c = 0, 4
  static constexpr int kPvLaneParts = 4;     // chunk_c = 0, 2, 4, 6
  LADDER_HD static constexpr int score_lane(int lane, int which) {
    return Tile::lane_part(lane & 7, lane >> 3, 0, 4 * which);
  }
  LADDER_HD static constexpr int score_const(int hb, int j, int kk2) {
    return Tile::constant_part(4 * kk2 / Tile::kSwizzleRows, 16 * hb + 8 * j);
  }
  LADDER_HD static constexpr int score_which(int kk2) { return (4 * kk2 % Tile::kSwizzleRows) / 4; }
  LADDER_HD static constexpr int pv_lane(int lane, int half, int jp) {
    const int mat = lane >> 3;
    return Tile::constant_part(half, 0) + Tile::lane_part(8 * (mat & 1) + (lane & 7), mat >> 1, 0, 2 * jp);
  }
  LADDER_HD static constexpr int pv_const(int kk) { return Tile::constant_part(0, 16 * kk); }
};

// The swizzled tile's cp.async pieces (tc_issue_block): pass `pass` of warp `half`, lane = 16 hr +
// c16 copies row 2 (passes_per_half half + pass) + hr, chunk c16 % 8 of box c16 / 8: row_c =
// 2 (passes_per_half half + pass), row_l = hr < 2, chunk_c = 0, chunk_l = c16 % 8. Four lane
// parts, by 2 pass % 8 (each warp's rows start on a multiple of 8).
struct TcSwizzledCopy {
  using Tile = TcSwizzledTile;
  static constexpr int kRowsPerPass = 2;
  static constexpr int kLaneParts = Tile::kSwizzleRows / kRowsPerPass;
  LADDER_HD static constexpr int lane(int lane_id, int which) {
    const int hr = lane_id / 16;
    const int c16 = lane_id % 16;
    return Tile::constant_part(c16 / Tile::kSwizzleRows, 0) +
           Tile::lane_part(hr, c16 % Tile::kSwizzleRows, kRowsPerPass * which, 0);
  }
  LADDER_HD static constexpr int row_const(int half, int passes_per_half, int pass) {
    return kRowsPerPass * (half * passes_per_half + pass);
  }
  // The lane part of a pass: row_c % 8, which does not depend on the warp where a warp's rows
  // start on a multiple of 8 (passes_per_half * kRowsPerPass % 8 == 0, asserted by the caller),
  // so that a kernel indexes its lane parts by the unrolled pass alone.
  LADDER_HD static constexpr int which(int pass) { return kRowsPerPass * pass % Tile::kSwizzleRows / kRowsPerPass; }
};

}  // namespace ladder::cuda_detail
