// The emu runtime on small kernels that go through mla-gpu-to-emu and the
// JIT like the real ones. The hazard checker: kernels of 4 waves, each with
// one synchronization bug, are each reported with the waves, the bytes and
// both operations, and their synchronized twins report nothing and compute
// the right values in every lane order. The wave-level instructions the
// kernels use beyond MFMAs: transposed LDS loads give each lane its column
// at the MFMA pass's addresses; the scaled fp4 conversion matches the
// format's definition. sm_90a's bulk copies land when their mbarrier's
// phase completes, in every lane order; a phase that cannot complete and a
// malformed copy or barrier are reported.

#include "mla/Compiler/Embedding.h"
#include "mla/Emu/LdsHazards.h"
#include "mla/Emu/Runtime.h"
#include "mla/Jit/JitSupport.h"
#include "mla/Runtime/Numerics.h"
#include "mla/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <regex>

using namespace mla;

namespace {
constexpr int kThreads = 256;
constexpr int kLdsFloats = 512;

/// A gpu.module with kernel @k(%in, %out: memref<256xf32>) of 256 lanes and
/// one workgroup buffer %lds of 512 f32, whose body is `body`. %t is the
/// thread id, %w64 the first thread of its wave, %c0 / %c64 / %c256 index
/// constants.
std::string kernel(llvm::StringRef body) {
  return llvm::formatv(R"mlir(
module attributes {{gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%in: memref<256xf32, #gpu.address_space<global>>,
                %out: memref<256xf32, #gpu.address_space<global>>)
        workgroup(%lds: memref<512xf32, #gpu.address_space<workgroup>>)
        kernel {
      %t = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %c64 = arith.constant 64 : index
      %c256 = arith.constant 256 : index
      %wave = arith.divui %t, %c64 : index
      %w64 = arith.muli %wave, %c64 : index
      {0}
      gpu.return
    }
  }
}
)mlir",
                       body)
      .str();
}

struct KernelRun {
  std::vector<float> out;
  std::string error; // "" when the workgroup ran without a report
};

/// Compiles `source` for the emu and runs one workgroup on in[i] = i.
KernelRun runKernel(const std::string &source, uint64_t scheduleSeed = 0,
                    bool checkHazards = true,
                    std::vector<int64_t> ldsShape = {kLdsFloats}) {
  KernelRun run;
  mlir::MLIRContext context;
  prepareContext(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  if (!module) {
    run.error = "parse error";
    return run;
  }
  mlir::PassManager pm(&context);
  pm.addPass(createMLAGPUToEmuPass());
  addHostLoweringPasses(pm);
  if (mlir::failed(pm.run(*module))) {
    run.error = "compile error";
    return run;
  }
  auto engine = createEngine(*module, emu::runtimeSymbols());
  if (!engine) {
    run.error = llvm::toString(engine.takeError());
    return run;
  }
  auto fn = (*engine)->lookupPacked("_mlir_ciface_k_lane");
  if (!fn) {
    run.error = llvm::toString(fn.takeError());
    return run;
  }
  std::vector<float> in(kThreads);
  std::iota(in.begin(), in.end(), 0.0f);
  run.out.assign(kThreads, -1.0f);
  std::vector<float> lds(kLdsFloats, -2.0f);
  std::vector<std::vector<int64_t>> descriptors = {
      makeDescriptor(in.data(), {kThreads}),
      makeDescriptor(run.out.data(), {kThreads}),
      makeDescriptor(lds.data(), ldsShape)};
  std::vector<void *> words;
  for (auto &d : descriptors)
    words.push_back(d.data());
  auto lane = [&](int64_t ctx) { emu::callLane(*fn, words, ctx); };
  emu::WorkgroupOptions options;
  options.lds = reinterpret_cast<char *>(lds.data());
  options.ldsBytes = kLdsFloats * 4;
  options.checkHazards = checkHazards;
  options.scheduleSeed = scheduleSeed;
  emu::WorkgroupRunner runner(kThreads);
  if (llvm::Error err = runner.run({0, 0, 0}, lane, options))
    run.error = llvm::toString(std::move(err));
  return run;
}

// Every lane writes its id to lds[t], then reads a slot of the next wave or
// the previous one.
constexpr const char *kExchange = R"(
      %v = memref.load %in[%t] : memref<256xf32, #gpu.address_space<global>>
      memref.store %v, %lds[%t] : memref<512xf32, #gpu.address_space<workgroup>>
      {0}
      %d = arith.constant {1} : index
      %o1 = arith.addi %t, %d : index
      %o = arith.remui %o1, %c256 : index
      %r = memref.load %lds[%o] : memref<512xf32, #gpu.address_space<workgroup>>
      memref.store %r, %out[%t] : memref<256xf32, #gpu.address_space<global>>)";

std::string exchange(bool barrier, int distance) {
  return kernel(llvm::formatv(kExchange, barrier ? "gpu.barrier" : "",
                              distance)
                    .str());
}

// Each wave DMAs its 64 inputs to lds[w64 + 256] (and, with `twice`, its
// first 64 inputs again to lds[w64]); then it waits with `wait`, and every
// lane reads lds[256 + t].
std::string dmaKernel(llvm::StringRef wait, bool barrier, bool twice) {
  std::string body = R"(
      %dst = arith.addi %w64, %c256 : index
      amdgpu.gather_to_lds %in[%t], %lds[%dst] : f32, memref<256xf32, #gpu.address_space<global>>, memref<512xf32, #gpu.address_space<workgroup>>)";
  if (twice)
    body += R"(
      amdgpu.gather_to_lds %in[%t], %lds[%w64] : f32, memref<256xf32, #gpu.address_space<global>>, memref<512xf32, #gpu.address_space<workgroup>>)";
  body += "\n      " + wait.str();
  if (barrier)
    body += "\n      gpu.barrier";
  body += R"(
      %i = arith.addi %t, %c256 : index
      %r = memref.load %lds[%i] : memref<512xf32, #gpu.address_space<workgroup>>
      memref.store %r, %out[%t] : memref<256xf32, #gpu.address_space<global>>)";
  return kernel(body);
}

/// Whether the run failed with a report that matches `pattern`.
::testing::AssertionResult reports(const KernelRun &run,
                                   const std::string &pattern) {
  if (std::regex_search(run.error, std::regex(pattern)))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "the report \"" << run.error << "\" does not match " << pattern;
}

void expectValues(const KernelRun &run, int distance) {
  ASSERT_EQ(run.error, "");
  for (int t = 0; t < kThreads; ++t)
    ASSERT_EQ(run.out[t], float((t + distance) % kThreads)) << "lane " << t;
}

// The JIT rounds f32 to bf16 to nearest even on every host: where the CPU
// has no bf16 conversion (x86-64 before AVX512-BF16) LLVM calls
// __truncsfbf2, which the engine supplies (a process that dlopens the JIT
// library, as mla-run does, exports none: the emu lit tests of bf16
// kernels fail there without it); elsewhere the instruction rounds alike.
TEST(EmuRuntime, JitRoundsF32ToBf16OnEveryHost) {
  mlir::MLIRContext context;
  prepareContext(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    llvm.func @round(%x: f32) -> i16 {
      %b = llvm.fptrunc %x : f32 to bf16
      %i = llvm.bitcast %b : bf16 to i16
      llvm.return %i : i16
    })mlir",
                                                        &context);
  ASSERT_TRUE(module);
  auto engine = createEngine(*module, {});
  ASSERT_TRUE(static_cast<bool>(engine)) << llvm::toString(engine.takeError());
  auto address = (*engine)->lookup("round");
  ASSERT_TRUE(static_cast<bool>(address))
      << llvm::toString(address.takeError());
  auto round = reinterpret_cast<uint16_t (*)(float)>(*address);
  auto bits = [](uint32_t word) {
    float x;
    std::memcpy(&x, &word, sizeof x);
    return x;
  };
  EXPECT_EQ(round(1.0f), 0x3F80);
  EXPECT_EQ(round(-2.5f), 0xC020);
  EXPECT_EQ(round(bits(0x3F808000)), 0x3F80); // a tie: to even
  EXPECT_EQ(round(bits(0x3F818000)), 0x3F82); // a tie: to even
  EXPECT_EQ(round(bits(0x3F808001)), 0x3F81);
  EXPECT_EQ(round(bits(0x7F7FFFFF)), 0x7F80); // past bf16's largest: inf
  EXPECT_EQ(round(-INFINITY), 0xFF80);
  EXPECT_EQ(round(bits(0x00000001)), 0x0000); // the smallest subnormal
  uint16_t nan = round(bits(0x7F800001));
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0); // still a NaN
}

TEST(EmuHazards, ExchangeWithABarrierIsCleanInEveryOrder) {
  for (uint64_t seed : {0, 1, 2, 3, 4, 5}) {
    SCOPED_TRACE(seed);
    expectValues(runKernel(exchange(true, 64), seed), 64);
    expectValues(runKernel(exchange(true, 192), seed), 192);
  }
}

TEST(EmuHazards, ReadOfAnotherWavesStoreWithoutBarrier) {
  // Lane 64 reads lds[0], which wave 0 stored with no barrier between.
  EXPECT_TRUE(reports(runKernel(exchange(false, 192)),
                      "LDS hazard in workgroup \\(0, 0, 0\\): wave 1 reads LDS "
                      "bytes \\[0, 4\\) that wave 0 wrote in the same "
                      "barrier epoch \\(0 barriers passed\\): a barrier is "
                      "missing between them"));
}

TEST(EmuHazards, StoreIntoBytesAnotherWaveReadWithoutBarrier) {
  // Wave 0 reads lds[64..127] before wave 1 stores them.
  EXPECT_TRUE(reports(runKernel(exchange(false, 64)),
                      "wave 1 writes LDS bytes \\[256, 260\\) that wave 0 "
                      "read in the same barrier epoch"));
}

TEST(EmuHazards, DmaRetiredByAWaitAndABarrierIsCleanInEveryOrder) {
  for (uint64_t seed : {0, 11, 12, 13, 14, 15}) {
    SCOPED_TRACE(seed);
    expectValues(
        runKernel(dmaKernel("amdgpu.memory_counter_wait load(0)", true, false),
                  seed),
        0);
    // vmcnt(1) retires the older of two DMAs: the one read here.
    expectValues(
        runKernel(dmaKernel("amdgpu.memory_counter_wait load(1)", true, true),
                  seed),
        0);
  }
}

TEST(EmuHazards, ReadOfADmaNoWaitRetired) {
  EXPECT_TRUE(reports(runKernel(dmaKernel("", true, false)),
                      "wave [0-3] reads LDS bytes \\[[0-9]+, [0-9]+\\) whose "
                      "DMA \\(issued by the same wave\\) has not retired: a "
                      "memory_counter_wait before the read is missing"));
}

TEST(EmuHazards, WaitThatLeavesTheReadDmaInFlight) {
  // Two DMAs, the one read issued last: vmcnt(1) leaves it in flight.
  std::string body = R"(
      amdgpu.gather_to_lds %in[%t], %lds[%w64] : f32, memref<256xf32, #gpu.address_space<global>>, memref<512xf32, #gpu.address_space<workgroup>>
      %dst = arith.addi %w64, %c256 : index
      amdgpu.gather_to_lds %in[%t], %lds[%dst] : f32, memref<256xf32, #gpu.address_space<global>>, memref<512xf32, #gpu.address_space<workgroup>>
      amdgpu.memory_counter_wait load(1)
      gpu.barrier
      %i = arith.addi %t, %c256 : index
      %r = memref.load %lds[%i] : memref<512xf32, #gpu.address_space<workgroup>>
      memref.store %r, %out[%t] : memref<256xf32, #gpu.address_space<global>>)";
  EXPECT_TRUE(reports(runKernel(kernel(body)),
                      "wave [0-3] reads LDS bytes \\[[0-9]+, [0-9]+\\) whose "
                      "DMA \\(issued by the same wave\\) has not retired"));
}

TEST(EmuHazards, ReadOfAnotherWavesDmaWithoutBarrierAfterTheWait) {
  // Each lane reads the slot of the next wave: its DMA retired in that
  // wave, but no barrier orders the read after the retirement.
  std::string body = R"(
      amdgpu.gather_to_lds %in[%t], %lds[%w64] : f32, memref<256xf32, #gpu.address_space<global>>, memref<512xf32, #gpu.address_space<workgroup>>
      amdgpu.memory_counter_wait load(0)
      %o1 = arith.addi %t, %c64 : index
      %o = arith.remui %o1, %c256 : index
      %r = memref.load %lds[%o] : memref<512xf32, #gpu.address_space<workgroup>>
      memref.store %r, %out[%t] : memref<256xf32, #gpu.address_space<global>>)";
  EXPECT_TRUE(reports(runKernel(kernel(body)),
                      "wave ([0-3]) reads LDS bytes \\[[0-9]+, [0-9]+\\) whose "
                      "DMA from wave [0-3] has not retired: the read must "
                      "follow the memory_counter_wait of wave [0-3] that "
                      "retires it and a barrier after that wait"));
}

TEST(EmuHazards, DmaIntoBytesAnotherWaveReadWithoutBarrier) {
  // Every lane reads the next wave's slot, then each wave DMAs into its own.
  std::string body = R"(
      %o1 = arith.addi %t, %c64 : index
      %o = arith.remui %o1, %c256 : index
      %r = memref.load %lds[%o] : memref<512xf32, #gpu.address_space<workgroup>>
      memref.store %r, %out[%t] : memref<256xf32, #gpu.address_space<global>>
      amdgpu.gather_to_lds %in[%t], %lds[%w64] : f32, memref<256xf32, #gpu.address_space<global>>, memref<512xf32, #gpu.address_space<workgroup>>
      amdgpu.memory_counter_wait load(0))";
  EXPECT_TRUE(reports(runKernel(kernel(body)),
                      "a DMA of wave 1 writes LDS bytes \\[256, 512\\) that "
                      "wave 0 read in the same barrier epoch"));
}

TEST(EmuHazards, StoreIntoBytesADmaHasInFlight) {
  std::string body = R"(
      amdgpu.gather_to_lds %in[%t], %lds[%w64] : f32, memref<256xf32, #gpu.address_space<global>>, memref<512xf32, #gpu.address_space<workgroup>>
      %v = arith.constant 1.0 : f32
      memref.store %v, %lds[%t] : memref<512xf32, #gpu.address_space<workgroup>>
      amdgpu.memory_counter_wait load(0))";
  EXPECT_TRUE(reports(runKernel(kernel(body)),
                      "wave 0 writes LDS bytes \\[[0-9]+, [0-9]+\\) that a DMA "
                      "of wave 0 still has in flight"));
}

TEST(EmuHazards, BarrierReachedByPartOfTheWorkgroup) {
  std::string body = R"(
      %c128 = arith.constant 128 : index
      %low = arith.cmpi ult, %t, %c128 : index
      scf.if %low {
        gpu.barrier
      })";
  KernelRun run = runKernel(kernel(body));
  EXPECT_NE(run.error.find("deadlocked"), std::string::npos) << run.error;
  EXPECT_NE(run.error.find("wave 0: 64 at a barrier; wave 1: 64 at a "
                           "barrier; wave 2: 64 returned; wave 3: 64 returned"),
            std::string::npos)
      << run.error;
}

TEST(EmuHazards, LdsAccessOutsideTheWorkgroupsLds) {
  std::string body = R"(
      %big = arith.constant 600 : index
      %r = memref.load %lds[%big] : memref<512xf32, #gpu.address_space<workgroup>>
      memref.store %r, %out[%t] : memref<256xf32, #gpu.address_space<global>>)";
  KernelRun run = runKernel(kernel(body));
  EXPECT_NE(run.error.find("an LDS read of 4 bytes outside the workgroup's "
                           "2048 bytes of LDS"),
            std::string::npos)
      << run.error;
}

TEST(EmuHazards, DmaLandsOnlyWhenRetired) {
  // With the checks off, a read before the wait sees LDS as it was.
  std::string body = R"(
      amdgpu.gather_to_lds %in[%t], %lds[%w64] : f32, memref<256xf32, #gpu.address_space<global>>, memref<512xf32, #gpu.address_space<workgroup>>
      %r = memref.load %lds[%t] : memref<512xf32, #gpu.address_space<workgroup>>
      amdgpu.memory_counter_wait load(0)
      %r2 = memref.load %lds[%t] : memref<512xf32, #gpu.address_space<workgroup>>
      %s = arith.addf %r, %r2 : f32
      memref.store %s, %out[%t] : memref<256xf32, #gpu.address_space<global>>)";
  KernelRun run = runKernel(kernel(body), /*scheduleSeed=*/0, /*checkHazards=*/false);
  ASSERT_EQ(run.error, "");
  for (int t = 0; t < kThreads; ++t)
    ASSERT_EQ(run.out[t], -2.0f + float(t)) << "lane " << t;
}

TEST(EmuHazards, RandomScheduleShowsAnUnsynchronizedExchange) {
  // Lanes of waves 1-3 read what the previous wave stored, with no barrier.
  // In id order every wave runs after the one before it, so the values come
  // out right; with the checks off, a random lane order shows the bug.
  std::string body = R"(
      %v = memref.load %in[%t] : memref<256xf32, #gpu.address_space<global>>
      memref.store %v, %lds[%t] : memref<512xf32, #gpu.address_space<workgroup>>
      %later = arith.cmpi uge, %t, %c64 : index
      %prev = arith.subi %t, %c64 : index
      %o = arith.select %later, %prev, %t : index
      %r = memref.load %lds[%o] : memref<512xf32, #gpu.address_space<workgroup>>
      memref.store %r, %out[%t] : memref<256xf32, #gpu.address_space<global>>)";
  auto right = [](const KernelRun &run) {
    for (int t = 0; t < kThreads; ++t)
      if (run.out[t] != float(t >= 64 ? t - 64 : t))
        return false;
    return true;
  };
  KernelRun inOrder = runKernel(kernel(body), 0, /*checkHazards=*/false);
  ASSERT_EQ(inOrder.error, "");
  EXPECT_TRUE(right(inOrder));
  int wrong = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    KernelRun run = runKernel(kernel(body), seed, /*checkHazards=*/false);
    ASSERT_EQ(run.error, "");
    wrong += !right(run);
  }
  EXPECT_GT(wrong, 0);
  // The checker reports it in any order.
  EXPECT_NE(runKernel(kernel(body)).error.find("wave 1 reads LDS bytes [0, 4) "
                                               "that wave 0 wrote"),
            std::string::npos);
}

/// A kernel whose LDS is a rows x cols matrix of `elem` (i16 or i8) holding
/// value(r, c) = (37 r + 11 c) mod 2^bits; every lane then loads the K runs
/// of its column i = tid % 16 with transposed loads at the addresses the
/// MFMA pass uses (lane i names row base + t·e + i / (16/e), column
/// e·(i mod 16/e)) and counts the elements that are not rows base + t·e +
/// 0..e-1 of column i. base = e·2·kg, kg = (tid % 64) / 16.
std::string transposeKernel(int bits) {
  int perLoad = 64 / bits, rows = bits == 16 ? 32 : 64, lanesPerRow = 16 / perLoad;
  std::string elem = "i" + std::to_string(bits);
  std::string lds = "memref<" + std::to_string(rows) + "x32x" + elem +
                    ", #gpu.address_space<workgroup>>";
  return llvm::formatv(R"mlir(
module attributes {{gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%in: memref<256xf32, #gpu.address_space<global>>,
                %out: memref<256xf32, #gpu.address_space<global>>)
        workgroup(%lds: {0}) kernel {
      %t = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %c256 = arith.constant 256 : index
      %cells = arith.constant {1} : index
      %c37 = arith.constant 37 : index
      %c11 = arith.constant 11 : index
      scf.for %e = %t to %cells step %c256 {{
        %r = arith.divui %e, %c32 : index
        %c = arith.remui %e, %c32 : index
        %a = arith.muli %r, %c37 : index
        %b = arith.muli %c, %c11 : index
        %v = arith.addi %a, %b : index
        %x = arith.index_cast %v : index to {2}
        memref.store %x, %lds[%r, %c] : {0}
      }
      gpu.barrier
      %lane = arith.remui %t, %c64 : index
      %kg = arith.divui %lane, %c16 : index
      %i = arith.remui %lane, %c16 : index
      %per = arith.constant {3} : index
      %lpr = arith.constant {4} : index
      %two = arith.constant 2 : index
      %kstride = arith.muli %per, %two : index
      %base = arith.muli %kg, %kstride : index
      %rowOf = arith.divui %i, %lpr : index
      %colMod = arith.remui %i, %lpr : index
      %col = arith.muli %colMod, %per : index
      %zero = arith.constant 0.0 : f32
      %one = arith.constant 1.0 : f32
      %bad = scf.for %tt = %c0 to %two step %c1 iter_args(%acc = %zero) -> f32 {{
        %t0 = arith.muli %tt, %per : index
        %rb = arith.addi %base, %t0 : index
        %row = arith.addi %rb, %rowOf : index
        %got = amdgpu.transpose_load %lds[%row, %col] : {0} -> vector<{3}x{2}>
        %sum = scf.for %j = %c0 to %per step %c1 iter_args(%s = %acc) -> f32 {{
          %rj = arith.addi %rb, %j : index
          %a = arith.muli %rj, %c37 : index
          %b = arith.muli %i, %c11 : index
          %v = arith.addi %a, %b : index
          %want = arith.index_cast %v : index to {2}
          %g = vector.extract %got[%j] : {2} from vector<{3}x{2}>
          %same = arith.cmpi eq, %g, %want : {2}
          %inc = arith.select %same, %zero, %one : f32
          %s2 = arith.addf %s, %inc : f32
          scf.yield %s2 : f32
        }
        scf.yield %sum : f32
      }
      memref.store %bad, %out[%t] : memref<256xf32, #gpu.address_space<global>>
      gpu.return
    }
  }
}
)mlir",
                       lds, rows * 32, elem, perLoad, lanesPerRow)
      .str();
}

TEST(EmuTransposeLoad, Tr16GivesEachLaneFourRowsOfItsColumn) {
  KernelRun run = runKernel(transposeKernel(16), 0, true, {32, 32});
  ASSERT_EQ(run.error, "");
  for (int t = 0; t < kThreads; ++t)
    ASSERT_EQ(run.out[t], 0.0f) << "lane " << t << " got wrong elements";
}

TEST(EmuTransposeLoad, Tr8GivesEachLaneEightRowsOfItsColumn) {
  for (uint64_t seed : {0, 3}) {
    KernelRun run = runKernel(transposeKernel(8), seed, true, {64, 32});
    ASSERT_EQ(run.error, "");
    for (int t = 0; t < kThreads; ++t)
      ASSERT_EQ(run.out[t], 0.0f) << "lane " << t << " got wrong elements";
  }
}

TEST(EmuTransposeLoad, Tr4TransposesSixteenByNibbles) {
  // LDS: 64 rows of 32 bytes, byte (r, c) = 37r + 11c + 5 (mod 256). Lane
  // 16·kg + s names row 16·kg + s at byte 8 (E2M1 columns 16..31); it must
  // get column 16 + s of rows 16·kg + j as nibble j (mxfp4 PV's V
  // fragments, docs/mfma-layouts.md §6) and counts the nibbles that differ.
  std::string source = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%in: memref<256xf32, #gpu.address_space<global>>,
                %out: memref<256xf32, #gpu.address_space<global>>)
        workgroup(%lds: memref<64x32xi8, #gpu.address_space<workgroup>>)
        kernel {
      %t = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %c256 = arith.constant 256 : index
      %cells = arith.constant 2048 : index
      %c37 = arith.constant 37 : index
      %c11 = arith.constant 11 : index
      %c5 = arith.constant 5 : index
      scf.for %e = %t to %cells step %c256 {
        %r = arith.divui %e, %c32 : index
        %c = arith.remui %e, %c32 : index
        %a = arith.muli %r, %c37 : index
        %b = arith.muli %c, %c11 : index
        %ab = arith.addi %a, %b : index
        %v = arith.addi %ab, %c5 : index
        %x = arith.index_cast %v : index to i8
        memref.store %x, %lds[%r, %c] : memref<64x32xi8, #gpu.address_space<workgroup>>
      }
      gpu.barrier
      %lane = arith.remui %t, %c64 : index
      %kg = arith.divui %lane, %c16 : index
      %s = arith.remui %lane, %c16 : index
      %base = arith.muli %kg, %c16 : index
      %row = arith.addi %base, %s : index
      %got = amdgpu.transpose_load %lds[%row, %c8] : memref<64x32xi8, #gpu.address_space<workgroup>> -> vector<16xi4>
      %half = arith.divui %s, %c2 : index
      %byteCol = arith.addi %c8, %half : index
      %odd = arith.remui %s, %c2 : index
      %odd8 = arith.index_cast %odd : index to i8
      %c4i8 = arith.constant 4 : i8
      %shift = arith.muli %odd8, %c4i8 : i8
      %zero = arith.constant 0.0 : f32
      %one = arith.constant 1.0 : f32
      %bad = scf.for %j = %c0 to %c16 step %c1 iter_args(%acc = %zero) -> f32 {
        %rj = arith.addi %base, %j : index
        %byte = memref.load %lds[%rj, %byteCol] : memref<64x32xi8, #gpu.address_space<workgroup>>
        %sh = arith.shrui %byte, %shift : i8
        %want = arith.trunci %sh : i8 to i4
        %g = vector.extract %got[%j] : i4 from vector<16xi4>
        %same = arith.cmpi eq, %g, %want : i4
        %inc = arith.select %same, %zero, %one : f32
        %next = arith.addf %acc, %inc : f32
        scf.yield %next : f32
      }
      memref.store %bad, %out[%t] : memref<256xf32, #gpu.address_space<global>>
      gpu.return
    }
  }
}
)mlir";
  KernelRun run = runKernel(source, 0, true, {64, 32});
  ASSERT_EQ(run.error, "");
  for (int t = 0; t < kThreads; ++t)
    ASSERT_EQ(run.out[t], 0.0f) << "lane " << t << " got wrong nibbles";
}

TEST(EmuTransposeLoad, MisalignedLaneIsAnError) {
  // Every lane names LDS byte 4: not 8-byte aligned.
  std::string source = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%in: memref<256xf32, #gpu.address_space<global>>,
                %out: memref<256xf32, #gpu.address_space<global>>)
        workgroup(%lds: memref<1024xi16, #gpu.address_space<workgroup>>)
        kernel {
      %c2 = arith.constant 2 : index
      %r = amdgpu.transpose_load %lds[%c2] : memref<1024xi16, #gpu.address_space<workgroup>> -> vector<4xi16>
      gpu.return
    }
  }
}
)mlir";
  KernelRun run = runKernel(source, 0, true, {1024});
  EXPECT_TRUE(reports(run, "amdgpu.transpose_load of a lane at LDS byte 4 in "
                           "workgroup \\(0, 0, 0\\): its 8 bytes must be "
                           "8-byte aligned"));
}

TEST(EmuScaledConvert, Fp4PairsTimesTheScale) {
  // Lane t converts the 8 E2M1 codes of word(t) with scale 2^(t % 5 - 2),
  // byte by byte (index 0..3), and writes sum_j (j + 1) · value_j.
  std::string body = R"(
      %w = arith.index_cast %t : index to i32
      %k = arith.constant -1640531535 : i32
      %word = arith.muli %w, %k : i32
      %wv = vector.from_elements %word : vector<1xi32>
      %codes = vector.bitcast %wv : vector<1xi32> to vector<8xf4E2M1FN>
      %c5 = arith.constant 5 : index
      %e = arith.remui %t, %c5 : index
      %e32 = arith.index_cast %e : index to i32
      %bias = arith.constant 125 : i32
      %c23 = arith.constant 23 : i32
      %eb = arith.addi %e32, %bias : i32
      %sb = arith.shli %eb, %c23 : i32
      %scale = arith.bitcast %sb : i32 to f32
      %p0 = amdgpu.scaled_ext_packed %codes[0], %scale : vector<8xf4E2M1FN> to vector<2xbf16>
      %p1 = amdgpu.scaled_ext_packed %codes[1], %scale : vector<8xf4E2M1FN> to vector<2xbf16>
      %p2 = amdgpu.scaled_ext_packed %codes[2], %scale : vector<8xf4E2M1FN> to vector<2xbf16>
      %p3 = amdgpu.scaled_ext_packed %codes[3], %scale : vector<8xf4E2M1FN> to vector<2xbf16>
      %a = vector.shuffle %p0, %p1 [0, 1, 2, 3] : vector<2xbf16>, vector<2xbf16>
      %b = vector.shuffle %p2, %p3 [0, 1, 2, 3] : vector<2xbf16>, vector<2xbf16>
      %all = vector.shuffle %a, %b [0, 1, 2, 3, 4, 5, 6, 7] : vector<4xbf16>, vector<4xbf16>
      %f = arith.extf %all : vector<8xbf16> to vector<8xf32>
      %weights = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : vector<8xf32>
      %m = arith.mulf %f, %weights : vector<8xf32>
      %zero = arith.constant 0.0 : f32
      %sum = vector.reduction <add>, %m, %zero : vector<8xf32> into f32
      memref.store %sum, %out[%t] : memref<256xf32, #gpu.address_space<global>>)";
  KernelRun run = runKernel(kernel(body));
  ASSERT_EQ(run.error, "");
  for (int t = 0; t < kThreads; ++t) {
    uint32_t word = uint32_t(t) * 2654435761u;
    double scale = std::ldexp(1.0, t % 5 - 2), want = 0.0;
    for (int j = 0; j < 8; ++j)
      want += (j + 1) * decodeE2M1((word >> (4 * j)) & 0xF) * scale;
    ASSERT_EQ(run.out[t], float(want)) << "lane " << t;
  }
}

TEST(EmuPermlane32Swap, TradesTheHighHalfOfOldForTheLowHalfOfSrc) {
  // old = t, src = 1000 + t; lane t writes 10000 · first + second.
  std::string body = R"(
      %i = arith.index_cast %t : index to i32
      %k1000 = arith.constant 1000 : i32
      %src = arith.addi %i, %k1000 : i32
      %pair = rocdl.permlane32.swap %i, %src, false, false : (i32, i32) -> !llvm.struct<(i32, i32)>
      %first = llvm.extractvalue %pair[0] : !llvm.struct<(i32, i32)>
      %second = llvm.extractvalue %pair[1] : !llvm.struct<(i32, i32)>
      %f = arith.sitofp %first : i32 to f32
      %s = arith.sitofp %second : i32 to f32
      %k = arith.constant 10000.0 : f32
      %fk = arith.mulf %f, %k : f32
      %v = arith.addf %fk, %s : f32
      memref.store %v, %out[%t] : memref<256xf32, #gpu.address_space<global>>)";
  KernelRun run = runKernel(kernel(body));
  ASSERT_EQ(run.error, "");
  for (int t = 0; t < kThreads; ++t) {
    bool low = t % 64 < 32;
    int first = low ? t : 1000 + t - 32, second = low ? t + 32 : 1000 + t;
    ASSERT_EQ(run.out[t], float(10000 * first + second)) << "lane " << t;
  }
}

TEST(EmuHazards, ModelReportsTheConflictingRun) {
  emu::LdsHazardModel model;
  model.reset(64);
  EXPECT_FALSE(model.write(0, 8, 16, 0));
  EXPECT_FALSE(model.read(0, 0, 32, 0)); // a wave reads its own store
  auto hazard = model.read(2, 0, 32, 0);
  ASSERT_TRUE(hazard);
  EXPECT_EQ(*hazard, "wave 2 reads LDS bytes [8, 24) that wave 0 wrote in the "
                     "same barrier epoch (0 barriers passed): a barrier is "
                     "missing between them");
  EXPECT_FALSE(model.read(2, 0, 32, 1)); // after a barrier
  // A new workgroup starts clean.
  model.reset(64);
  EXPECT_FALSE(model.read(2, 0, 32, 0));
}

// sm_90a bulk copies on an mbarrier: lane 64 copies the 256 inputs (1024
// bytes) into lds[0..256) by cp.async.bulk on the mbarrier at LDS byte
// 2040, thread 0 expects `expected` bytes on it; every lane waits for
// phase 0, passes a barrier and reads lds[t].
std::string bulkCopyKernel(int copyBytes, int expected, bool initTwice) {
  std::string init = R"(
        nvvm.mbarrier.init %bar, %c1i : !llvm.ptr<3>, i32)";
  if (initTwice)
    init += init;
  return kernel(llvm::formatv(R"(
      %c1i = arith.constant 1 : i32
      %c0i = arith.constant 0 : i32
      %hint = arith.constant 10000000 : i32
      %c2040 = arith.constant 2040 : index
      %base = memref.extract_aligned_pointer_as_index %lds : memref<512xf32, #gpu.address_space<workgroup>> -> index
      %bara = arith.addi %base, %c2040 : index
      %bari = arith.index_castui %bara : index to i64
      %bar = llvm.inttoptr %bari : i64 to !llvm.ptr<3>
      %basei = arith.index_castui %base : index to i64
      %dst = llvm.inttoptr %basei : i64 to !llvm.ptr<7>
      %src0 = memref.extract_aligned_pointer_as_index %in : memref<256xf32, #gpu.address_space<global>> -> index
      %srci = arith.index_castui %src0 : index to i64
      %src = llvm.inttoptr %srci : i64 to !llvm.ptr<1>
      %first = arith.cmpi eq, %t, %c0 : index
      %copier = arith.cmpi eq, %t, %c64 : index
      scf.if %first {{{0}
        nvvm.fence.mbarrier.init
      }
      gpu.barrier
      scf.if %copier {{
        %size = arith.constant {1} : i32
        nvvm.cp.async.bulk.shared.cluster.global %dst, %src, %bar, %size : !llvm.ptr<7>, <1>
      }
      scf.if %first {{
        %tx = arith.constant {2} : i32
        nvvm.mbarrier.arrive.expect_tx %bar, %tx : !llvm.ptr<3>, i32
      }
      nvvm.mbarrier.try_wait.parity %bar, %c0i, %hint : !llvm.ptr<3>, i32, i32
      gpu.barrier
      %r = memref.load %lds[%t] : memref<512xf32, #gpu.address_space<workgroup>>
      memref.store %r, %out[%t] : memref<256xf32, #gpu.address_space<global>>)",
                              init, copyBytes, expected)
                    .str());
}

TEST(EmuBulkCopy, LandsWhenThePhaseCompletesInEveryOrder) {
  for (uint64_t seed : {0, 1, 2, 3}) {
    KernelRun run = runKernel(bulkCopyKernel(1024, 1024, false), seed);
    expectValues(run, 0);
  }
}

TEST(EmuBulkCopy, WaitForBytesThatNeverCome) {
  // 2048 bytes expected, 1024 copied: the phase never completes.
  EXPECT_TRUE(reports(runKernel(bulkCopyKernel(1024, 2048, false)),
                      "deadlocked.*an mbarrier"));
}

TEST(EmuBulkCopy, InitOfAValidMBarrier) {
  EXPECT_TRUE(reports(runKernel(bulkCopyKernel(1024, 1024, true)),
                      "mbarrier.init on a valid mbarrier"));
}

TEST(EmuBulkCopy, CopyOfBytesNotAMultipleOf16) {
  EXPECT_TRUE(reports(runKernel(bulkCopyKernel(1020, 1020, false)),
                      "cp.async.bulk of 1020 bytes needs a multiple of 16"));
}
} // namespace
