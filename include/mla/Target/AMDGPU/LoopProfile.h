//===- LoopProfile.h - static profile of a kernel's main loop --*- C++ -*-===//
//
// The kernel report's view of speed without a GPU: find a kernel's main
// loop (the innermost natural loop with the most MFMAs), count one
// iteration's instructions by kind, and estimate the clocks a CU needs for
// it from MFMA passes, VALU rate, issue rate and LDS bandwidth — then set
// the cache bytes the iteration DMAs against the CU's share of HBM. An
// estimate, not a measurement: no latencies, bank conflicts or occupancy.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_AMDGPU_LOOPPROFILE_H
#define MLA_TARGET_AMDGPU_LOOPPROFILE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace mla {
struct TargetInfo;
} // namespace mla

namespace mla::amdgpu {

/// One disassembled instruction.
struct DecodedInst {
  std::string mnemonic, operands;
  uint64_t address = 0;
  uint32_t firstWord = 0;
};

struct LoopProfile {
  uint64_t header = 0; // address of the loop's first instruction
  /// Per iteration, one wave: total, mfma, lds_read, lds_write, lds_xbar,
  /// lds_dma, global_load, s_waitcnt, s_barrier, s_nop, valu, valu_cvt,
  /// valu_trans, salu.
  std::map<std::string, int64_t> counts;
  double mfmaClocks = 0;   // one wave's matrix-core clocks
  double ldsClocks = 0;    // one wave's share of the CU's LDS bandwidth
  double dmaBytes = 0;     // LDS-DMA bytes one wave brings in
};

/// The profile of the innermost natural loop with the most MFMAs, if any.
std::optional<LoopProfile> profileMainLoop(llvm::ArrayRef<DecodedInst> insts);

/// Prints the profile and its clock estimate for `waves` waves per CU on
/// `target` (whose HBM share per CU is the bar). The cache bytes an
/// iteration brings are `cacheBytes` when known (from an artifact), else
/// the loop's DMA instructions' bytes times the waves — an overcount when
/// the waves issue different DMAs (mxfp4's scale pieces).
void printLoopProfile(const LoopProfile &profile, const TargetInfo &target,
                      int64_t waves, llvm::raw_ostream &os,
                      std::optional<double> cacheBytes = std::nullopt);

/// What the code object alone does not say about a partial kernel's loop,
/// from the artifact that carries it: KV rows per iteration (the config's
/// kv_tile) and the query rows a workgroup computes for a block of
/// `headsPerBlock` heads.
struct LoopShape {
  int64_t kvRowsPerIteration = 0, rowsPerWorkgroup = 0, headsPerBlock = 0;
  /// Cache bytes per KV row, scales included (0: unknown).
  int64_t cacheBytesPerRow = 0;
};

/// The loop's counts per 64 KV rows and the share of its MFMA rows that
/// are real query rows at q_len 1 (the rest are padding).
void printLoopShape(const LoopProfile &profile, const LoopShape &shape,
                    llvm::raw_ostream &os);

} // namespace mla::amdgpu

#endif // MLA_TARGET_AMDGPU_LOOPPROFILE_H
