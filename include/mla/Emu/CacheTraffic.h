//===- CacheTraffic.h - where a launch's cache bytes come from --*- C++ -*-===//
//
// The emu backend's model of a launch's cache reads (mla_kv_traffic in
// <mla/runtime.h>, docs/runtime.md): the chip deals workgroup ids round-robin
// to its XCDs (id % xcds, dispatch slot id / xcds), each XCD has one L2, and
// a cache byte comes from HBM once per XCD whose workgroups read it while
// they run together.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_EMU_CACHETRAFFIC_H
#define MLA_EMU_CACHETRAFFIC_H

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mla::emu {

struct CacheTraffic {
  uint64_t cacheBytes = 0;    // distinct cache bytes read
  uint64_t dmaBytes = 0;      // bytes DMA'd from the cache, all workgroups
  uint64_t otherXcdBytes = 0; // reads on another XCD than the first reader's
  uint64_t maxSlotSpan = 0;   // widest slot distance of readers on one XCD
  int xcds = 1, cusPerXcd = 1;
};

/// One launch's cache reads. Every DMA must read inside the cache buffers
/// (a kernel that reads past them is an error, not a silent read of other
/// memory). When modelling traffic it also keeps, for every cache byte, the
/// first workgroup that read it: a later read on the same XCD is an L2 hit
/// (if the readers run together: the slot span), one on another XCD a
/// second HBM read.
class CacheReadTracker {
public:
  /// `xcds` chiplets of `cusPerXcd` CUs each; `modelTraffic`: keep the
  /// first reader of every byte (4 bytes of host memory per cache byte).
  CacheReadTracker(int xcds, int cusPerXcd, bool modelTraffic)
      : modelTraffic(modelTraffic) {
    traffic.xcds = std::max(1, xcds);
    traffic.cusPerXcd = std::max(1, cusPerXcd);
  }
  void addRange(std::string_view name, const void *begin, int64_t bytes) {
    ranges.push_back({std::string(name), static_cast<const char *>(begin), bytes,
                      std::vector<int32_t>(modelTraffic ? bytes : 0, -1)});
  }
  void setWorkgroup(int64_t linearId) { workgroup = int32_t(linearId); }
  /// The first DMA outside the cache buffers, if any.
  const std::optional<std::string> &outOfBounds() const { return stray; }
  void read(const void *src, int64_t bytes) {
    const char *p = static_cast<const char *>(src);
    for (Range &r : ranges) {
      if (p < r.begin || p + bytes > r.begin + r.bytes)
        continue;
      if (!modelTraffic)
        return;
      traffic.dmaBytes += bytes;
      for (int64_t i = p - r.begin, e = i + bytes; i < e; ++i) {
        int32_t first = r.firstReader[i];
        if (first < 0) {
          r.firstReader[i] = workgroup;
          ++traffic.cacheBytes;
        } else if (first % traffic.xcds != workgroup % traffic.xcds) {
          ++traffic.otherXcdBytes;
        } else {
          traffic.maxSlotSpan =
              std::max<uint64_t>(traffic.maxSlotSpan,
                                 (workgroup - first) / traffic.xcds);
        }
      }
      return;
    }
    if (!stray) {
      std::string where;
      for (const Range &r : ranges)
        where += (where.empty() ? "" : ", ") + r.name + " at byte offset " +
                 std::to_string(p - r.begin) + " of " +
                 std::to_string(r.bytes);
      stray = "workgroup " + std::to_string(workgroup) + " DMA'd " +
              std::to_string(bytes) + " bytes outside the cache (" + where +
              ")";
    }
  }
  const CacheTraffic &result() const { return traffic; }

private:
  struct Range {
    std::string name;
    const char *begin;
    int64_t bytes;
    std::vector<int32_t> firstReader;
  };
  bool modelTraffic;
  std::optional<std::string> stray;
  std::vector<Range> ranges;
  int32_t workgroup = 0;
  CacheTraffic traffic;
};

} // namespace mla::emu

#endif // MLA_EMU_CACHETRAFFIC_H
