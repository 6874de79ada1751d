//===- Runtime.cpp - lanes as fibers for the emu backend ------------------===//

#include "mla/Emu/Runtime.h"

#include "mla/Emu/LdsHazards.h"
#include "mla/Emu/MFMA.h"
#include "mla/Runtime/Numerics.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <numeric>
#include <random>
#include <ucontext.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLA_EMU_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define MLA_EMU_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(MLA_EMU_ASAN)
#define MLA_EMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(MLA_EMU_TSAN)
#define MLA_EMU_TSAN 1
#endif
#ifdef MLA_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef MLA_EMU_TSAN
#include <sanitizer/tsan_interface.h>
#endif
// Lanes switch with _setjmp/_longjmp once started: swapcontext saves and
// restores the signal mask, a system call at every switch (most of the
// time of a workgroup with little work). The sanitizers' fiber
// bookkeeping follows swapcontext, so their builds keep it.
#if !defined(MLA_EMU_ASAN) && !defined(MLA_EMU_TSAN)
#define MLA_EMU_JMP_SWITCH 1
#include <csetjmp>
#endif

using namespace mla;
using namespace mla::emu;

namespace {
constexpr size_t kStackBytes = 512 * 1024;

enum class WaveOp {
  None,
  Mfma,
  Shuffle,
  Readfirstlane,
  Gather,
  Wait,
  TransposeLoad,
  LdMatrix
};

const char *waveOpName(WaveOp op) {
  switch (op) {
  case WaveOp::None:
    return "none";
  case WaveOp::Mfma:
    return "amdgpu.mfma";
  case WaveOp::Shuffle:
    return "gpu.shuffle";
  case WaveOp::Readfirstlane:
    return "rocdl.readfirstlane";
  case WaveOp::Gather:
    return "amdgpu.gather_to_lds";
  case WaveOp::Wait:
    return "amdgpu.memory_counter_wait";
  case WaveOp::TransposeLoad:
    return "amdgpu.transpose_load";
  case WaveOp::LdMatrix:
    return "nvgpu.ldmatrix";
  }
  return "?";
}

struct Workgroup;

/// Thrown on a lane's stack to end it early: at its own error, or when the
/// scheduler aborts the workgroup. Caught where the lane starts, so every
/// frame in between is destroyed (nothing leaks from a failed launch).
struct LaneAborted {};

/// A lane's stack as the sanitizers see it: swapcontext changes the stack
/// under their feet, so ASan must be told which stack becomes live (and
/// keeps the lane's fake frames) and TSan keeps one fiber per stack.
struct Fiber {
  std::unique_ptr<char[]> stack;
  void *asanFakeStack = nullptr;
  void *tsanFiber = nullptr;
#ifdef MLA_EMU_JMP_SWITCH
  // A fiber whose lane has returned waits here for the next workgroup's
  // lane, so a stack is entered with setcontext (a system call) once.
  bool parked = false;
  jmp_buf parkedAt;
#endif
};

/// The scheduler's side of the same bookkeeping.
struct SchedulerFiber {
  const void *asanStack = nullptr;
  size_t asanStackBytes = 0;
  void *asanFakeStack = nullptr;
  void *tsanFiber = nullptr;
};

struct Lane {
  Workgroup *wg = nullptr;
  int id = 0;
  ucontext_t context;
#ifdef MLA_EMU_JMP_SWITCH
  jmp_buf resume; // where the lane yielded
  bool started = false;
#endif
  Fiber *fiber = nullptr; // the lane's stack
  bool done = false;
  const char *waitingAt = nullptr; // what the lane waits for, if it does
  /// sm_90a cp.async: the copies since the last commit, then the committed
  /// groups, oldest first (each copy's bytes, read at issue).
  struct AsyncCopy {
    int64_t address = 0;
    std::vector<uint8_t> data;
  };
  std::vector<AsyncCopy> openGroup;
  std::deque<std::vector<AsyncCopy>> asyncGroups;
};

/// An LDS DMA in flight: the bytes it will write when it retires.
struct PendingDma {
  uint32_t id = 0;
  int64_t offset = 0; // in the workgroup's LDS
  std::vector<uint8_t> data;
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
  int32_t firstLane = 0; // readfirstlane
  std::array<int64_t, kWaveLanes> src, dst;
  std::array<int64_t, kWaveLanes> readable; // gather_to_lds: bytes read from src
  int64_t bytes = 0;
  int64_t elementBits = 0; // transpose_load
  int64_t outstanding = 0; // memory_counter_wait: DMAs that may stay
  std::array<std::array<uint8_t, 8>, kWaveLanes> transposed; // transpose_load
  std::array<std::array<uint8_t, 16>, kWaveLanes> matrices;  // ldmatrix
  int64_t tiles = 0;
  bool transpose = false;
  std::deque<PendingDma> dmas; // in flight, oldest first
};

/// An sm_90a mbarrier (by its shared-memory address): a phase completes
/// when its pending arrivals reach 0 and its transaction count is 0; the
/// bulk copies on it land then.
struct MBarrier {
  int64_t expected = 0, pending = 0, tx = 0;
  uint64_t phase = 0;
  std::vector<Lane::AsyncCopy> copies;
};

struct Workgroup {
  std::array<int64_t, 3> blockId{};
  std::map<int64_t, MBarrier> mbarriers; // the valid ones
  std::vector<Lane> lanes;
  std::vector<WaveSlot> waves;
  ucontext_t scheduler{};
#ifdef MLA_EMU_JMP_SWITCH
  jmp_buf schedulerResume; // where the scheduler switched to a lane
#endif
  SchedulerFiber schedulerFiber;
  bool aborting = false; // lanes resumed now unwind (LaneAborted)
  int barrierArrived = 0;
  uint64_t barrierGeneration = 0;
  uint64_t events = 0; // anything that can unblock a lane
  std::string error;
  const std::function<void(int64_t)> *body = nullptr;
  WorkgroupOptions options;
  LdsHazardModel *hazards = nullptr; // null: not checked
  uint32_t dmaIds = 0;
  std::mt19937_64 random; // the schedule when options.scheduleSeed != 0
};

thread_local Lane *currentLane = nullptr;

Lane &laneOf(int64_t ctx) { return *reinterpret_cast<Lane *>(ctx); }

/// `to` = `from`. On x86-64 glibc a context points into itself for its
/// floating-point state; the copy must point into its own.
void copyContext(ucontext_t &to, const ucontext_t &from) {
  to = from;
#if defined(__x86_64__) && defined(__GLIBC__)
  to.uc_mcontext.fpregs = &to.__fpregs_mem;
#endif
}

/// The scheduler runs `lane` until it yields or returns.
void switchToLane(Workgroup &wg, Lane &lane) {
  SchedulerFiber &self = wg.schedulerFiber;
#ifdef MLA_EMU_ASAN
  __sanitizer_start_switch_fiber(&self.asanFakeStack, lane.fiber->stack.get(),
                                 kStackBytes);
#endif
#ifdef MLA_EMU_TSAN
  self.tsanFiber = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(lane.fiber->tsanFiber, 0);
#endif
#ifdef MLA_EMU_JMP_SWITCH
  // The lane comes back with _longjmp(schedulerResume) when it yields or
  // ends.
  if (_setjmp(wg.schedulerResume) == 0) {
    if (lane.started)
      _longjmp(lane.resume, 1);
    lane.started = true;
    if (lane.fiber->parked) {
      lane.fiber->parked = false;
      _longjmp(lane.fiber->parkedAt, 1);
    }
    // The first entry into the stack needs no saved context: the lane
    // comes back by _longjmp, never through uc_link.
    setcontext(&lane.context);
  }
#else
  swapcontext(&wg.scheduler, &lane.context);
#endif
#ifdef MLA_EMU_ASAN
  __sanitizer_finish_switch_fiber(self.asanFakeStack, nullptr, nullptr);
#endif
  (void)self;
}

/// A lane's first step on its stack: learn the scheduler's.
void enteredLane(Lane &lane) {
#ifdef MLA_EMU_ASAN
  SchedulerFiber &scheduler = lane.wg->schedulerFiber;
  __sanitizer_finish_switch_fiber(nullptr, &scheduler.asanStack,
                                  &scheduler.asanStackBytes);
#endif
  (void)lane;
}

void yield(Lane &lane) {
  SchedulerFiber &scheduler = lane.wg->schedulerFiber;
#ifdef MLA_EMU_ASAN
  __sanitizer_start_switch_fiber(&lane.fiber->asanFakeStack,
                                 scheduler.asanStack, scheduler.asanStackBytes);
#endif
#ifdef MLA_EMU_TSAN
  __tsan_switch_to_fiber(scheduler.tsanFiber, 0);
#endif
#ifdef MLA_EMU_JMP_SWITCH
  if (_setjmp(lane.resume) == 0)
    _longjmp(lane.wg->schedulerResume, 1);
#else
  swapcontext(&lane.context, &lane.wg->scheduler);
#endif
#ifdef MLA_EMU_ASAN
  __sanitizer_finish_switch_fiber(lane.fiber->asanFakeStack,
                                  &scheduler.asanStack,
                                  &scheduler.asanStackBytes);
#endif
  (void)scheduler;
  if (lane.wg->aborting)
    throw LaneAborted{};
}

[[noreturn]] void fail(Lane &lane, const std::string &message) {
  if (lane.wg->error.empty())
    lane.wg->error = message;
  // The scheduler stops the workgroup at the first error; this lane's stack
  // unwinds now (through the JIT'd frames, whose unwind tables ORC
  // registers), the others' when the scheduler aborts them.
  throw LaneAborted{};
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
  lane.waitingAt = waveOpName(op);
  while (slot.generation == generation)
    yield(lane);
  lane.waitingAt = nullptr;
}

std::string workgroupName(const Workgroup &wg) {
  return "workgroup (" + std::to_string(wg.blockId[0]) + ", " +
         std::to_string(wg.blockId[1]) + ", " + std::to_string(wg.blockId[2]) +
         ")";
}

void failHazard(Lane &lane, const std::string &hazard) {
  fail(lane, "LDS hazard in " + workgroupName(*lane.wg) + ": " + hazard);
}

/// The offset of [address, address + bytes) in the workgroup's LDS; an
/// access outside it is an error.
int64_t ldsOffset(Lane &lane, int64_t address, int64_t bytes,
                  const char *what) {
  const Workgroup &wg = *lane.wg;
  int64_t offset = address - reinterpret_cast<int64_t>(wg.options.lds);
  if (offset < 0 || bytes < 0 || offset + bytes > wg.options.ldsBytes)
    fail(lane, std::string(what) + " of " + std::to_string(bytes) +
                   " bytes outside the workgroup's " +
                   std::to_string(wg.options.ldsBytes) + " bytes of LDS in " +
                   workgroupName(wg) + " (wave " +
                   std::to_string(lane.id / kWaveLanes) + ")");
  return offset;
}

/// The oldest DMA of `wave` lands in LDS.
void retireDma(Workgroup &wg, int wave) {
  PendingDma &d = wg.waves[wave].dmas.front();
  std::memcpy(wg.options.lds + d.offset, d.data.data(), d.data.size());
  if (wg.hazards)
    wg.hazards->dmaRetired(wave, d.id, d.offset, d.data.size(),
                           wg.barrierGeneration);
  wg.waves[wave].dmas.pop_front();
}

/// A lane's LDS access (before it happens): checked, and with a random
/// schedule a point where another lane may run first.
void ldsAccess(int64_t ctx, int64_t address, int64_t bytes, bool isWrite) {
  Lane &lane = laneOf(ctx);
  Workgroup &wg = *lane.wg;
  int64_t offset =
      ldsOffset(lane, address, bytes, isWrite ? "an LDS write" : "an LDS read");
  if (wg.options.scheduleSeed && (wg.random() & 7) == 0) {
    ++wg.events;
    yield(lane);
  }
  if (!wg.hazards)
    return;
  int wave = lane.id / kWaveLanes;
  auto hazard =
      isWrite ? wg.hazards->write(wave, offset, bytes, wg.barrierGeneration)
              : wg.hazards->read(wave, offset, bytes, wg.barrierGeneration);
  if (hazard)
    failHazard(lane, *hazard);
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

/// Where a lane starts (makecontext) and ends (uc_link back to the
/// scheduler). TSan keeps a shadow call stack per fiber: an instrumented
/// trampoline would push its frame on the lane's fiber and pop it from the
/// scheduler's, which it has switched to before returning. So the
/// trampoline stays uninstrumented and switches fibers itself; what it
/// calls pushes and pops on the lane's fiber alone.
#if defined(__clang__)
__attribute__((disable_sanitizer_instrumentation))
#endif
void runLane(Lane &lane) {
  enteredLane(lane);
  try {
    if (!lane.wg->aborting)
      (*lane.wg->body)(reinterpret_cast<int64_t>(&lane));
  } catch (const LaneAborted &) {
  }
  lane.done = true;
  ++lane.wg->events;
}

#if defined(__clang__)
__attribute__((disable_sanitizer_instrumentation))
#endif
void trampoline() {
#ifdef MLA_EMU_JMP_SWITCH
  // Runs one lane after another on this fiber (see Fiber::parked).
  for (;;) {
    Lane &lane = *currentLane;
    runLane(lane);
    if (_setjmp(lane.fiber->parkedAt) == 0) {
      lane.fiber->parked = true;
      _longjmp(lane.wg->schedulerResume, 1);
    }
  }
#else
  Lane &lane = *currentLane;
  runLane(lane);
  // The lane's stack is dead once the scheduler runs (a null fake-stack slot
  // tells ASan so); uc_link returns to the scheduler.
  SchedulerFiber &scheduler = lane.wg->schedulerFiber;
#ifdef MLA_EMU_ASAN
  __sanitizer_start_switch_fiber(nullptr, scheduler.asanStack,
                                 scheduler.asanStackBytes);
#endif
#ifdef MLA_EMU_TSAN
  __tsan_switch_to_fiber(scheduler.tsanFiber, 0);
#endif
  (void)scheduler;
#endif
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

static int64_t mla_emu_grid_dim(int64_t ctx, int64_t dim) {
  return laneOf(ctx).wg->options.grid[dim];
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
  lane.waitingAt = "a barrier";
  while (wg.barrierGeneration == generation)
    yield(lane);
  lane.waitingAt = nullptr;
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

/// The first lane's value, for every lane (the whole wave is active).
static int32_t mla_emu_readfirstlane(int64_t ctx, int32_t value) {
  Lane &lane = laneOf(ctx);
  int l = lane.id % kWaveLanes;
  WaveSlot &slot = lane.wg->waves[lane.id / kWaveLanes];
  slot.offsets[l] = value;
  rendezvous(lane, WaveOp::Readfirstlane, [](WaveSlot &s) {
    s.firstLane = s.offsets[0];
  });
  return slot.firstLane;
}

/// `readable` of the lane's `bytes` come from `src`, the rest are zeros (a
/// buffer's bounds check).
static void mla_emu_gather_to_lds(int64_t ctx, int64_t src, int64_t dst,
                                  int64_t bytes, int64_t readable) {
  Lane &lane = laneOf(ctx);
  int l = lane.id % kWaveLanes;
  int wave = lane.id / kWaveLanes;
  WaveSlot &slot = lane.wg->waves[wave];
  slot.src[l] = src;
  slot.readable[l] = readable;
  slot.dst[l] = dst;
  slot.bytes = bytes;
  // The wave's data lands contiguously from lane 0's LDS address, each
  // lane's in a slot of at least a dword: 1- and 2-byte transfers are
  // zero-extended to 4 bytes, 12-byte ones padded to 16. It is read now and
  // lands when a memory_counter_wait retires the DMA.
  Workgroup *wg = lane.wg;
  rendezvous(lane, WaveOp::Gather, [&](WaveSlot &s) {
    int64_t stride = s.bytes < 4 ? 4 : s.bytes == 12 ? 16 : s.bytes;
    PendingDma dma;
    dma.id = ++wg->dmaIds;
    dma.offset = ldsOffset(lane, s.dst[0], kWaveLanes * stride, "an LDS DMA");
    dma.data.assign(kWaveLanes * stride, 0);
    for (int i = 0; i < kWaveLanes; ++i) {
      if (s.readable[i] <= 0)
        continue;
      std::memcpy(dma.data.data() + i * stride,
                  reinterpret_cast<const void *>(s.src[i]), s.readable[i]);
      if (wg->options.dma)
        (*wg->options.dma)(reinterpret_cast<const void *>(s.src[i]),
                           s.readable[i]);
    }
    if (wg->hazards)
      if (auto hazard = wg->hazards->dmaIssued(wave, dma.id, dma.offset,
                                               dma.data.size(),
                                               wg->barrierGeneration))
        failHazard(lane, *hazard);
    s.dmas.push_back(std::move(dma));
  });
}

static void mla_emu_wait_loads(int64_t ctx, int64_t outstanding) {
  Lane &lane = laneOf(ctx);
  int wave = lane.id / kWaveLanes;
  Workgroup &wg = *lane.wg;
  wg.waves[wave].outstanding = outstanding;
  // vmcnt(N): the wave's oldest DMAs retire until at most N are in flight.
  rendezvous(lane, WaveOp::Wait, [&](WaveSlot &s) {
    while (static_cast<int64_t>(s.dmas.size()) > std::max<int64_t>(s.outstanding, 0))
      retireDma(wg, wave);
  });
}

/// ds_read_b64_tr_b4 / _b8 / _b16: each lane names 8 bytes of LDS; within
/// each group of 16 lanes the elements are exchanged so that lane L's
/// element j is element L%n of the 8 bytes of lane G + (L%16)/n + (16/n)·j,
/// where G is the group's first lane and n = 64 / element bits (tr_b4: a
/// plain 16x16 nibble transpose; element k of 8 bytes sits at bits
/// bits·k.., little-endian).
static void mla_emu_transpose_load(int64_t ctx, int64_t address,
                                   int64_t elementBits, int64_t result) {
  Lane &lane = laneOf(ctx);
  int64_t offset = ldsOffset(lane, address, 8, "an LDS transpose load");
  if (offset % 8 != 0)
    fail(lane, "amdgpu.transpose_load of a lane at LDS byte " +
                   std::to_string(offset) + " in " + workgroupName(*lane.wg) +
                   ": its 8 bytes must be 8-byte aligned");
  ldsAccess(ctx, address, 8, /*isWrite=*/false);
  int l = lane.id % kWaveLanes;
  WaveSlot &slot = lane.wg->waves[lane.id / kWaveLanes];
  slot.src[l] = address;
  slot.elementBits = elementBits;
  rendezvous(lane, WaveOp::TransposeLoad, [](WaveSlot &s) {
    int64_t bits = s.elementBits, perLane = 64 / bits;
    uint64_t mask = (1ull << bits) - 1;
    for (int L = 0; L < kWaveLanes; ++L) {
      int group = L & ~15, inGroup = L & 15;
      uint64_t out = 0;
      for (int64_t j = 0; j < perLane; ++j) {
        int from = group + inGroup / perLane + (16 / perLane) * j;
        uint64_t word;
        std::memcpy(&word, reinterpret_cast<const void *>(s.src[from]), 8);
        uint64_t element = (word >> (bits * (inGroup % perLane))) & mask;
        out |= element << (bits * j);
      }
      std::memcpy(s.transposed[L].data(), &out, 8);
    }
  });
  std::memcpy(reinterpret_cast<void *>(result), slot.transposed[l].data(), 8);
}

/// sm_90a ldmatrix.x{1,2,4}[.trans] of b16 matrices, per 32-lane warp:
/// lane 8 i + r names the 16 bytes of row r of matrix i; lane l receives,
/// of each matrix, row l / 4 at columns 2 (l % 4) and 2 (l % 4) + 1 — with
/// .trans, column l / 4 at rows 2 (l % 4) and 2 (l % 4) + 1.
static void mla_emu_ldmatrix(int64_t ctx, int64_t address, int64_t tiles,
                             int64_t transpose, int64_t result) {
  Lane &lane = laneOf(ctx);
  int l = lane.id % kWaveLanes;
  bool names = l % 32 < 8 * tiles;
  if (names) {
    int64_t offset = ldsOffset(lane, address, 16, "an ldmatrix row");
    if (offset % 16 != 0)
      fail(lane, "nvgpu.ldmatrix row at shared byte " +
                     std::to_string(offset) + " in " + workgroupName(*lane.wg) +
                     ": rows must be 16-byte aligned");
    ldsAccess(ctx, address, 16, /*isWrite=*/false);
  }
  WaveSlot &slot = lane.wg->waves[lane.id / kWaveLanes];
  slot.src[l] = names ? address : 0;
  slot.tiles = tiles;
  slot.transpose = transpose != 0;
  rendezvous(lane, WaveOp::LdMatrix, [](WaveSlot &s) {
    for (int L = 0; L < kWaveLanes; ++L) {
      int warp = L & ~31, w = L & 31;
      for (int64_t i = 0; i < s.tiles; ++i)
        for (int e = 0; e < 2; ++e) {
          int row = s.transpose ? 2 * (w % 4) + e : w / 4;
          int col = s.transpose ? w / 4 : 2 * (w % 4) + e;
          std::memcpy(s.matrices[L].data() + 4 * i + 2 * e,
                      reinterpret_cast<const uint8_t *>(
                          s.src[warp + 8 * i + row]) + 2 * col, 2);
        }
    }
  });
  std::memcpy(reinterpret_cast<void *>(result), slot.matrices[l].data(),
              4 * tiles);
}

static void mla_emu_lds_read(int64_t ctx, int64_t address, int64_t bytes) {
  ldsAccess(ctx, address, bytes, /*isWrite=*/false);
}

static void mla_emu_lds_write(int64_t ctx, int64_t address, int64_t bytes) {
  ldsAccess(ctx, address, bytes, /*isWrite=*/true);
}

/// Index `index` of dimension `dim` of a global memref of `size` there,
/// with the `count` elements from it that an access reads or writes: one
/// outside the memref is an error (on a GPU it reads or writes other memory,
/// or faults).
static void mla_emu_global_index(int64_t ctx, int64_t isWrite, int64_t dim,
                                 int64_t index, int64_t count, int64_t size) {
  if (index >= 0 && index <= size - count)
    return;
  Lane &lane = laneOf(ctx);
  fail(lane, std::string(isWrite ? "a global write" : "a global read") +
                 " outside its buffer in " + workgroupName(*lane.wg) +
                 " (thread " + std::to_string(lane.id) + "): index " +
                 std::to_string(index) +
                 (count > 1 ? " (+" + std::to_string(count) + " elements)"
                            : std::string()) +
                 " of dimension " + std::to_string(dim) + " of size " +
                 std::to_string(size));
}

/// An asynchronous copy's source bytes, read at issue, for `dst`.
static Lane::AsyncCopy captureCopy(int64_t src, int64_t dst, int64_t bytes) {
  Lane::AsyncCopy copy;
  copy.address = dst;
  const auto *from = reinterpret_cast<const uint8_t *>(src);
  copy.data.assign(from, from + bytes);
  return copy;
}

/// The copy's bytes land in shared memory, as the lane's write now.
static void landCopy(int64_t ctx, const Lane::AsyncCopy &copy) {
  ldsAccess(ctx, copy.address, static_cast<int64_t>(copy.data.size()),
            /*isWrite=*/true);
  std::memcpy(reinterpret_cast<void *>(copy.address), copy.data.data(),
              copy.data.size());
}

/// sm_90a cp.async of `bytes` (4, 8 or 16) from global to shared memory:
/// the source is read now, the shared bytes land when a wait retires the
/// copy's group, as the lane's write at that point.
static void mla_emu_async_copy(int64_t ctx, int64_t src, int64_t dst,
                               int64_t bytes) {
  Lane &lane = laneOf(ctx);
  ldsOffset(lane, dst, bytes, "a cp.async");
  if (dst % bytes != 0 || src % bytes != 0)
    fail(lane, "cp.async of " + std::to_string(bytes) +
                   " bytes needs addresses aligned to them");
  lane.openGroup.push_back(captureCopy(src, dst, bytes));
}

/// cp.async.commit_group: the lane's copies since the last one, a group.
static void mla_emu_async_commit(int64_t ctx) {
  Lane &lane = laneOf(ctx);
  lane.asyncGroups.push_back(std::move(lane.openGroup));
  lane.openGroup.clear();
}

/// cp.async.wait_group N: the lane's oldest groups land until at most N
/// are pending.
static void mla_emu_async_wait(int64_t ctx, int64_t pending) {
  Lane &lane = laneOf(ctx);
  while (static_cast<int64_t>(lane.asyncGroups.size()) > pending) {
    for (const Lane::AsyncCopy &copy : lane.asyncGroups.front())
      landCopy(ctx, copy);
    lane.asyncGroups.pop_front();
  }
}

/// The valid mbarrier at `address` (8-byte aligned, in the LDS).
static MBarrier &mbarrierAt(Lane &lane, int64_t address, const char *what) {
  ldsOffset(lane, address, 8, what);
  auto it = lane.wg->mbarriers.find(address);
  if (address % 8 != 0 || it == lane.wg->mbarriers.end())
    fail(lane, std::string(what) + " on no valid mbarrier (at LDS offset " +
                   std::to_string(address - reinterpret_cast<int64_t>(
                                                lane.wg->options.lds)) +
                   ")");
  return it->second;
}

/// Completes the barrier's phase if it is due: its copies land (as the
/// writes of the lane that completed it), the next phase begins.
static void completeIfDue(int64_t ctx, MBarrier &barrier) {
  constexpr int64_t kTxLimit = (1 << 20) - 1;
  if (barrier.tx > kTxLimit || barrier.tx < -kTxLimit)
    fail(laneOf(ctx), "an mbarrier's transaction count " +
                          std::to_string(barrier.tx) +
                          " outside +-(2^20 - 1)");
  if (barrier.pending != 0 || barrier.tx != 0)
    return;
  for (const Lane::AsyncCopy &copy : barrier.copies)
    landCopy(ctx, copy);
  barrier.copies.clear();
  barrier.pending = barrier.expected;
  ++barrier.phase;
  ++laneOf(ctx).wg->events;
}

/// mbarrier.init: phase 0, `count` arrivals expected; a valid barrier must
/// be invalidated first.
static void mla_emu_mbarrier_init(int64_t ctx, int64_t address,
                                  int64_t count) {
  Lane &lane = laneOf(ctx);
  ldsOffset(lane, address, 8, "an mbarrier.init");
  if (address % 8 != 0)
    fail(lane, "an mbarrier.init on an address not 8-byte aligned");
  if (count < 1 || count >= (1 << 20))
    fail(lane, "an mbarrier.init with " + std::to_string(count) +
                   " arrivals (1 .. 2^20 - 1)");
  auto [it, inserted] = lane.wg->mbarriers.try_emplace(address);
  if (!inserted)
    fail(lane, "an mbarrier.init on a valid mbarrier (invalidate it first)");
  it->second.expected = it->second.pending = count;
}

/// mbarrier.inval: the barrier must be idle (no arrival or copy of a
/// phase in progress).
static void mla_emu_mbarrier_inval(int64_t ctx, int64_t address) {
  Lane &lane = laneOf(ctx);
  MBarrier &barrier = mbarrierAt(lane, address, "an mbarrier.inval");
  if (barrier.pending != barrier.expected || barrier.tx != 0 ||
      !barrier.copies.empty())
    fail(lane, "an mbarrier.inval while a phase is in progress");
  lane.wg->mbarriers.erase(address);
}

/// mbarrier.arrive.expect_tx: `tx` more bytes expected, one arrival.
static void mla_emu_mbarrier_arrive_expect_tx(int64_t ctx, int64_t address,
                                              int64_t tx) {
  Lane &lane = laneOf(ctx);
  MBarrier &barrier = mbarrierAt(lane, address, "an mbarrier.arrive");
  barrier.tx += tx;
  if (--barrier.pending < 0)
    fail(lane, "more arrivals on an mbarrier than its phase expects");
  completeIfDue(ctx, barrier);
}

/// mbarrier.try_wait.parity in a loop: until the phase of parity `parity`
/// has completed (the current phase's parity differs).
static void mla_emu_mbarrier_wait_parity(int64_t ctx, int64_t address,
                                         int64_t parity) {
  Lane &lane = laneOf(ctx);
  ++lane.wg->events;
  lane.waitingAt = "an mbarrier";
  while (static_cast<int64_t>(
             mbarrierAt(lane, address, "an mbarrier wait").phase % 2) ==
         parity % 2)
    yield(lane);
  lane.waitingAt = nullptr;
}

/// cp.async.bulk global -> shared on an mbarrier: the source is read now,
/// its bytes count against the barrier's transactions and land when the
/// phase completes.
static void mla_emu_bulk_copy(int64_t ctx, int64_t src, int64_t dst,
                              int64_t bytes, int64_t address) {
  Lane &lane = laneOf(ctx);
  ldsOffset(lane, dst, bytes, "a cp.async.bulk");
  if (bytes <= 0 || bytes % 16 != 0 || dst % 16 != 0 || src % 16 != 0)
    fail(lane, "a cp.async.bulk of " + std::to_string(bytes) +
                   " bytes needs a multiple of 16 and 16-byte aligned "
                   "addresses");
  MBarrier &barrier = mbarrierAt(lane, address, "a cp.async.bulk");
  barrier.copies.push_back(captureCopy(src, dst, bytes));
  barrier.tx -= bytes;
  completeIfDue(ctx, barrier);
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

static void mla_emu_mma_sync_16x8x16(int64_t ctx, int64_t a, int64_t b,
                                     int64_t c, int64_t d, int64_t f16) {
  // A: 8 bf16 or f16 a lane, B: 4 (the slot's first 16 bytes, the rest
  // unused).
  waveMfma(ctx, a, b, 16, c, d, [](WaveSlot &, int) {}, [f16](WaveSlot &s) {
    Bf16Operand a, b;
    for (int i = 0; i < kWaveLanes; ++i) {
      std::memcpy(a[i].data(), s.a[i].data(), 16);
      std::memcpy(b[i].data(), s.b[i].data(), 16);
    }
    s.d = mmaSync16x8x16(a, b, s.c, f16 != 0);
  });
}

/// sm_90a wgmma.mma_async m64nNk16 .f32.bf16.bf16 with both operands in
/// shared memory, per lane. A descriptor holds the start, leading and
/// stride byte offsets (16-byte units) and the layout: without swizzle,
/// core matrices of 8 x 16 bytes (128 contiguous bytes; 8 rows of 8 K
/// values, or with `aMnMajor` 8 K rows of 8 M values) stepped by the
/// leading offset along K and the stride along M or N; A MN-major in the
/// 128-byte swizzle, 128-byte rows of 64 M values, 8-row groups a stride
/// apart along K, 64-value atoms the leading offset apart along M, each
/// 16-byte chunk stored at address bits 4-6 XOR bits 7-9; K-major in the
/// 128-, 64- or 32-byte swizzle, rows of that many bytes holding K from the
/// start address on, 8-row groups the stride apart along M or N, address
/// bits 4.. XOR bits 7.. (3, 2 or 1 of them). Lane 32 w + 4 g
/// + t of the warpgroup holds, of n-block j, D rows 16 w + g (+ 8) at
/// columns 8 j + 2 t (+ 1) (registers 4 j .. 4 j + 3). The 16 products are
/// exact; their sum and C round once to f32.
static void mla_emu_wgmma_bf16(int64_t ctx, int64_t descA, int64_t descB,
                               int64_t n, int64_t aMnMajor, int64_t accumulate,
                               int64_t c, int64_t d) {
  Lane &lane = laneOf(ctx);
  Workgroup &wg = *lane.wg;
  // The descriptor holds an 18-bit shared-window address: the emu's LDS
  // is aligned so that a host address's low 18 bits are its LDS offset.
  if (reinterpret_cast<uintptr_t>(wg.options.lds) & 0x3FFFF)
    fail(lane, "emu: wgmma needs the workgroup's LDS 256 KiB-aligned");
  struct Operand {
    int64_t start, leading, stride;
    /// The swizzle's row bytes (128, 64, 32), 0 without.
    int64_t swizzleBytes;
  };
  auto decode = [&](int64_t desc) {
    auto field = [&](int shift) { return ((desc >> shift) & 0x3FFF) << 4; };
    auto layout = static_cast<uint64_t>(desc) >> 62;
    if (((static_cast<uint64_t>(desc) >> 49) & 7) != 0)
      fail(lane, "emu: wgmma descriptors with a base offset are not "
                 "modelled");
    const int64_t rowBytes[4] = {0, 128, 64, 32};
    return Operand{field(0), field(16), field(32), rowBytes[layout]};
  };
  Operand a = decode(descA), b = decode(descB);
  if (a.swizzleBytes && (!aMnMajor || a.swizzleBytes != 128))
    fail(lane, "emu: a swizzled A is modelled MN-major in the 128-byte "
               "swizzle only");
  // The bf16 at (mn, k): its byte offset, checked, and its value. Swizzled,
  // address bits 4.. (as many as the row has 16-byte chunks) are XORed by
  // bits 7..; K-major swizzled rows hold K from the start address on.
  auto element = [&](const Operand &op, bool mnMajor, int64_t mn, int64_t k) {
    int64_t offset;
    if (op.swizzleBytes && mnMajor) {
      offset = op.start + (mn / 64) * op.leading + (k / 8) * op.stride +
               (k % 8) * 128 + 2 * (mn % 64);
      offset ^= ((offset >> 7) & 7) << 4;
    } else if (op.swizzleBytes) {
      offset = op.start + (mn / 8) * op.stride +
               (mn % 8) * op.swizzleBytes + 2 * k;
      offset ^= ((offset >> 7) & (op.swizzleBytes / 16 - 1)) << 4;
    } else if (mnMajor) {
      offset = op.start + (mn / 8) * op.stride + (k / 8) * op.leading +
               (k % 8) * 16 + 2 * (mn % 8);
    } else {
      offset = op.start + (mn / 8) * op.stride + (k / 8) * op.leading +
               (mn % 8) * 16 + 2 * (k % 8);
    }
    // Checked against the LDS bounds and the hazard model.
    ldsAccess(ctx, reinterpret_cast<int64_t>(wg.options.lds) + offset, 2,
              /*isWrite=*/false);
    uint16_t bits;
    std::memcpy(&bits, wg.options.lds + offset, 2);
    return static_cast<double>(bf16ToFloat(bits));
  };
  int r = lane.id % 128, w = r / 32, g = (r % 32) / 4, t = r % 4;
  // The lane's two rows of A and 2 n / 8 columns of B, each read once.
  std::array<std::array<double, 16>, 2> aRows;
  std::vector<std::array<double, 16>> bColumns(n / 4);
  for (int64_t k = 0; k < 16; ++k) {
    for (int half = 0; half < 2; ++half)
      aRows[half][k] = element(a, aMnMajor != 0, 16 * w + g + 8 * half, k);
    for (int64_t i = 0; i < n / 4; ++i)
      bColumns[i][k] =
          element(b, /*mnMajor=*/false, 8 * (i / 2) + 2 * t + i % 2, k);
  }
  const auto *in = reinterpret_cast<const float *>(c);
  auto *out = reinterpret_cast<float *>(d);
  for (int64_t j = 0; j < n / 8; ++j)
    for (int half = 0; half < 2; ++half)
      for (int e = 0; e < 2; ++e) {
        int64_t reg = 4 * j + 2 * half + e;
        double sum = accumulate ? in[reg] : 0.0;
        for (int64_t k = 0; k < 16; ++k)
          sum += aRows[half][k] * bColumns[2 * j + e][k];
        out[reg] = static_cast<float>(sum);
      }
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

/// E2M1 element `element` (0..7, low nibble first) of `word` times `scale`.
static float mla_emu_scaled_fp4_to_f32(int32_t word, int64_t element,
                                       float scale) {
  auto code = static_cast<uint8_t>((static_cast<uint32_t>(word) >>
                                    (4 * element)) & 0xF);
  return static_cast<float>(decodeE2M1(code) * static_cast<double>(scale));
}

static int32_t mla_emu_prmt(int32_t lo, int32_t hi, int32_t selector) {
  uint64_t pool = static_cast<uint32_t>(lo) |
                  static_cast<uint64_t>(static_cast<uint32_t>(hi)) << 32;
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) {
    uint32_t nibble = (static_cast<uint32_t>(selector) >> (4 * i)) & 0xF;
    uint32_t byte = (pool >> (8 * (nibble & 7))) & 0xFF;
    if (nibble & 8)
      byte = (byte & 0x80) ? 0xFF : 0;
    out |= byte << (8 * i);
  }
  return static_cast<int32_t>(out);
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
      {"mla_emu_grid_dim", reinterpret_cast<void *>(&mla_emu_grid_dim)},
      {"mla_emu_barrier", reinterpret_cast<void *>(&mla_emu_barrier)},
      {"mla_emu_shuffle_xor", reinterpret_cast<void *>(&mla_emu_shuffle_xor)},
      {"mla_emu_readfirstlane",
       reinterpret_cast<void *>(&mla_emu_readfirstlane)},
      {"mla_emu_mma_sync_16x8x16",
       reinterpret_cast<void *>(&mla_emu_mma_sync_16x8x16)},
      {"mla_emu_gather_to_lds",
       reinterpret_cast<void *>(&mla_emu_gather_to_lds)},
      {"mla_emu_wait_loads", reinterpret_cast<void *>(&mla_emu_wait_loads)},
      {"mla_emu_lds_read", reinterpret_cast<void *>(&mla_emu_lds_read)},
      {"mla_emu_transpose_load",
       reinterpret_cast<void *>(&mla_emu_transpose_load)},
      {"mla_emu_ldmatrix", reinterpret_cast<void *>(&mla_emu_ldmatrix)},
      {"mla_emu_prmt", reinterpret_cast<void *>(&mla_emu_prmt)},
      {"mla_emu_wgmma_bf16", reinterpret_cast<void *>(&mla_emu_wgmma_bf16)},
      {"mla_emu_lds_write", reinterpret_cast<void *>(&mla_emu_lds_write)},
      {"mla_emu_global_index",
       reinterpret_cast<void *>(&mla_emu_global_index)},
      {"mla_emu_async_copy", reinterpret_cast<void *>(&mla_emu_async_copy)},
      {"mla_emu_async_commit",
       reinterpret_cast<void *>(&mla_emu_async_commit)},
      {"mla_emu_async_wait", reinterpret_cast<void *>(&mla_emu_async_wait)},
      {"mla_emu_mbarrier_init",
       reinterpret_cast<void *>(&mla_emu_mbarrier_init)},
      {"mla_emu_mbarrier_inval",
       reinterpret_cast<void *>(&mla_emu_mbarrier_inval)},
      {"mla_emu_mbarrier_arrive_expect_tx",
       reinterpret_cast<void *>(&mla_emu_mbarrier_arrive_expect_tx)},
      {"mla_emu_mbarrier_wait_parity",
       reinterpret_cast<void *>(&mla_emu_mbarrier_wait_parity)},
      {"mla_emu_bulk_copy", reinterpret_cast<void *>(&mla_emu_bulk_copy)},
      {"mla_emu_mfma_16x16x128_fp8",
       reinterpret_cast<void *>(&mla_emu_mfma_16x16x128_fp8)},
      {"mla_emu_mfma_16x16x32_bf16",
       reinterpret_cast<void *>(&mla_emu_mfma_16x16x32_bf16)},
      {"mla_emu_scaled_mfma_16x16x128",
       reinterpret_cast<void *>(&mla_emu_scaled_mfma_16x16x128)},
      {"mla_emu_scaled_fp4_to_f32",
       reinterpret_cast<void *>(&mla_emu_scaled_fp4_to_f32)},
      {"mla_emu_cvt_f32_to_fp8",
       reinterpret_cast<void *>(&mla_emu_cvt_f32_to_fp8)},
      {"mla_emu_cvt_fp8_to_f32",
       reinterpret_cast<void *>(&mla_emu_cvt_fp8_to_f32)},
  };
}

void mla::emu::callLane(void (*packedFn)(void **),
                        const std::vector<void *> &words, int64_t ctx) {
  // The packed form takes a pointer to each argument.
  std::vector<void *> args(words.begin(), words.end()), packed;
  for (void *&w : args)
    packed.push_back(&w);
  packed.push_back(&ctx);
  packedFn(packed.data());
}

//===----------------------------------------------------------------------===//
// Scheduling a workgroup
//===----------------------------------------------------------------------===//

struct WorkgroupRunner::Impl {
  int numThreads;
  std::vector<Fiber> fibers;
  LdsHazardModel hazards;
  ~Impl() { resetFibers(0); }

  /// A stack and a sanitizer fiber per lane; `count` 0 frees them.
  void resetFibers(int count) {
#ifdef MLA_EMU_TSAN
    for (Fiber &fiber : fibers)
      if (fiber.tsanFiber)
        __tsan_destroy_fiber(fiber.tsanFiber);
#endif
    fibers.resize(count);
    for (Fiber &fiber : fibers) {
      if (!fiber.stack)
        fiber.stack.reset(new char[kStackBytes]);
      fiber.asanFakeStack = nullptr;
      fiber.tsanFiber = nullptr;
#ifdef MLA_EMU_JMP_SWITCH
      fiber.parked = false;
#endif
#ifdef MLA_EMU_TSAN
      fiber.tsanFiber = __tsan_create_fiber(0);
#endif
    }
  }
};

WorkgroupRunner::WorkgroupRunner(int numThreads)
    : impl(std::make_unique<Impl>()) {
  impl->numThreads = numThreads;
  impl->resetFibers(numThreads);
}

WorkgroupRunner::~WorkgroupRunner() = default;

namespace {
/// Where the lanes of a stuck workgroup are, wave by wave: "wave 0: 64 at a
/// barrier; wave 1: 64 returned".
std::string describeLanes(const Workgroup &wg) {
  std::string text;
  for (size_t w = 0; w < wg.waves.size(); ++w) {
    std::map<std::string, int> where;
    for (size_t l = w * kWaveLanes;
         l < std::min(wg.lanes.size(), (w + 1) * kWaveLanes); ++l) {
      const Lane &lane = wg.lanes[l];
      ++where[lane.done        ? "returned"
              : lane.waitingAt ? std::string("at ") + lane.waitingAt
                               : "running"];
    }
    text += (w ? "; wave " : "wave ") + std::to_string(w) + ":";
    bool first = true;
    for (auto &[state, count] : where) {
      text += (first ? " " : ", ") + std::to_string(count) + " " + state;
      first = false;
    }
  }
  return text;
}
} // namespace

namespace {
/// Ends every lane that has not returned: each resumes, unwinds its stack
/// and returns, so the stacks are free for the next workgroup.
void abortLanes(Workgroup &wg) {
  wg.aborting = true;
  for (Lane &lane : wg.lanes) {
    if (lane.done)
      continue;
    currentLane = &lane;
    switchToLane(wg, lane);
    currentLane = nullptr;
  }
}
} // namespace

llvm::Error WorkgroupRunner::run(std::array<int64_t, 3> blockId,
                                 const std::function<void(int64_t ctx)> &body,
                                 const WorkgroupOptions &options) {
  Workgroup wg;
  wg.blockId = blockId;
  wg.body = &body;
  wg.options = options;
  wg.lanes.resize(impl->numThreads);
  wg.waves.resize((impl->numThreads + kWaveLanes - 1) / kWaveLanes);
  if (options.checkHazards) {
    if (wg.waves.size() > static_cast<size_t>(kMaxWaves))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "emu: the hazard model covers at most %d waves per workgroup",
          kMaxWaves);
    impl->hazards.reset(options.ldsBytes);
    wg.hazards = &impl->hazards;
  }
  // Each workgroup's schedule depends on the seed and its id alone.
  wg.random.seed(options.scheduleSeed ^
                 (0x9e3779b97f4a7c15ull *
                  (1 + blockId[0] + 65536 * (blockId[1] + 65536 * blockId[2]))));
  // getcontext is a system call: once, then copied into every lane.
  ucontext_t start;
  getcontext(&start);
  for (int i = 0; i < impl->numThreads; ++i) {
    Lane &lane = wg.lanes[i];
    lane.wg = &wg;
    lane.id = i;
    lane.fiber = &impl->fibers[i];
#ifdef MLA_EMU_JMP_SWITCH
    // A parked fiber's stack holds its loop: it is resumed, not remade.
    if (lane.fiber->parked)
      continue;
#endif
    copyContext(lane.context, start);
    lane.context.uc_stack.ss_sp = lane.fiber->stack.get();
    lane.context.uc_stack.ss_size = kStackBytes;
    lane.context.uc_link = &wg.scheduler;
    makecontext(&lane.context, trampoline, 0);
    // makecontext has set up the stack; swapcontext no longer reads
    // uc_stack. ASan's swapcontext interceptor does: it clears the shadow
    // of the whole stack (64 KiB) at every switch into the lane, most of an
    // instrumented emu run. The fiber annotations tell it the live stack
    // instead.
    lane.context.uc_stack.ss_size = 0;
  }
  std::vector<int> order(impl->numThreads);
  std::iota(order.begin(), order.end(), 0);
  for (;;) {
    bool allDone = true;
    uint64_t eventsBefore = wg.events;
    if (options.scheduleSeed)
      std::shuffle(order.begin(), order.end(), wg.random);
    for (int i : order) {
      Lane &lane = wg.lanes[i];
      if (lane.done)
        continue;
      allDone = false;
      currentLane = &lane;
      switchToLane(wg, lane);
      currentLane = nullptr;
      if (!wg.error.empty()) {
        abortLanes(wg);
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "emu: " + wg.error);
      }
    }
    if (allDone)
      break;
    if (wg.events == eventsBefore) {
      auto error = llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "emu: %s deadlocked: lanes wait at a barrier or wave operation that "
          "not all of them reach (%s)",
          workgroupName(wg).c_str(), describeLanes(wg).c_str());
      abortLanes(wg);
      return error;
    }
  }
  // DMAs still in flight land at the end of the kernel.
  for (size_t w = 0; w < wg.waves.size(); ++w)
    while (!wg.waves[w].dmas.empty())
      retireDma(wg, w);
  return llvm::Error::success();
}
