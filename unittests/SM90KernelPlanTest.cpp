// The sm_90a plan's fp8 stage layout: rows in groups (8 adjacent rows
// where Dqk / 16 is 4 mod 8, else pairs), each ldmatrix's 8 consecutive
// logical rows (stageRowOf) in 8 different 16-byte bank groups, a group
// one bulk copy wherever its rows can be adjacent.
#include "mla/Target/SM90KernelPlan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

using namespace mla;

namespace {
SM90KernelPlan fp8Plan(int64_t qkDim, int64_t kvTile = 64) {
  return SM90KernelPlan(SM90KernelShape{CacheFormat::FP8, 16, qkDim, qkDim,
                                        kvTile, 16,
                                        SM90KernelPlan::warpsFor(16), 2, 1});
}

/// The stage byte where logical row `j` (a score column, a PV k index)
/// starts.
int64_t rowOffset(const SM90KernelPlan &plan, int64_t j) {
  int64_t row = plan.stageRowOf(j), rows = plan.stageGroupRows();
  return row / rows * plan.stageGroupBytes() +
         row % rows * plan.stageRowOffset();
}
} // namespace

TEST(SM90KernelPlan, Fp8StageRowsAreConflictFreeForLdmatrix) {
  for (int64_t kvTile : {32, 64})
    for (int64_t qkDim = 32; qkDim <= 1024; qkDim += 16) {
      SM90KernelPlan plan = fp8Plan(qkDim, kvTile);
      int64_t rows = plan.stageGroupRows();
      EXPECT_GE(plan.stageRowOffset(), qkDim) << qkDim;
      EXPECT_GE(plan.stageGroupBytes(),
                (rows - 1) * plan.stageRowOffset() + qkDim);
      EXPECT_EQ(plan.stageGroupBytes() % 16, 0) << qkDim;
      EXPECT_EQ(plan.stageRowOffset() % 16, 0) << qkDim;
      EXPECT_EQ(plan.stageBytes(), kvTile / rows * plan.stageGroupBytes())
          << qkDim;
      // stageRowOf is a permutation of the tile's rows.
      std::vector<bool> seen(kvTile);
      for (int64_t j = 0; j < kvTile; ++j)
        seen.at(plan.stageRowOf(j)) = true;
      EXPECT_EQ(std::count(seen.begin(), seen.end(), true), kvTile);
      // Any 8 consecutive logical rows from a multiple of 8 (an
      // ldmatrix's).
      for (int64_t first = 0; first < kvTile; first += 8) {
        unsigned groups = 0;
        for (int64_t j = first; j < first + 8; ++j)
          groups |= 1u << (rowOffset(plan, j) % 128 / 16);
        EXPECT_EQ(groups, 0xffu)
            << "Dqk " << qkDim << " kv_tile " << kvTile << " rows " << first;
      }
    }
}

TEST(SM90KernelPlan, Fp8RowGroupsAreOneCopyAWarp) {
  // Dqk / 16 = 36 (4 mod 8): 8 adjacent rows and 16 bytes a group, 8 a
  // 64-row tile (one a warp), 4 a 32-row one; not at 16 rows.
  for (int64_t qkDim : {576, 192, 64, 320}) {
    EXPECT_TRUE(fp8Plan(qkDim).rowGroups()) << qkDim;
    EXPECT_TRUE(fp8Plan(qkDim, 32).rowGroups()) << qkDim;
    EXPECT_FALSE(fp8Plan(qkDim, 16).rowGroups()) << qkDim;
  }
  EXPECT_EQ(fp8Plan(576).stageGroupBytes(), 4624);
  EXPECT_EQ(fp8Plan(576).stageRowOffset(), 576);
  EXPECT_EQ(fp8Plan(576).stageBytes(), 8 * 4624);
  // Column 8 m + e reads row 8 (4 (m / 4) + e / 2) + 2 (m % 4) + e % 2.
  EXPECT_EQ(fp8Plan(576).stageRowOf(0), 0);
  EXPECT_EQ(fp8Plan(576).stageRowOf(2), 8);
  EXPECT_EQ(fp8Plan(576).stageRowOf(9), 3);
  EXPECT_EQ(fp8Plan(576).stageRowOf(39), 57);
  // Other Dqk keep pairs.
  for (int64_t qkDim : {48, 160, 128, 512})
    EXPECT_FALSE(fp8Plan(qkDim).rowGroups()) << qkDim;
}

TEST(SM90KernelPlan, Fp8PairsAreOneCopyWhereAStrideAllowsIt) {
  // Dqk / 16 = 36 (4 mod 8): adjacent rows, pairs 73 units apart (16-row
  // tiles: too few for row groups).
  EXPECT_TRUE(fp8Plan(576).bulkPairs());
  EXPECT_EQ(fp8Plan(576).stagePairRowOffset(), 576);
  EXPECT_EQ(fp8Plan(576).stagePairBytes(), 1168);
  EXPECT_TRUE(fp8Plan(192).bulkPairs());
  EXPECT_TRUE(fp8Plan(64).bulkPairs());
  EXPECT_TRUE(fp8Plan(48).bulkPairs()); // 3 units: odd
  // 10 units (2 mod 8) and 8 (0 mod 8): no stride works; rows padded to
  // an odd number of units, a copy each.
  for (int64_t qkDim : {160, 128, 512}) {
    SM90KernelPlan plan = fp8Plan(qkDim);
    EXPECT_FALSE(plan.bulkPairs()) << qkDim;
    EXPECT_EQ(plan.stagePairRowOffset() / 16 % 2, 1) << qkDim;
    EXPECT_EQ(plan.stagePairBytes(), 2 * plan.stagePairRowOffset());
  }
}

TEST(SM90KernelPlan, ThirtyTwoRowBlocksFillAnSMAlone) {
  // The H200's shared memory a block may use (227 KiB).
  constexpr int64_t ldsLimit = 232448;
  auto plan = [](CacheFormat format, int64_t kvTile, int64_t rows,
                 int64_t warps) {
    return SM90KernelPlan(
        SM90KernelShape{format, 128, 576, 512, kvTile, 128, warps, 2, 1, rows});
  };
  SM90KernelPlan wide = plan(CacheFormat::FP8, 64, 32, 16);
  EXPECT_EQ(wide.unsupported(ldsLimit), std::nullopt);
  EXPECT_EQ(wide.threads(), 512);
  EXPECT_EQ(wide.warps(), SM90KernelPlan::warpsFor(32));
  EXPECT_EQ(wide.blocksPerSM(), 1);
  EXPECT_EQ(SM90KernelPlan::workgroups(132, 32), 132);
  EXPECT_EQ(SM90KernelPlan::workgroups(132, 16), 264);
  // Each warp scores 16 tile rows of both fragments; the groups and the
  // Dqk parts use every warp.
  EXPECT_EQ(wide.scoreRowsPerWarp(), 16);
  EXPECT_EQ(wide.scoreGroups() * wide.scoreParts(), wide.warps());
  EXPECT_EQ(wide.outputGroupsPerWarp(), 1);
  // Q, partial scores, P and factors for 32 rows; the stages unchanged.
  SM90KernelPlan narrow = plan(CacheFormat::FP8, 64, 16, 8);
  EXPECT_EQ(wide.stageBytes(), narrow.stageBytes());
  EXPECT_EQ(wide.qBytes(), 2 * narrow.qBytes());
  EXPECT_EQ(wide.ldsBytes(), 152976);
  EXPECT_LE(wide.smBytes(), ldsLimit + SM90KernelPlan::kReservedSharedPerBlock);
  EXPECT_EQ(plan(CacheFormat::FP8, 32, 32, 16).unsupported(ldsLimit),
            std::nullopt);
  // A warp copies a row pair at least (fp8's bulk copies); 16 warps.
  // 64-row tiles fit one block of bf16 (its PV then on mma.sync) and
  // mxfp4 (its decoded tile), not two.
  for (CacheFormat format : {CacheFormat::BF16, CacheFormat::MXFP4}) {
    EXPECT_EQ(plan(format, 64, 32, 16).unsupported(ldsLimit), std::nullopt);
    EXPECT_NE(plan(format, 64, 16, 8).unsupported(ldsLimit), std::nullopt);
  }
  EXPECT_FALSE(plan(CacheFormat::BF16, 64, 32, 16).outputOnWarpgroups());
  EXPECT_TRUE(plan(CacheFormat::BF16, 32, 16, 8).outputOnWarpgroups());
  EXPECT_NE(plan(CacheFormat::FP8, 16, 32, 16).unsupported(ldsLimit),
            std::nullopt);
  EXPECT_NE(plan(CacheFormat::FP8, 64, 32, 8).unsupported(ldsLimit),
            std::nullopt);
}
