//===- SplitPlanner.cpp - balanced split-KV work lists --------------------===//
//
// Balanced policy: all sequences are cut into items of (about) one common
// chunk size, chosen so that the total work spreads over every CU once. An
// item of sequence b keeps w_b workgroups busy (its q_len·H query rows over
// the rows one workgroup serves), so:
//
//   chunk = max(roundUp(ceil(sum_b len_b·w_b / CUs), tile), minTilesPerItem * tile)
//   items(b) = clamp(ceil(len_b / chunk), 1, maxSplitsPerSeq)
//
// A long sequence therefore gets many items and a short one a single item
// (which can be written without a combine): on {8192, 16, 16, 16} only the
// first is split. A sequence's items are of equal size up to one tile.
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
    if (workgroups < 1 || workgroups > 1024)
      return error("workgroups per item ", workgroups, " outside 1..1024");
    total += len * workgroups;
  }

  const int64_t tile = options.kvTile;
  int64_t chunk = 0;
  if (options.forcedSplits == 0) {
    int64_t perCU = ceilDiv(std::max<int64_t>(total, 1), computeUnits);
    chunk = std::max(roundUp(perCU, tile), options.minTilesPerItem * tile);
  }

  WorkList list;
  list.seqItemIndptr.push_back(0);
  for (size_t seq = 0; seq < kvLens.size(); ++seq) {
    int64_t len = kvLens[seq];
    int64_t splits;
    int64_t itemSize;
    if (options.forcedSplits > 0) {
      // Uniform: ceil division, so the last items may be short or empty.
      splits = options.forcedSplits;
      itemSize = std::max<int64_t>(ceilDiv(len, splits), 1);
    } else {
      splits = std::clamp<int64_t>(ceilDiv(len, chunk), 1,
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
  return list;
}
