//===- FuzzPlanner.cpp - the split planner on any lengths and options -----===//
//
// The runtime plans every batch with planSplits. For any lengths and
// options it gives an error or a work list whose items tile each sequence
// exactly once, in order (on tile boundaries under the balanced policy),
// within the combine's fan-in, each item with its own partial slot.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/SplitPlanner.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace mla;

namespace {
/// Reads the input as a little stream of integers.
struct Reader {
  const uint8_t *data;
  size_t size;
  template <typename T> T next() {
    T value{};
    size_t n = std::min(sizeof(T), size);
    std::memcpy(&value, data, n);
    data += n;
    size -= n;
    return value;
  }
};

void require(bool condition) {
  if (!condition)
    std::abort();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Reader in{data, size};
  int64_t computeUnits = in.next<int16_t>();
  SplitOptions options;
  options.forcedSplits = in.next<int8_t>();
  options.kvTile = int64_t(1) << (in.next<uint8_t>() % 12);
  options.minTilesPerItem = in.next<int8_t>();
  options.fineItemsFrom = in.next<int8_t>();
  bool perItem = in.next<uint8_t>() & 1;
  std::vector<int64_t> lens;
  while (in.size >= 4 && lens.size() < 512) {
    int32_t len = in.next<int32_t>();
    lens.push_back(len % 100000); // negative lengths too
    if (perItem)
      options.workgroupsPerItem.push_back(1 + (len & 0xFF) % 8);
  }
  auto list = planSplits(computeUnits, lens, options);
  if (!list)
    return 0;
  require(list->seqItemIndptr.size() == lens.size() + 1);
  // The device planner's buffers are sized by the bounds.
  int64_t maxWorkgroups = 1;
  for (int64_t w : options.workgroupsPerItem)
    maxWorkgroups = std::max(maxWorkgroups, w);
  require(list->numItems() <=
          workListBounds(computeUnits, static_cast<int64_t>(lens.size()),
                         maxWorkgroups, options)
              .items);
  std::vector<bool> slots(list->items.size(), false);
  for (size_t b = 0; b < lens.size(); ++b) {
    int64_t begin = list->seqItemIndptr[b], end = list->seqItemIndptr[b + 1];
    require(begin < end && end - begin <= kMaxSplitsPerSeq);
    int64_t next = 0;
    for (int64_t i = begin; i < end; ++i) {
      const WorkItem &item = list->items[i];
      require(item.seq == int32_t(b) && item.kvBegin == next &&
              item.kvEnd >= item.kvBegin);
      // The balanced policy cuts on tiles; a forced split on ceil(len/N).
      if (options.forcedSplits == 0)
        require(item.kvEnd == lens[b] || item.kvEnd % options.kvTile == 0);
      require(item.partialSlot >= 0 &&
              size_t(item.partialSlot) < slots.size() &&
              !slots[item.partialSlot]);
      slots[item.partialSlot] = true;
      next = std::max<int64_t>(next, item.kvEnd);
    }
    require(next == lens[b]);
  }
  return 0;
}
