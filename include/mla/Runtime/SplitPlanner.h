//===- SplitPlanner.h - balanced split-KV work lists ------------*- C++ -*-===//
//
// Flash-decoding splits each sequence's KV range into work items (each run
// by one workgroup per block of its query rows) whose partial outputs a
// combine step merges. The planner decides
// the items from the target and the per-sequence lengths; it runs at compile
// time for static shapes and in the runtime for every batch. The policy and
// its cost model are described in docs/split-planning.md. Plain C++: the
// compiler and the runtime share it.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_SPLITPLANNER_H
#define MLA_RUNTIME_SPLITPLANNER_H

#include "mla/ABI.h"
#include "mla/Runtime/Status.h"

#include <cstdint>
#include <vector>

namespace mla {

/// One workgroup's share: cache positions [kvBegin, kvEnd) of sequence `seq`
/// (relative to the sequence's first row), written to partial slot
/// `partialSlot`. kvBegin == kvEnd is an empty item (lse = -inf).
struct WorkItem {
  int32_t seq;
  int32_t kvBegin;
  int32_t kvEnd;
  int32_t partialSlot;
};

/// One workgroup's run of the partial kernel in a persistent grid: row
/// block `rowBlock` of work item `item`, on logical workgroup `workgroup`.
struct WorkUnit {
  int32_t item;
  int32_t rowBlock;
  int32_t workgroup;
};

struct WorkList {
  std::vector<WorkItem> items;
  /// The items (= partial slots) of sequence b are
  /// [seqItemIndptr[b], seqItemIndptr[b+1]); a sequence with one item can be
  /// written directly, without a combine.
  std::vector<int32_t> seqItemIndptr;

  /// The persistent grid's schedule (SplitOptions::workgroups > 0): every
  /// row block of every item that holds query rows, in item order; logical
  /// workgroup j runs units [workgroupUnitIndptr[j],
  /// workgroupUnitIndptr[j+1]) (docs/split-planning.md).
  std::vector<WorkUnit> units;
  std::vector<int32_t> workgroupUnitIndptr;

  int64_t numItems() const { return items.size(); }
  int64_t numItemsOf(int64_t seq) const {
    return seqItemIndptr[seq + 1] - seqItemIndptr[seq];
  }
  /// Whether a sequence has two items or more: else the partial kernel
  /// writes every output and the combine has nothing to merge.
  bool needsCombine() const {
    for (size_t b = 0; b + 1 < seqItemIndptr.size(); ++b)
      if (numItemsOf(b) > 1)
        return true;
    return false;
  }
};

/// Rows items are cut on at the least (SplitOptions::kvTile's default).
constexpr int64_t kMinItemTile = 64;

/// The positions the planners cut items on for kernels of `kernelTile`-row
/// KV tiles: multiples of the tile (a kernel's tiles start at its item's
/// first position, and a paged kernel reads a tile from one page) and of
/// kMinItemTile, with which the balanced policy's item sizes were measured
/// also for kernels of shorter tiles (sm_90a's 32-row bf16 and mxfp4 tiles;
/// docs/split-planning.md).
constexpr int64_t itemTile(int64_t kernelTile) {
  return kernelTile > kMinItemTile ? kernelTile : kMinItemTile;
}

struct SplitOptions {
  /// > 0: exactly this many items per sequence (uniform split, ceil division,
  /// clamped; items past the end are empty). 0: the balanced policy.
  int64_t forcedSplits = 0;
  /// Item boundaries fall on multiples of the KV tile (except the ends).
  int64_t kvTile = kMinItemTile;
  /// Smallest item the balanced policy makes, in tiles: below this the
  /// per-item prologue and the combine cost more than the parallelism gains.
  int64_t minTilesPerItem = 2;
  /// Balanced policy, where minTilesPerItem binds (the batch has at most a
  /// tile a workgroup): a sequence its chunk cuts into at least this many
  /// items is cut into one-tile items instead (the last one short). Its
  /// combine is paid already and grows little, while its longest item
  /// halves; a sequence of one or two items would pay a combine, or double
  /// a small one, for the same half. H200, B = 4, kv = 1024: fp8 14.5 ->
  /// 13.1 µs, bf16 14.8 -> 12.2, mxfp4 18.1 -> 13.4; fp8 B = 16, kv = 512
  /// 15.3 -> 12.7 (docs/performance.md; forced one-tile items lost at B = 1,
  /// kv = 256 and B = 64, kv = 128). 0: never.
  int64_t fineItemsFrom = 4;
  /// Upper bound on the items of one sequence under the balanced policy.
  int64_t maxSplitsPerSeq = kMaxSplitsPerSeq;
  /// Balanced policy: the workgroups each item of sequence b keeps busy
  /// (its query rows over the rows a workgroup serves); empty: one each.
  std::vector<int64_t> workgroupsPerItem;
  /// > 0: also schedule the items' row blocks on a persistent grid of this
  /// many workgroups (WorkList::units), dealt to `xcds` chiplets (a
  /// divisor of workgroups).
  int64_t workgroups = 0;
  int64_t xcds = 1;
  /// The schedule's cost of a unit: its positions plus this fixed cost (Q
  /// load, pipeline fill, epilogue), in positions.
  int64_t unitOverhead = 64;
};

/// The most items and units a batch of `maxSeqs` sequences can need on a
/// chip of `computeUnits` CUs, whatever their lengths: the balanced policy
/// makes at most one item per sequence more than its share of the grid G
/// that runs at once (`maxSeqs + G` items; G the persistent grid,
/// options.workgroups, else the CUs), a forced split N items per sequence;
/// an item has at most `maxWorkgroupsPerItem` units. The device planner's
/// buffers are sized by it.
struct WorkListBounds {
  int64_t items, units;
};
/// The logical workgroup of row block r of an item of `rowBlocks` blocks
/// whose cost spans [start, end) of the batch's `total`: the item's blocks
/// take the workgroups its cost covers, proportionally, within one XCD
/// (logical workgroups of one XCD are consecutive, `perXcd` of them), so
/// that they share its L2; own workgroups when there are enough, else
/// spread evenly. Non-decreasing over the units in order. The plan kernel
/// computes the same.
int64_t unitWorkgroup(int64_t start, int64_t end, int64_t total, int64_t r,
                      int64_t rowBlocks, int64_t workgroups, int64_t perXcd);

WorkListBounds workListBounds(int64_t computeUnits, int64_t maxSeqs,
                              int64_t maxWorkgroupsPerItem,
                              const SplitOptions &options);

/// The combine cuts a (sequence, head)'s output columns into slices, one
/// block each, where a sequence has at least this many items: its block's
/// item groups then get fewer merge steps each (one slice at Dv = 512,
/// q_len 1 gives 128 outputs two groups; fewer items gain no groups).
constexpr int64_t kCombineSliceItems = 32;
/// The most slices: at Dv = 512, q_len 1, four leave 32 outputs a block,
/// which its 256 threads merge in eight item groups.
constexpr int64_t kMaxCombineSlices = 4;

/// The column slices of the combine's grid (its z, `combine_slices`) for
/// `list` at `numHeads` heads: where a sequence has at least
/// kCombineSliceItems items, the largest power of two up to
/// kMaxCombineSlices whose blocks (sequences x heads x slices) fit the
/// `workgroups` that run at once; else 1 (docs/split-planning.md).
int64_t combineSlices(const WorkList &list, int64_t numHeads,
                      int64_t workgroups);

/// Plans the work list for a chip of `computeUnits` CUs; errors on invalid
/// options or lengths.
rt::Expected<WorkList> planSplits(int64_t computeUnits,
                                  const std::vector<int64_t> &kvLens,
                                  const SplitOptions &options = {});

} // namespace mla

#endif // MLA_RUNTIME_SPLITPLANNER_H
