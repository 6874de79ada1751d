//===- SM90KernelPlan.h - the sm_90a partial kernel's plan ------*- C++ -*-===//
//
// How the sm_90a partial-decode kernel is laid out for a decode's shapes and
// config: a block of 8 warps serves 16 (token, head) rows; a KV tile is
// decoded into shared memory once per block (f16 for fp8 caches, bf16
// otherwise), and QK and PV run on the tensor cores (mma.sync m16n8k16, f32
// accumulators) from there; the online softmax runs 16 threads per row.
// The config verifier checks a config against the target with this plan, and mla-to-gpu builds the kernel from
// it, so the two cannot disagree about what fits.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_SM90KERNELPLAN_H
#define MLA_TARGET_SM90KERNELPLAN_H

#include "mla/ABI.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mla {

struct SM90KernelShape {
  CacheFormat format;
  int64_t numHeads, qkDim, vDim;
  int64_t kvTile, headsPerWorkgroup, warps, stages, warpsPerRowGroup;
};

class SM90KernelPlan {
public:
  /// (token, head) rows a block serves; row blocks count them token-major.
  static constexpr int64_t kRows = 16;
  /// Threads per row: a row's scores and output columns are dealt to them.
  static constexpr int64_t kLanesPerRow = 16;
  static constexpr int64_t kThreads = kRows * kLanesPerRow;
  static constexpr int64_t kWarps = kThreads / 32;
  /// Resident blocks per SM the persistent grid assumes.
  static constexpr int64_t kBlocksPerSM = 2;
  /// The config's defaults for this kernel.
  static constexpr int64_t kDefaultTile = 16;

  explicit SM90KernelPlan(const SM90KernelShape &shape) : s(shape) {}

  int64_t rowsPerWorkgroup() const { return kRows; }
  /// Every row block holds rows of all H heads (token-major).
  int64_t headsPerBlock() const { return s.numHeads; }
  int64_t kvTile() const { return s.kvTile; }
  /// bf16 elements between two rows of Q and of the decoded tile in shared
  /// memory: Dqk padded to 4 mod 32 words, so that the 8 rows x 4 words a
  /// warp's mma fragment load touches fall in 32 different banks.
  int64_t rowStride() const {
    int64_t words = s.qkDim / 2;
    return 2 * (words + (4 - words % 32 + 32) % 32);
  }
  /// QK: each warp scores 16 tile rows (two mma n-blocks of 8) over a share
  /// of Dqk's 16-column k-steps, so that one Q fragment feeds two mmas; the
  /// warps of a 16-row group add their partial scores through shared memory.
  static constexpr int64_t kScoreRowsPerWarp = 16;
  int64_t scoreGroups() const { return s.kvTile / kScoreRowsPerWarp; }
  int64_t scoreParts() const { return kWarps / scoreGroups(); }
  int64_t kSteps() const { return s.qkDim / 16; }
  /// PV: Dv in n-blocks of 8, dealt to the warps round robin.
  int64_t outputBlocks() const { return s.vDim / 8; }
  int64_t outputBlocksPerWarp() const {
    return (outputBlocks() + kWarps - 1) / kWarps;
  }
  /// Tile columns each of a row's 16 threads scores in the softmax.
  int64_t tileRowsPerLane() const { return s.kvTile / kLanesPerRow; }
  /// Shared memory: Q and the decoded tile (2-byte operands), the warps' partial
  /// scores (f32), P (the operand type) and the rows' rescale factors (f32).
  int64_t qBytes() const { return kRows * rowStride() * 2; }
  int64_t tileBytes() const { return s.kvTile * rowStride() * 2; }
  /// Elements between two rows of P: kv_tile + 8, so that the 8 rows of an
  /// ldmatrix fall in different banks.
  int64_t pRowStride() const { return s.kvTile + 8; }
  int64_t partialScoreBytes() const {
    return scoreParts() * kRows * s.kvTile * 4;
  }
  int64_t pBytes() const { return kRows * pRowStride() * 2; }
  int64_t factorBytes() const { return kRows * 4; }
  int64_t ldsBytes() const {
    return qBytes() + tileBytes() + partialScoreBytes() + pBytes() +
           factorBytes();
  }
  /// The persistent grid on a chip of `computeUnits` SMs.
  static int64_t workgroups(int64_t computeUnits) {
    return computeUnits * kBlocksPerSM;
  }
  /// Why the kernel cannot be built for these shapes and this config
  /// within `ldsLimit` bytes of static shared memory, if it cannot.
  std::optional<std::string> unsupported(int64_t ldsLimit) const;

private:
  SM90KernelShape s;
};

} // namespace mla

#endif // MLA_TARGET_SM90KERNELPLAN_H
