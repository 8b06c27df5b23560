// The tensor-core producer's two tile layouts (src/cuda/tc_tile.hpp), checked on the host: in
// each, every element of a tile has its own place inside the tile and the 8 rows that one
// ldmatrix 8x8 matrix reads fall into 8 different 16-byte bank groups (no bank conflicts). For the
// swizzled layout, each ldmatrix matrix and each 16-byte copy pass the kernels issue, computed as
// a lane part plus a constant part, lands on the place offset() names (the split is exact), and
// offset() is the TMA unit's 128-byte swizzle.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "cuda/tc_tile.hpp"

namespace ladder::test {
namespace {

using cuda_detail::TcPaddedTile;
using cuda_detail::TcSwizzledCopy;
using cuda_detail::TcSwizzledLdmatrix;
using cuda_detail::TcSwizzledTile;

constexpr int kLanes = 32;
constexpr int kBankGroupBytes = 16;
constexpr int kBankGroups = 8;  // 128 bytes of banks

template <class Tile>
int bank_group(int element_offset) {
  return (element_offset * Tile::kElementBytes / kBankGroupBytes) % kBankGroups;
}

template <class Tile>
void expect_every_element_has_its_own_place() {
  std::vector<int> seen(Tile::kHalfs, 0);
  for (int row = 0; row < Tile::kRows; ++row)
    for (int dim = 0; dim < Tile::kDims; ++dim) {
      const int at = Tile::offset(row, dim);
      ASSERT_GE(at, 0);
      ASSERT_LT(at, Tile::kHalfs);
      ++seen[at];
    }
  int used = 0;
  for (int at = 0; at < Tile::kHalfs; ++at) {
    EXPECT_LE(seen[at], 1) << "element offset " << at;
    used += seen[at];
  }
  EXPECT_EQ(used, Tile::kRows * Tile::kDims);
}

TEST(TcTile, EveryElementHasItsOwnPlace) {
  expect_every_element_has_its_own_place<TcPaddedTile>();
  expect_every_element_has_its_own_place<TcSwizzledTile>();
  EXPECT_EQ(TcSwizzledTile::kHalfs, TcSwizzledTile::kRows * TcSwizzledTile::kDims) << "no padding";
}

// The 8 lanes of matrix `mat` of one ldmatrix give addresses in 8 different bank groups.
template <class Tile>
void expect_conflict_free(const std::vector<int>& lane_offsets, const char* what) {
  for (int mat = 0; mat < 4; ++mat) {
    std::set<int> groups;
    for (int r = 0; r < 8; ++r) groups.insert(bank_group<Tile>(lane_offsets[8 * mat + r]));
    EXPECT_EQ(groups.size(), 8u) << what << " matrix " << mat;
  }
}

// The place of lane 8 mat + r's row in the kernels' two reads (producer_tc.cuh, TcTileAddrs):
// scores (K): row 16 hb + 8 j + r, dims 16 kk + 8 mat; P.V (V, transposed): row 16 kk + 8 (mat &
// 1) + r, dims 64 half + 16 jp + 8 (mat >> 1).
int score_row(int hb, int j, int lane) { return 16 * hb + 8 * j + (lane & 7); }
int score_dim(int kk, int lane) { return 16 * kk + 8 * (lane >> 3); }
int pv_row(int kk, int lane) { return 16 * kk + ((lane >> 3) & 1) * 8 + (lane & 7); }
int pv_dim(int half, int jp, int lane) { return 64 * half + 16 * jp + ((lane >> 3) >> 1) * 8; }

TEST(TcTile, PaddedReadsHitEveryBankGroup) {
  using Tile = TcPaddedTile;
  for (int kk = 0; kk < Tile::kDims / 16; ++kk)
    for (int hb = 0; hb < 2; ++hb)
      for (int j = 0; j < 2; ++j) {
        std::vector<int> at(kLanes);
        for (int lane = 0; lane < kLanes; ++lane) at[lane] = Tile::offset(score_row(hb, j, lane), score_dim(kk, lane));
        expect_conflict_free<Tile>(at, "scores");
      }
  for (int half = 0; half < 2; ++half)
    for (int kk = 0; kk < Tile::kRows / 16; ++kk)
      for (int jp = 0; jp < 4; ++jp) {
        std::vector<int> at(kLanes);
        for (int lane = 0; lane < kLanes; ++lane) at[lane] = Tile::offset(pv_row(kk, lane), pv_dim(half, jp, lane));
        expect_conflict_free<Tile>(at, "P.V");
      }
}

TEST(TcTile, SwizzledIsTheTmaSwizzleOfAlignedBoxes) {
  using Tile = TcSwizzledTile;
  // The 128-byte swizzle XORs address bits 4-6 with bits 7-9 inside each 1024-byte span.
  for (int row = 0; row < Tile::kRows; ++row)
    for (int dim = 0; dim < Tile::kDims; dim += Tile::kChunkHalfs) {
      const int box = dim / Tile::kBoxDims;
      const int linear = box * Tile::kBoxHalfs * Tile::kElementBytes + row * Tile::kSwizzleBytes +
                         (dim % Tile::kBoxDims) * Tile::kElementBytes;  // bytes, unswizzled
      const int swizzled = linear ^ (((linear >> 7) & 7) << 4);
      EXPECT_EQ(Tile::offset(row, dim) * Tile::kElementBytes, swizzled) << "row " << row << " dim " << dim;
    }
}

TEST(TcTile, SwizzledScoreLoadsSplitExactlyAndHitEveryBankGroup) {
  using Tile = TcSwizzledTile;
  using Ld = TcSwizzledLdmatrix;
  for (int kk2 = 0; kk2 < Tile::kDims / 32; ++kk2)
    for (int hb = 0; hb < 2; ++hb)
      for (int j = 0; j < 2; ++j) {
        std::vector<int> at(kLanes);
        for (int lane = 0; lane < kLanes; ++lane) {
          // The x4 load of step pair kk2 reads dims 32 kk2 + 8 mat: steps 2 kk2 and 2 kk2 + 1.
          const int expect = Tile::offset(score_row(hb, j, lane), 32 * kk2 + 8 * (lane >> 3));
          at[lane] = Ld::score_const(hb, j, kk2) + Ld::score_lane(lane, Ld::score_which(kk2));
          ASSERT_EQ(at[lane], expect) << "kk2 " << kk2 << " hb " << hb << " j " << j << " lane " << lane;
        }
        expect_conflict_free<Tile>(at, "scores");
      }
}

TEST(TcTile, SwizzledPvLoadsSplitExactlyAndHitEveryBankGroup) {
  using Tile = TcSwizzledTile;
  using Ld = TcSwizzledLdmatrix;
  for (int half = 0; half < 2; ++half)
    for (int kk = 0; kk < Tile::kRows / 16; ++kk)
      for (int jp = 0; jp < Ld::kPvLaneParts; ++jp) {
        std::vector<int> at(kLanes);
        for (int lane = 0; lane < kLanes; ++lane) {
          const int expect = Tile::offset(pv_row(kk, lane), pv_dim(half, jp, lane));
          at[lane] = Ld::pv_const(kk) + Ld::pv_lane(lane, half, jp);
          ASSERT_EQ(at[lane], expect) << "half " << half << " kk " << kk << " jp " << jp << " lane " << lane;
        }
        expect_conflict_free<Tile>(at, "P.V");
      }
}

TEST(TcTile, SwizzledCopyPassesCoverTheTileOnce) {
  using Tile = TcSwizzledTile;
  constexpr int kPassesPerHalf = Tile::kRows / TcSwizzledCopy::kRowsPerPass / 2;
  static_assert(kPassesPerHalf * TcSwizzledCopy::kRowsPerPass % Tile::kSwizzleRows == 0, "which(pass) holds");
  std::vector<int> seen(Tile::kHalfs / Tile::kChunkHalfs, 0);
  for (int half = 0; half < 2; ++half)
    for (int pass = 0; pass < kPassesPerHalf; ++pass)
      for (int lane = 0; lane < kLanes; ++lane) {
        const int row_c = TcSwizzledCopy::row_const(half, kPassesPerHalf, pass);
        const int expect = Tile::offset(row_c + lane / 16, (lane % 16) * Tile::kChunkHalfs);
        const int at = row_c * Tile::kBoxDims + TcSwizzledCopy::lane(lane, TcSwizzledCopy::which(pass));
        ASSERT_EQ(at, expect) << "half " << half << " pass " << pass << " lane " << lane;
        ++seen[at / Tile::kChunkHalfs];
      }
  for (int c = 0; c < static_cast<int>(seen.size()); ++c) EXPECT_EQ(seen[c], 1) << "chunk " << c;
}

// The layout rule of heuristics.hpp: a one-sequence batched launch (the engine's batch-1 token,
// whose graph serves every depth) keeps padded tiles; several sequences take swizzled ones; a
// direct launch takes swizzled tiles only from kTcSwizzledTilesFromVisible rows (measured there,
// docs/perf.md change 45).
TEST(TcTileRule, SwizzlesBatchesAndDeepDirectLaunches) {
  EXPECT_EQ(tc_tiles_batched(1), TcTiles::padded);
  EXPECT_EQ(tc_tiles_batched(2), TcTiles::swizzled);
  EXPECT_EQ(tc_tiles_batched(64), TcTiles::swizzled);
  EXPECT_EQ(tc_tiles_direct(2048), TcTiles::padded);
  EXPECT_EQ(tc_tiles_direct(32768), TcTiles::padded);
  EXPECT_EQ(tc_tiles_direct(kTcSwizzledTilesFromVisible - 1), TcTiles::padded);
  EXPECT_EQ(tc_tiles_direct(kTcSwizzledTilesFromVisible), TcTiles::swizzled);
  EXPECT_EQ(tc_tiles_direct(131072), TcTiles::swizzled);
}

}  // namespace
}  // namespace ladder::test
