//===- LdsHazards.h - the emu's LDS race and DMA-retirement model -*- C++ -*-===//
//
// The emu runs a workgroup's lanes as fibers, so LDS accesses happen in
// whatever order the fibers run — an order a GPU does not promise. This
// model says whether the kernel's synchronization makes that order matter:
// it keeps, for every LDS byte of one workgroup, its last write (wave, barrier
// epoch, store or retired DMA), the waves that read it in the current epoch,
// and the newest DMA into it that has not retired. An access that depends on
// an order only a barrier or a memory_counter_wait could give is a hazard,
// reported with the waves, the byte range and both operations.
//
// Within one wave, accesses are taken in program order (a wave executes
// in lock step); across waves, only barriers order them (an epoch is the
// span between two workgroup barriers).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_EMU_LDSHAZARDS_H
#define MLA_EMU_LDSHAZARDS_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mla::emu {

/// Waves a workgroup may have (1024 lanes of 64).
constexpr int kMaxWaves = 16;

class LdsHazardModel {
public:
  /// Forgets everything: a new workgroup with `bytes` of LDS.
  void reset(int64_t bytes);

  // Each returns the hazard the access causes, as a sentence, or nothing.
  // `epoch` counts the workgroup's completed barriers.
  std::optional<std::string> read(int wave, int64_t offset, int64_t bytes,
                                  uint64_t epoch);
  std::optional<std::string> write(int wave, int64_t offset, int64_t bytes,
                                   uint64_t epoch);
  /// Wave `wave` issues DMA `id` (> 0) into the bytes; they are in flight
  /// until dmaRetired.
  std::optional<std::string> dmaIssued(int wave, uint32_t id, int64_t offset,
                                       int64_t bytes, uint64_t epoch);
  /// DMA `id` of `wave` lands: its bytes count as written now.
  void dmaRetired(int wave, uint32_t id, int64_t offset, int64_t bytes,
                  uint64_t epoch);

private:
  enum class Writer : uint8_t { None, Store, Dma };
  struct ByteState {
    uint32_t generation = 0; // the workgroup it belongs to; older = fresh
    uint32_t writeEpoch = 0;
    uint32_t readEpoch = 0;
    uint32_t pendingDma = 0; // newest unretired DMA into the byte, 0 = none
    uint16_t readers = 0;    // waves that read it in readEpoch
    int8_t writeWave = -1;
    int8_t pendingWave = -1;
    Writer writer = Writer::None;
  };

  /// The state of byte `offset`, fresh if it belongs to an older workgroup.
  ByteState &at(int64_t offset);
  enum class Access { Read, Write, Dma };
  /// What one byte's state says of an access by `wave`.
  struct Conflict {
    enum Kind : uint8_t { None, InFlight, ReadByOther, WrittenByOther } kind =
        None;
    int8_t other = -1; // the other wave
    Writer writer = Writer::None;
    bool operator==(const Conflict &o) const {
      return kind == o.kind && other == o.other && writer == o.writer;
    }
  };
  Conflict conflict(Access access, int wave, const ByteState &s,
                    uint32_t epoch) const;
  /// Finds the first byte of [offset, offset + bytes) in conflict and
  /// reports the run of bytes that share that conflict.
  std::optional<std::string> check(Access access, int wave, int64_t offset,
                                   int64_t bytes, uint32_t epoch);

  std::vector<ByteState> bytes;
  uint32_t generation = 0;
};

} // namespace mla::emu

#endif // MLA_EMU_LDSHAZARDS_H
