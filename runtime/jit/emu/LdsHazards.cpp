//===- LdsHazards.cpp - the emu's LDS race and DMA-retirement model -------===//

#include "mla/Emu/LdsHazards.h"

#include <algorithm>

using namespace mla::emu;

void LdsHazardModel::reset(int64_t size) {
  if (static_cast<int64_t>(bytes.size()) < size)
    bytes.resize(size);
  // A new generation makes every byte fresh without touching it; on
  // wrap-around the states are cleared once.
  if (++generation == 0) {
    std::fill(bytes.begin(), bytes.end(), ByteState());
    generation = 1;
  }
}

LdsHazardModel::ByteState &LdsHazardModel::at(int64_t offset) {
  ByteState &s = bytes[offset];
  if (s.generation != generation) {
    s = ByteState();
    s.generation = generation;
  }
  return s;
}

LdsHazardModel::Conflict LdsHazardModel::conflict(Access access, int wave,
                                                  const ByteState &s,
                                                  uint32_t epoch) const {
  Conflict c;
  // A wave's own DMA may be overwritten by its next one (they retire in
  // order); anything else touching bytes in flight races with the DMA.
  if (s.pendingDma && (access != Access::Dma || s.pendingWave != wave)) {
    c.kind = Conflict::InFlight;
    c.other = s.pendingWave;
    return c;
  }
  if (access != Access::Read && s.readEpoch == epoch) {
    uint16_t others = s.readers & ~(1u << wave);
    if (others) {
      c.kind = Conflict::ReadByOther;
      c.other = static_cast<int8_t>(__builtin_ctz(others));
      return c;
    }
  }
  if (s.writer != Writer::None && s.writeWave != wave &&
      s.writeEpoch == epoch) {
    c.kind = Conflict::WrittenByOther;
    c.other = s.writeWave;
    c.writer = s.writer;
  }
  return c;
}

std::optional<std::string> LdsHazardModel::check(Access access, int wave,
                                                 int64_t offset, int64_t size,
                                                 uint32_t epoch) {
  for (int64_t i = 0; i < size; ++i) {
    Conflict c = conflict(access, wave, at(offset + i), epoch);
    if (c.kind == Conflict::None)
      continue;
    int64_t end = i + 1;
    while (end < size && conflict(access, wave, at(offset + end), epoch) == c)
      ++end;
    std::string who = "wave " + std::to_string(wave);
    std::string text = access == Access::Read    ? who + " reads"
                       : access == Access::Write ? who + " writes"
                                                 : "a DMA of " + who + " writes";
    text += " LDS bytes [" + std::to_string(offset + i) + ", " +
            std::to_string(offset + end) + ")";
    std::string other = "wave " + std::to_string(c.other);
    std::string inEpoch =
        " in the same barrier epoch (" + std::to_string(epoch) +
        " barriers passed): a barrier is missing between them";
    switch (c.kind) {
    case Conflict::InFlight:
      if (access != Access::Read)
        text += " that a DMA of " + other + " still has in flight";
      else if (c.other == wave)
        text += " whose DMA (issued by the same wave) has not retired: a "
                "memory_counter_wait before the read is missing or leaves "
                "it in flight";
      else
        text += " whose DMA from " + other +
                " has not retired: the read must follow the "
                "memory_counter_wait of " + other +
                " that retires it and a barrier after that wait";
      break;
    case Conflict::ReadByOther:
      text += " that " + other + " read" + inEpoch;
      break;
    case Conflict::WrittenByOther:
      text += " that " + other +
              (c.writer == Writer::Dma ? " filled by DMA" : " wrote") + inEpoch;
      break;
    case Conflict::None:
      break;
    }
    return text;
  }
  return std::nullopt;
}

std::optional<std::string> LdsHazardModel::read(int wave, int64_t offset,
                                                int64_t size, uint64_t epoch) {
  auto e = static_cast<uint32_t>(epoch);
  if (auto hazard = check(Access::Read, wave, offset, size, e))
    return hazard;
  for (int64_t i = 0; i < size; ++i) {
    ByteState &s = at(offset + i);
    if (s.readEpoch != e) {
      s.readEpoch = e;
      s.readers = 0;
    }
    s.readers |= 1u << wave;
  }
  return std::nullopt;
}

std::optional<std::string> LdsHazardModel::write(int wave, int64_t offset,
                                                 int64_t size, uint64_t epoch) {
  auto e = static_cast<uint32_t>(epoch);
  if (auto hazard = check(Access::Write, wave, offset, size, e))
    return hazard;
  for (int64_t i = 0; i < size; ++i) {
    ByteState &s = at(offset + i);
    s.writer = Writer::Store;
    s.writeWave = static_cast<int8_t>(wave);
    s.writeEpoch = e;
  }
  return std::nullopt;
}

std::optional<std::string> LdsHazardModel::dmaIssued(int wave, uint32_t id,
                                                     int64_t offset,
                                                     int64_t size,
                                                     uint64_t epoch) {
  auto e = static_cast<uint32_t>(epoch);
  if (auto hazard = check(Access::Dma, wave, offset, size, e))
    return hazard;
  for (int64_t i = 0; i < size; ++i) {
    ByteState &s = at(offset + i);
    s.pendingDma = id;
    s.pendingWave = static_cast<int8_t>(wave);
  }
  return std::nullopt;
}

void LdsHazardModel::dmaRetired(int wave, uint32_t id, int64_t offset,
                                int64_t size, uint64_t epoch) {
  for (int64_t i = 0; i < size; ++i) {
    ByteState &s = at(offset + i);
    // A newer DMA of the same wave into the byte stays in flight.
    if (s.pendingDma == id)
      s.pendingDma = 0;
    s.writer = Writer::Dma;
    s.writeWave = static_cast<int8_t>(wave);
    s.writeEpoch = static_cast<uint32_t>(epoch);
  }
}
