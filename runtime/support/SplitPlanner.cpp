//===- SplitPlanner.cpp - balanced split-KV work lists --------------------===//
//
// Balanced policy: all sequences are cut into items of (about) one common
// chunk size, chosen so that the total work spreads over the G workgroups
// that run at once (the persistent grid; without one, the CUs) once. An
// item of sequence b keeps w_b workgroups busy (its q_len·H query rows over
// the rows one workgroup serves), so:
//
//   chunk = max(roundUp(ceil(sum_b len_b·w_b / G), tile), minTilesPerItem * tile)
//   items(b) = clamp(floor(len_b / chunk), 1, maxSplitsPerSeq)
//
// (one-tile items instead where the minimum binds and the chunk already
// cuts the sequence into fineItemsFrom or more: SplitOptions).
//
// The floor keeps the items' workgroups within G (sum_b items(b)·w_b <= G
// but for sequences shorter than a chunk): one more item than the grid
// holds would make some workgroup run two, doubling the decode's time.
//
// A long sequence therefore gets many items and a short one a single item
// (which can be written without a combine): on {8192, 16, 16, 16} only the
// first is split. A sequence's items are of equal size up to one tile.
//
// The persistent grid's schedule cuts the items' row blocks (units), in
// order, into `workgroups` runs of about equal cost: an item whose cost
// spans [s, e) of the total T takes logical workgroups [s·G/T, e·G/T),
// its row blocks kept on one XCD (unitWorkgroup). The device planner (the
// compiler's plan kernel) computes the same schedule.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/SplitPlanner.h"

#include <algorithm>

using namespace mla;

namespace {
template <typename... Parts> rt::Error error(const Parts &...parts) {
  return rt::fail(Status::InvalidArgument, parts...);
}
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }
} // namespace

namespace {
/// Every row block of every item, in order, on the logical workgroup where
/// its cost starts.
void scheduleUnits(WorkList &list, const std::vector<int64_t> &kvLens,
                   const SplitOptions &options) {
  auto workgroupsOf = [&](int32_t seq) -> int64_t {
    return options.workgroupsPerItem.empty()
               ? 1
               : options.workgroupsPerItem[seq];
  };
  int64_t total = 0;
  for (size_t b = 0; b < kvLens.size(); ++b)
    total += (kvLens[b] + list.numItemsOf(b) * options.unitOverhead) *
             workgroupsOf(b);
  int64_t start = 0, perXcd = options.workgroups / options.xcds;
  for (size_t i = 0; i < list.items.size(); ++i) {
    const WorkItem &item = list.items[i];
    int64_t blocks = workgroupsOf(item.seq);
    int64_t end =
        start + (item.kvEnd - item.kvBegin + options.unitOverhead) * blocks;
    for (int64_t r = 0; r < blocks; ++r)
      list.units.push_back(
          {static_cast<int32_t>(i), static_cast<int32_t>(r),
           static_cast<int32_t>(unitWorkgroup(start, end, total, r, blocks,
                                              options.workgroups, perXcd))});
    start = end;
  }
  // Workgroup j's units: the first with workgroup >= j, up to the next's.
  size_t u = 0;
  for (int64_t j = 0; j <= options.workgroups; ++j) {
    while (u < list.units.size() && list.units[u].workgroup < j)
      ++u;
    list.workgroupUnitIndptr.push_back(static_cast<int32_t>(u));
  }
}
} // namespace

int64_t mla::unitWorkgroup(int64_t start, int64_t end, int64_t total,
                           int64_t r, int64_t rowBlocks, int64_t workgroups,
                           int64_t perXcd) {
  int64_t first = start * workgroups / total;
  int64_t last = std::max(first + 1, end * workgroups / total);
  // The part of [first, last) on first's XCD, or on the next XCD when that
  // part is larger and this one cannot give each block its own workgroup.
  int64_t xcdEnd = (first / perXcd + 1) * perXcd;
  int64_t lo = first, hi = std::min(last, xcdEnd);
  int64_t nextHi = std::min(last, xcdEnd + perXcd);
  if (hi - lo < rowBlocks && nextHi - xcdEnd > hi - lo) {
    lo = xcdEnd;
    hi = nextHi;
  }
  int64_t span = hi - lo;
  return span >= rowBlocks ? lo + r : lo + r * span / rowBlocks;
}

WorkListBounds mla::workListBounds(int64_t computeUnits, int64_t maxSeqs,
                                   int64_t maxWorkgroupsPerItem,
                                   const SplitOptions &options) {
  if (options.forcedSplits > 0) {
    int64_t items = maxSeqs * options.forcedSplits;
    return {items, items * maxWorkgroupsPerItem};
  }
  // The balanced policy fills the grid that runs at once: the persistent
  // grid where there is one (two blocks an SM on sm_90a), else the CUs.
  int64_t grid = options.workgroups > 0 ? options.workgroups : computeUnits;
  return {maxSeqs + grid, maxSeqs * maxWorkgroupsPerItem + grid};
}

int64_t mla::combineSlices(const WorkList &list, int64_t numHeads,
                           int64_t workgroups) {
  int64_t seqs = static_cast<int64_t>(list.seqItemIndptr.size()) - 1;
  int64_t most = 0;
  for (int64_t b = 0; b < seqs; ++b)
    most = std::max(most, list.numItemsOf(b));
  int64_t slices = 1;
  if (most < kCombineSliceItems)
    return slices;
  while (slices < kMaxCombineSlices &&
         seqs * numHeads * slices * 2 <= workgroups)
    slices *= 2;
  return slices;
}

rt::Expected<WorkList> mla::planSplits(int64_t computeUnits,
                                       const std::vector<int64_t> &kvLens,
                                       const SplitOptions &options) {
  if (computeUnits <= 0)
    return error("compute unit count must be positive, got ", computeUnits);
  if (options.kvTile <= 0 || (options.kvTile & (options.kvTile - 1)) != 0)
    return error("kv tile ", options.kvTile,
                 " must be a positive power of two");
  if (options.forcedSplits < 0)
    return error("splits must be positive, got ", options.forcedSplits);
  if (options.forcedSplits > options.maxSplitsPerSeq)
    return error("splits ", options.forcedSplits, " exceed the combine's fan-in of ",
                 options.maxSplitsPerSeq);
  if (options.minTilesPerItem <= 0 || options.maxSplitsPerSeq <= 0)
    return error("minTilesPerItem and maxSplitsPerSeq must be positive");
  if (options.fineItemsFrom < 0)
    return error("fineItemsFrom must not be negative, got ",
                 options.fineItemsFrom);
  if (options.workgroups < 0 || options.workgroups > INT32_MAX ||
      options.unitOverhead <= 0 || options.xcds <= 0 ||
      options.workgroups % options.xcds != 0)
    return error("workgroups must be a non-negative multiple of xcds and "
                 "unitOverhead positive");
  if (!options.workgroupsPerItem.empty() &&
      options.workgroupsPerItem.size() != kvLens.size())
    return error("workgroupsPerItem has ", options.workgroupsPerItem.size(),
                 " entries for ", kvLens.size(), " sequences");
  // Tokens weighted by the workgroups that read them.
  int64_t total = 0;
  for (size_t b = 0; b < kvLens.size(); ++b) {
    int64_t len = kvLens[b];
    if (len < 0 || len > INT32_MAX)
      return error("kv length ", len, " outside 0..2^31-1");
    int64_t workgroups = options.workgroupsPerItem.empty()
                             ? 1
                             : options.workgroupsPerItem[b];
    if (workgroups < 0 || workgroups > 1024)
      return error("workgroups per item ", workgroups, " outside 0..1024");
    total += len * workgroups;
  }

  const int64_t tile = options.kvTile;
  // share: the positions a workgroup, in whole tiles (at least one).
  int64_t share = 0, chunk = 0;
  if (options.forcedSplits == 0) {
    int64_t grid = options.workgroups > 0 ? options.workgroups : computeUnits;
    share = roundUp(ceilDiv(std::max<int64_t>(total, 1), grid), tile);
    chunk = std::max(share, options.minTilesPerItem * tile);
  }

  WorkList list;
  list.seqItemIndptr.push_back(0);
  for (size_t seq = 0; seq < kvLens.size(); ++seq) {
    int64_t len = kvLens[seq];
    int64_t splits;
    int64_t itemSize;
    if (options.forcedSplits > 0) {
      // Uniform: ceil division rounded up to tiles, so the last items may
      // be short or empty.
      splits = options.forcedSplits;
      itemSize = roundUp(std::max<int64_t>(ceilDiv(len, splits), 1), tile);
    } else {
      // Where the minimum binds, one-tile items cover the sequence (a
      // short last one); elsewhere the chunk's floor keeps the items
      // within the grid.
      bool fine = share < chunk && options.fineItemsFrom > 0 &&
                  len / chunk >= options.fineItemsFrom;
      splits = std::clamp<int64_t>(fine ? ceilDiv(len, share) : len / chunk, 1,
                                   options.maxSplitsPerSeq);
      // Equal items, boundaries on tiles; clamping keeps them inside.
      itemSize = roundUp(std::max<int64_t>(ceilDiv(len, splits), 1), tile);
      // Rounding up to tiles can leave trailing items empty: drop them.
      splits = std::max<int64_t>(ceilDiv(len, itemSize), 1);
    }
    for (int64_t i = 0; i < splits; ++i) {
      int64_t begin = std::min(i * itemSize, len);
      int64_t end = std::min((i + 1) * itemSize, len);
      int32_t slot = static_cast<int32_t>(list.items.size());
      list.items.push_back({static_cast<int32_t>(seq),
                            static_cast<int32_t>(begin),
                            static_cast<int32_t>(end), slot});
    }
    list.seqItemIndptr.push_back(static_cast<int32_t>(list.items.size()));
  }
  if (options.workgroups > 0)
    scheduleUnits(list, kvLens, options);
  return list;
}
