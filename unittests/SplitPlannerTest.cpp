// The split planner: it fills the chip, splits long sequences more than short
// ones, covers every position exactly once, and honours forced splits.
#include "mla/Target/KnownTargets.h"
#include "mla/Runtime/SplitPlanner.h"

#include <gtest/gtest.h>

#include <random>

using namespace mla;

namespace {
const TargetInfo &gfx950() { return *lookupTarget("gfx950"); }

WorkList plan(std::vector<int64_t> lens, SplitOptions options = {}) {
  auto list = planSplits(gfx950().computeUnits, lens, options);
  EXPECT_TRUE(bool(list)) << list.takeError().message();
  return std::move(*list);
}

/// Items of each sequence tile [0, len) in order, slots are 0..n-1.
void expectCovers(const WorkList &list, const std::vector<int64_t> &lens) {
  ASSERT_EQ(list.seqItemIndptr.size(), lens.size() + 1);
  for (size_t i = 0; i < list.items.size(); ++i)
    EXPECT_EQ(list.items[i].partialSlot, (int32_t)i);
  for (size_t b = 0; b < lens.size(); ++b) {
    int64_t next = 0;
    for (int32_t i = list.seqItemIndptr[b]; i < list.seqItemIndptr[b + 1]; ++i) {
      const WorkItem &item = list.items[i];
      EXPECT_EQ(item.seq, (int32_t)b);
      EXPECT_EQ(item.kvBegin, next);
      EXPECT_LE(item.kvBegin, item.kvEnd);
      next = item.kvEnd;
    }
    EXPECT_EQ(next, lens[b]);
  }
}
} // namespace

TEST(KnownTargets, Gfx950Facts) {
  const TargetInfo *t = lookupTarget("gfx950");
  ASSERT_TRUE(t);
  EXPECT_EQ(t, &*lookupTarget("gfx950"));
  EXPECT_EQ(lookupTarget("mi355x")->arch, t->arch);
  EXPECT_EQ(t->computeUnits, 256);
  EXPECT_EQ(t->xcds, 8);
  EXPECT_EQ(t->arch->waveSize, 64);
  EXPECT_EQ(t->arch->ldsBytesPerCU, 160 * 1024);
  EXPECT_EQ(t->arch->vectorRegistersPerLane, 512);
  EXPECT_EQ(t->arch->matrixInstructions.front().name,
            "v_mfma_scale_f32_16x16x128_f8f6f4");
  EXPECT_EQ(lookupTarget("host")->computeUnits, 1);
  EXPECT_EQ(lookupTarget("gfx942"), nullptr);
}

TEST(SplitPlanner, FewLongSequencesFillTheChip) {
  WorkList list = plan({8192, 8192, 8192, 8192});
  // chunk = max(32768 / 256, 2 tiles of 64) = 128 tokens: 64 items each.
  EXPECT_EQ(list.numItems(), 256);
  expectCovers(list, {8192, 8192, 8192, 8192});
}

TEST(SplitPlanner, ItemsWithSeveralWorkgroupsAreFewer) {
  // H = 128, q_len = 4: each item keeps 8 workgroups busy, so 32 items fill
  // the 256 CUs: chunk = 4 * 8192 * 8 / 256 = 1024 tokens, 8 per sequence.
  SplitOptions options;
  options.workgroupsPerItem = {8, 8, 8, 8};
  WorkList list = plan({8192, 8192, 8192, 8192}, options);
  EXPECT_EQ(list.numItems(), 32);
  expectCovers(list, {8192, 8192, 8192, 8192});
  // Mixed: a sequence whose items are wider weighs more in the chunk.
  options.workgroupsPerItem = {2, 8};
  list = plan({8192, 8192}, options);
  // chunk = (8192 * 2 + 8192 * 8) / 256 = 320 (5 tiles): floor(8192 / 320)
  // = 25 items of 328 tokens, 384 on tile boundaries: 22 items each,
  // 22 * 2 + 22 * 8 = 220 workgroups, within the 256 (26 items would take
  // 260: four workgroups would run two items, twice the time).
  EXPECT_EQ(list.numItemsOf(0), 22);
  EXPECT_EQ(list.numItemsOf(1), 22);
}

TEST(SplitPlanner, ManySequencesGetAboutOneItemEach) {
  std::vector<int64_t> lens(256, 8192);
  WorkList list = plan(lens);
  EXPECT_EQ(list.numItems(), 256);
  expectCovers(list, lens);
}

TEST(SplitPlanner, OnlyTheLongSequenceIsSplit) {
  WorkList list = plan({8192, 16, 16, 16});
  // chunk = 128 (the two-tile floor): 8192 / 128 = 64 items.
  EXPECT_EQ(list.numItemsOf(0), 64);
  for (int b = 1; b < 4; ++b)
    EXPECT_EQ(list.numItemsOf(b), 1);
  expectCovers(list, {8192, 16, 16, 16});
}

TEST(SplitPlanner, SequencesCutFourWaysGetOneTileItems) {
  // 256 CUs; where the two-tile minimum binds (at most a tile of the batch
  // a CU), a sequence it cuts into 4 or more items gets one-tile items.
  // B = 4, L = 1024: chunk 128 makes 8 a sequence; 16 of 64 tokens.
  WorkList list = plan({1024, 1024, 1024, 1024});
  for (int b = 0; b < 4; ++b)
    EXPECT_EQ(list.numItemsOf(b), 16);
  expectCovers(list, {1024, 1024, 1024, 1024});
  // 512 tokens are 4 items of 128: 8 of 64.
  EXPECT_EQ(plan({512}).numItemsOf(0), 8);
  // 256 tokens are 2 items: they stay 2; 128 tokens stay 1.
  EXPECT_EQ(plan({256}).numItemsOf(0), 2);
  EXPECT_EQ(plan({128, 128}).numItems(), 2);
  // 1000 tokens: 15 items of 64 and one of 40.
  EXPECT_EQ(plan({1000}).numItemsOf(0), 16);
  // Mixed: only the sequence cut 4 ways or more.
  list = plan({1024, 256});
  EXPECT_EQ(list.numItemsOf(0), 16);
  EXPECT_EQ(list.numItemsOf(1), 2);
  // Off: the minimum's items.
  SplitOptions options;
  options.fineItemsFrom = 0;
  EXPECT_EQ(plan({1024}, options).numItemsOf(0), 8);
  // The minimum does not bind (more than a tile a CU): the chunk's items.
  std::vector<int64_t> lens(32, 1024);
  EXPECT_EQ(plan(lens).numItemsOf(0), 8);
}

TEST(SplitPlanner, BoundsHoldPlansOnAGridLargerThanTheCUs) {
  // sm_90a: 132 SMs, a persistent grid of 264 blocks. B = 4, L = 8192
  // fills the grid with 256 items, more than the sequences plus the SMs.
  SplitOptions options;
  options.workgroups = 264;
  for (std::vector<int64_t> lens :
       {std::vector<int64_t>(4, 8192), std::vector<int64_t>(4, 1024),
        std::vector<int64_t>(300, 700)}) {
    auto list = planSplits(132, lens, options);
    ASSERT_TRUE(bool(list));
    WorkListBounds bounds =
        workListBounds(132, static_cast<int64_t>(lens.size()), 1, options);
    EXPECT_LE(list->numItems(), bounds.items);
    EXPECT_LE(static_cast<int64_t>(list->units.size()), bounds.units);
  }
  EXPECT_EQ(planSplits(132, std::vector<int64_t>(4, 8192), options)->numItems(),
            256);
}

TEST(SplitPlanner, CombineOnlyWhereASequenceHasTwoItems) {
  SplitOptions options;
  options.workgroups = 264;
  auto needs = [&](std::vector<int64_t> lens) {
    auto list = planSplits(132, lens, options);
    EXPECT_TRUE(bool(list));
    return list->needsCombine();
  };
  EXPECT_TRUE(needs(std::vector<int64_t>(4, 1024)));
  EXPECT_TRUE(needs({8192, 16, 16}));
  // One item a sequence: the partial kernel writes every output.
  EXPECT_FALSE(needs(std::vector<int64_t>(256, 8192)));
  EXPECT_FALSE(needs({100, 0, 64}));
  EXPECT_FALSE(needs({}));
}

TEST(SplitPlanner, CombineSlicesWhereTheGridHasRoom) {
  // sm_90a's grid of 264 blocks, H = 16: slices only where a sequence has
  // 32 items or more, as many as B x H x slices fit the grid, at most 4.
  SplitOptions options;
  options.workgroups = 264;
  auto slices = [&](std::vector<int64_t> lens, int64_t heads = 16) {
    auto list = planSplits(132, lens, options);
    EXPECT_TRUE(bool(list));
    return combineSlices(*list, heads, options.workgroups);
  };
  EXPECT_EQ(slices(std::vector<int64_t>(4, 8192)), 4);  // 64 items each
  EXPECT_EQ(slices(std::vector<int64_t>(8, 8192)), 2);  // 32 items each
  EXPECT_EQ(slices(std::vector<int64_t>(16, 8192)), 1); // 16 items each
  EXPECT_EQ(slices(std::vector<int64_t>(4, 1024)), 1);  // 16 items each
  EXPECT_EQ(slices({8192}, 128), 2);
  EXPECT_EQ(slices({8192, 16, 16}), 4); // the longest sequence decides
  EXPECT_EQ(slices(std::vector<int64_t>(256, 1024)), 1);
  EXPECT_EQ(slices({}), 1);
  // Without a persistent grid: one.
  auto list = planSplits(132, std::vector<int64_t>(4, 8192));
  ASSERT_TRUE(bool(list));
  EXPECT_EQ(combineSlices(*list, 16, 0), 1);
}

TEST(SplitPlanner, EmptySequencesGetOneEmptyItem) {
  WorkList list = plan({0, 5, 0});
  EXPECT_EQ(list.numItems(), 3);
  EXPECT_EQ(list.items[0].kvBegin, list.items[0].kvEnd);
  expectCovers(list, {0, 5, 0});
}

TEST(SplitPlanner, BalancedItemsAreNonEmptyAndTileAligned) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> lens(1 + rng() % 64);
    for (int64_t &len : lens)
      len = rng() % 3 == 0 ? rng() % 20 : rng() % 40000;
    SplitOptions options;
    options.kvTile = 16 << (rng() % 3);
    WorkList list = plan(lens, options);
    expectCovers(list, lens);
    for (const WorkItem &item : list.items) {
      if (lens[item.seq] > 0) {
        EXPECT_LT(item.kvBegin, item.kvEnd);
      }
      EXPECT_EQ(item.kvBegin % options.kvTile, 0);
    }
    for (size_t b = 0; b < lens.size(); ++b)
      EXPECT_LE(list.numItemsOf(b), options.maxSplitsPerSeq);
  }
}

TEST(SplitPlanner, ForcedSplitsUseCeilDivisionAndClamp) {
  SplitOptions options;
  options.forcedSplits = 7;
  options.kvTile = 2;
  // 10 positions in 7 items of ceil(10/7) = 2: five full items, two empty.
  WorkList list = plan({10, 1, 0}, options);
  EXPECT_EQ(list.numItems(), 21);
  expectCovers(list, {10, 1, 0});
  EXPECT_EQ(list.items[4].kvEnd, 10);
  EXPECT_EQ(list.items[5].kvBegin, list.items[5].kvEnd);
  EXPECT_EQ(list.items[7].kvEnd, 1);
  EXPECT_EQ(list.items[8].kvBegin, 1);
  EXPECT_EQ(list.items[8].kvEnd, 1);
}

// Items with positions start on multiples of the KV tile under both policies:
// the gfx950 kernel's tiles then never straddle a page of at least a tile
// (it DMAs a tile from one page).
TEST(SplitPlanner, ItemsStartOnTiles) {
  std::vector<int64_t> lens = {100, 7, 0, 1000, 4097, 65};
  for (int64_t forced : {0, 1, 3, 7}) {
    SplitOptions options;
    options.forcedSplits = forced;
    options.kvTile = 64;
    WorkList list = plan(lens, options);
    expectCovers(list, lens);
    for (const WorkItem &item : list.items) {
      if (item.kvBegin < item.kvEnd) { // an empty item has no tile
        EXPECT_EQ(item.kvBegin % 64, 0) << "forced " << forced;
      }
    }
  }
  // 100 positions in 3 forced items: ceil(100/3) = 34 rounds up to 64.
  SplitOptions options;
  options.forcedSplits = 3;
  WorkList list = plan({100}, options);
  ASSERT_EQ(list.numItems(), 3);
  EXPECT_EQ(list.items[0].kvEnd, 64);
  EXPECT_EQ(list.items[1].kvEnd, 100);
  EXPECT_EQ(list.items[2].kvBegin, list.items[2].kvEnd);
}

TEST(SplitPlanner, RejectsBadOptions) {
  SplitOptions options;
  options.fineItemsFrom = -1;
  auto list = planSplits(gfx950().computeUnits, {16}, options);
  ASSERT_FALSE(bool(list));
  EXPECT_EQ(list.takeError().message(),
            "fineItemsFrom must not be negative, got -1");
  options = SplitOptions();
  options.kvTile = 48;
  list = planSplits(gfx950().computeUnits, {16}, options);
  ASSERT_FALSE(bool(list));
  EXPECT_EQ(list.takeError().message(),
            "kv tile 48 must be a positive power of two");
  options.kvTile = 64;
  options.forcedSplits = -1;
  list = planSplits(gfx950().computeUnits, {16}, options);
  ASSERT_FALSE(bool(list));
  (void)list.takeError();
  list = planSplits(gfx950().computeUnits, {-3});
  ASSERT_FALSE(bool(list));
  (void)list.takeError();
  options = SplitOptions();
  options.workgroupsPerItem = {1, 2};
  list = planSplits(gfx950().computeUnits, {16}, options);
  ASSERT_FALSE(bool(list));
  EXPECT_EQ(list.takeError().message(),
            "workgroupsPerItem has 2 entries for 1 sequences");
  options.workgroupsPerItem = {1025};
  list = planSplits(gfx950().computeUnits, {16}, options);
  ASSERT_FALSE(bool(list));
  EXPECT_EQ(list.takeError().message(),
            "workgroups per item 1025 outside 0..1024");
}
