//===- Runtime.cpp - lanes as fibers for the emu backend ------------------===//

#include "mla/Emu/Runtime.h"

#include "mla/Emu/MFMA.h"
#include "mla/Runtime/Numerics.h"

#include <cstring>
#include <ucontext.h>

using namespace mla;
using namespace mla::emu;

namespace {
constexpr size_t kStackBytes = 512 * 1024;

enum class WaveOp { None, Mfma, Shuffle, Gather };

const char *waveOpName(WaveOp op) {
  switch (op) {
  case WaveOp::None:
    return "none";
  case WaveOp::Mfma:
    return "amdgpu.mfma";
  case WaveOp::Shuffle:
    return "gpu.shuffle";
  case WaveOp::Gather:
    return "amdgpu.gather_to_lds";
  }
  return "?";
}

struct Workgroup;

struct Lane {
  Workgroup *wg = nullptr;
  int id = 0;
  ucontext_t context;
  bool done = false;
};

/// The operands of the wave operation the lanes of one wave are gathering.
struct WaveSlot {
  WaveOp op = WaveOp::None;
  int arrived = 0;
  uint64_t generation = 0;
  Fp8Operand a, b;
  Accumulator c, d;
  std::array<uint8_t, kWaveLanes> scaleA, scaleB; // scaled MFMAs
  MatrixFormat formatA = MatrixFormat::FP8, formatB = MatrixFormat::FP8;
  std::array<float, kWaveLanes> values, results;
  std::array<int32_t, kWaveLanes> offsets;
  std::array<int64_t, kWaveLanes> src, dst;
  int64_t bytes = 0;
};

struct Workgroup {
  std::array<int64_t, 3> blockId{};
  std::vector<Lane> lanes;
  std::vector<WaveSlot> waves;
  ucontext_t scheduler;
  int barrierArrived = 0;
  uint64_t barrierGeneration = 0;
  uint64_t events = 0; // anything that can unblock a lane
  std::string error;
  const std::function<void(int64_t)> *body = nullptr;
  const DmaObserver *dma = nullptr;
};

thread_local Lane *currentLane = nullptr;

Lane &laneOf(int64_t ctx) { return *reinterpret_cast<Lane *>(ctx); }

void yield(Lane &lane) {
  swapcontext(&lane.context, &lane.wg->scheduler);
}

void fail(Lane &lane, const std::string &message) {
  if (lane.wg->error.empty())
    lane.wg->error = message;
  // Park the lane forever; the scheduler stops at the first error.
  for (;;)
    yield(lane);
}

/// Waits until the wave's 64 lanes reached the same operation; the last one
/// runs `complete` for all of them.
template <typename Complete>
void rendezvous(Lane &lane, WaveOp op, Complete complete) {
  WaveSlot &slot = lane.wg->waves[lane.id / kWaveLanes];
  if (slot.arrived == 0)
    slot.op = op;
  else if (slot.op != op)
    fail(lane, std::string("wave lanes diverge: ") + waveOpName(slot.op) +
                   " and " + waveOpName(op));
  ++lane.wg->events;
  if (++slot.arrived == kWaveLanes) {
    complete(slot);
    slot.arrived = 0;
    slot.op = WaveOp::None;
    ++slot.generation;
    return;
  }
  uint64_t generation = slot.generation;
  while (slot.generation == generation)
    yield(lane);
}

/// One lane's part of a wave MFMA: its A and B (`abBytes` each) and C
/// registers go to the wave's slot with whatever else `stage` records; the
/// last lane to arrive runs `compute`; each lane takes back its D.
template <typename Stage, typename Compute>
void waveMfma(int64_t ctx, int64_t a, int64_t b, size_t abBytes, int64_t c,
              int64_t d, Stage stage, Compute compute) {
  Lane &lane = laneOf(ctx);
  int l = lane.id % kWaveLanes;
  WaveSlot &slot = lane.wg->waves[lane.id / kWaveLanes];
  std::memcpy(slot.a[l].data(), reinterpret_cast<const void *>(a), abBytes);
  std::memcpy(slot.b[l].data(), reinterpret_cast<const void *>(b), abBytes);
  std::memcpy(slot.c[l].data(), reinterpret_cast<const void *>(c), 16);
  stage(slot, l);
  rendezvous(lane, WaveOp::Mfma, compute);
  std::memcpy(reinterpret_cast<void *>(d), slot.d[l].data(), 16);
}

void trampoline() {
  Lane &lane = *currentLane;
  (*lane.wg->body)(reinterpret_cast<int64_t>(&lane));
  lane.done = true;
  ++lane.wg->events;
  // uc_link returns to the scheduler.
}
} // namespace

//===----------------------------------------------------------------------===//
// Entry points of the lane functions
//===----------------------------------------------------------------------===//

extern "C" {
static int64_t mla_emu_thread_id(int64_t ctx) { return laneOf(ctx).id; }

static int64_t mla_emu_block_id(int64_t ctx, int64_t dim) {
  return laneOf(ctx).wg->blockId[dim];
}

static void mla_emu_barrier(int64_t ctx) {
  Lane &lane = laneOf(ctx);
  Workgroup &wg = *lane.wg;
  ++wg.events;
  if (++wg.barrierArrived == static_cast<int>(wg.lanes.size())) {
    wg.barrierArrived = 0;
    ++wg.barrierGeneration;
    return;
  }
  uint64_t generation = wg.barrierGeneration;
  while (wg.barrierGeneration == generation)
    yield(lane);
}

static float mla_emu_shuffle_xor(int64_t ctx, float value, int32_t offset) {
  Lane &lane = laneOf(ctx);
  int l = lane.id % kWaveLanes;
  WaveSlot &slot = lane.wg->waves[lane.id / kWaveLanes];
  slot.values[l] = value;
  slot.offsets[l] = offset;
  rendezvous(lane, WaveOp::Shuffle, [](WaveSlot &s) {
    for (int i = 0; i < kWaveLanes; ++i)
      s.results[i] = s.values[(i ^ s.offsets[i]) % kWaveLanes];
  });
  return slot.results[l];
}

static void mla_emu_gather_to_lds(int64_t ctx, int64_t src, int64_t dst,
                                  int64_t bytes) {
  Lane &lane = laneOf(ctx);
  int l = lane.id % kWaveLanes;
  WaveSlot &slot = lane.wg->waves[lane.id / kWaveLanes];
  slot.src[l] = src;
  slot.dst[l] = dst;
  slot.bytes = bytes;
  // The wave's data lands contiguously from lane 0's LDS address, each
  // lane's in a slot of at least a dword: 1- and 2-byte transfers are
  // zero-extended to 4 bytes, 12-byte ones padded to 16.
  Workgroup *wg = lane.wg;
  rendezvous(lane, WaveOp::Gather, [wg](WaveSlot &s) {
    int64_t stride = s.bytes < 4 ? 4 : s.bytes == 12 ? 16 : s.bytes;
    for (int i = 0; i < kWaveLanes; ++i) {
      auto *to = reinterpret_cast<char *>(s.dst[0] + i * stride);
      std::memset(to, 0, stride);
      std::memcpy(to, reinterpret_cast<const void *>(s.src[i]), s.bytes);
      if (wg->dma)
        (*wg->dma)(reinterpret_cast<const void *>(s.src[i]), s.bytes);
    }
  });
}

static void mla_emu_mfma_16x16x128_fp8(int64_t ctx, int64_t a, int64_t b,
                                       int64_t c, int64_t d) {
  waveMfma(ctx, a, b, 32, c, d, [](WaveSlot &, int) {},
           [](WaveSlot &s) { s.d = mfma16x16x128Fp8(s.a, s.b, s.c); });
}

static void mla_emu_mfma_16x16x32_bf16(int64_t ctx, int64_t a, int64_t b,
                                       int64_t c, int64_t d) {
  // Eight bf16 per lane, carried in the first 16 bytes of the fp8 slots.
  waveMfma(ctx, a, b, 16, c, d, [](WaveSlot &, int) {}, [](WaveSlot &s) {
    Bf16Operand a, b;
    for (int i = 0; i < kWaveLanes; ++i) {
      std::memcpy(a[i].data(), s.a[i].data(), 16);
      std::memcpy(b[i].data(), s.b[i].data(), 16);
    }
    s.d = mfma16x16x32Bf16(a, b, s.c);
  });
}

static void mla_emu_scaled_mfma_16x16x128(int64_t ctx, int64_t formatA,
                                          int64_t formatB, int64_t a,
                                          int64_t b, int8_t scaleA,
                                          int8_t scaleB, int64_t c,
                                          int64_t d) {
  waveMfma(
      ctx, a, b, 32, c, d,
      [&](WaveSlot &slot, int l) {
        slot.scaleA[l] = static_cast<uint8_t>(scaleA);
        slot.scaleB[l] = static_cast<uint8_t>(scaleB);
        slot.formatA = static_cast<MatrixFormat>(formatA);
        slot.formatB = static_cast<MatrixFormat>(formatB);
      },
      [](WaveSlot &s) {
        s.d = scaledMfma16x16x128(s.formatA, s.formatB, s.a, s.b, s.scaleA,
                                  s.scaleB, s.c);
      });
}

static int8_t mla_emu_cvt_f32_to_fp8(float x) {
  return static_cast<int8_t>(encodeE4M3(x));
}

static float mla_emu_cvt_fp8_to_f32(int8_t code) {
  return static_cast<float>(decodeE4M3(static_cast<uint8_t>(code)));
}
}

std::vector<std::pair<std::string, void *>> mla::emu::runtimeSymbols() {
  return {
      {"mla_emu_thread_id", reinterpret_cast<void *>(&mla_emu_thread_id)},
      {"mla_emu_block_id", reinterpret_cast<void *>(&mla_emu_block_id)},
      {"mla_emu_barrier", reinterpret_cast<void *>(&mla_emu_barrier)},
      {"mla_emu_shuffle_xor", reinterpret_cast<void *>(&mla_emu_shuffle_xor)},
      {"mla_emu_gather_to_lds",
       reinterpret_cast<void *>(&mla_emu_gather_to_lds)},
      {"mla_emu_mfma_16x16x128_fp8",
       reinterpret_cast<void *>(&mla_emu_mfma_16x16x128_fp8)},
      {"mla_emu_mfma_16x16x32_bf16",
       reinterpret_cast<void *>(&mla_emu_mfma_16x16x32_bf16)},
      {"mla_emu_scaled_mfma_16x16x128",
       reinterpret_cast<void *>(&mla_emu_scaled_mfma_16x16x128)},
      {"mla_emu_cvt_f32_to_fp8",
       reinterpret_cast<void *>(&mla_emu_cvt_f32_to_fp8)},
      {"mla_emu_cvt_fp8_to_f32",
       reinterpret_cast<void *>(&mla_emu_cvt_fp8_to_f32)},
  };
}

//===----------------------------------------------------------------------===//
// Scheduling a workgroup
//===----------------------------------------------------------------------===//

struct WorkgroupRunner::Impl {
  int numThreads;
  std::vector<std::unique_ptr<char[]>> stacks;
};

WorkgroupRunner::WorkgroupRunner(int numThreads)
    : impl(std::make_unique<Impl>()) {
  impl->numThreads = numThreads;
  for (int i = 0; i < numThreads; ++i)
    impl->stacks.emplace_back(new char[kStackBytes]);
}

WorkgroupRunner::~WorkgroupRunner() = default;

llvm::Error
WorkgroupRunner::run(std::array<int64_t, 3> blockId,
                     const std::function<void(int64_t ctx)> &body,
                     const DmaObserver *dma) {
  Workgroup wg;
  wg.blockId = blockId;
  wg.body = &body;
  wg.dma = dma;
  wg.lanes.resize(impl->numThreads);
  wg.waves.resize((impl->numThreads + kWaveLanes - 1) / kWaveLanes);
  for (int i = 0; i < impl->numThreads; ++i) {
    Lane &lane = wg.lanes[i];
    lane.wg = &wg;
    lane.id = i;
    getcontext(&lane.context);
    lane.context.uc_stack.ss_sp = impl->stacks[i].get();
    lane.context.uc_stack.ss_size = kStackBytes;
    lane.context.uc_link = &wg.scheduler;
    makecontext(&lane.context, trampoline, 0);
  }
  for (;;) {
    bool allDone = true;
    uint64_t eventsBefore = wg.events;
    for (Lane &lane : wg.lanes) {
      if (lane.done)
        continue;
      allDone = false;
      currentLane = &lane;
      swapcontext(&wg.scheduler, &lane.context);
      currentLane = nullptr;
      if (!wg.error.empty())
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "emu: " + wg.error);
    }
    if (allDone)
      return llvm::Error::success();
    if (wg.events == eventsBefore)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "emu: workgroup (%lld, %lld) deadlocked: lanes wait at a barrier or "
          "wave operation that not all of them reach",
          (long long)blockId[0], (long long)blockId[1]);
  }
}
