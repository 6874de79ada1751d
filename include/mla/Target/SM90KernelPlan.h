//===- SM90KernelPlan.h - the sm_90a partial kernel's plan ------*- C++ -*-===//
//
// How the sm_90a partial-decode kernel is laid out for a decode's shapes and
// config: a block of 8 warps serves 16 (token, head) rows (at
// rows_per_wave = 32: 16 warps, 32 rows as two m16 fragments); KV tiles
// stream from global into shared-memory stages by cp.async (fp8:
// cp.async.bulk on mbarriers), pipeline_stages - 1 tiles ahead of the one
// computed. The tensor cores read bf16 and fp8 stages where the copies put
// them (fp8 pairs become f16 in registers); an mxfp4 stage is decoded once
// per block into a bf16 operand tile. QK and PV run on the tensor cores
// (mma.sync m16n8k16, f32 accumulators) from there — 16-row bf16 blocks'
// PV on warpgroup MMA (wgmma m64n16k16, both operands read from shared
// memory); the online softmax runs 16 threads per row. All of it is
// dynamic shared memory (over the 48 KiB a block's static shared memory
// may hold).
// The config verifier checks a config against the target with this plan,
// and mla-to-gpu builds the kernel from it, so the two cannot disagree about
// what fits.
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
  int64_t rowsPerWave = 16;
};

class SM90KernelPlan {
public:
  /// (token, head) rows a block serves (rows_per_wave: 16 or 32), row
  /// blocks counting them token-major; the tensor cores take them 16 (an
  /// m16 fragment) at a time.
  static constexpr int64_t kFragmentRows = 16;
  int64_t rows() const { return s.rowsPerWave; }
  int64_t rowFragments() const { return rows() / kFragmentRows; }
  /// Threads per row: a row's scores and output columns are dealt to them.
  static constexpr int64_t kLanesPerRow = 16;
  int64_t threads() const { return rows() * kLanesPerRow; }
  int64_t warps() const { return threads() / 32; }
  static int64_t warpsFor(int64_t rows) { return rows * kLanesPerRow / 32; }
  /// Resident threads per SM the persistent grid assumes: two 16-row blocks
  /// or one 32-row block (128 registers a thread either way). A 32-row
  /// block converts (mxfp4: decodes) each K and V fragment of a tile once
  /// for both of its m16 fragments and streams the tile once for twice the
  /// rows; one block's shared memory also holds 64-row tiles where two
  /// blocks' could not (bf16's stages, mxfp4's decoded tile).
  static constexpr int64_t kThreadsPerSM = 512;
  static int64_t blocksPerSM(int64_t rows) {
    return kThreadsPerSM / (rows * kLanesPerRow);
  }
  int64_t blocksPerSM() const { return blocksPerSM(rows()); }
  /// The config's defaults for this kernel.
  static constexpr int64_t kDefaultTile = 16;
  /// pipeline_stages: tiles in shared memory at once, the one computed and
  /// the stages - 1 in flight behind it (the bytes in flight hide HBM's
  /// latency). Two: with two blocks an SM, a larger tile in two stages
  /// beats a smaller one in more, and more stages of the same tile gain
  /// nothing (H200, docs/performance.md: mxfp4's 32-row tiles in 2 stages
  /// 2.5% faster than in 4).
  static constexpr int64_t kDefaultStages = 2;
  static constexpr int64_t kMaxStages = 8;
  int64_t stages() const { return s.stages; }
  /// Whether a tile's rows arrive by cp.async.bulk, a cache row a copy (a
  /// warp's first lanes issue its share of the rows), each stage's copies
  /// completing on its mbarrier, rather than by 16-byte cp.async, ~10 a
  /// thread a tile. fp8: a step's copies are a bulk copy in each of a
  /// warp's first 4 lanes and thread 0's expect; each thread waits for the
  /// stage's mbarrier itself, so no block barrier opens a step and a warp
  /// starts its QK while others finish the previous PV; the next tile's
  /// copies follow the partial-score barrier (every warp past the
  /// previous PV, the stage's last reader), step 0's precede its QK (no
  /// previous PV): on an H100, H = 128 5% and q_len 4 3% faster, the GPU
  /// MODE eight's geomean 1% (docs/performance.md).
  /// mxfp4 measured 7% slower so (its decode pass reads a thread's own
  /// chunks as they land; a bulk copy makes every thread wait for the
  /// whole tile), and bf16's swizzled stages cannot be written by one.
  bool bulkCopies() const { return s.format == CacheFormat::FP8; }
  /// The bulk copies' L2 policy: evict first (the encoding of
  /// `createpolicy.fractional.L2::evict_first.b64 1.0`, which LLVM 22 has
  /// no intrinsic for). A decode reads its cache once, so its lines should
  /// go before the work list, Q and the partials the same step still needs
  /// (H200: fp8 geomean 46.4 -> 45.8 us; evict_last gained nothing).
  static constexpr int64_t kStreamingL2Policy = 0x12F0000000000000;
  /// Bytes of a tile row (the cache row: e4m3 codes).
  int64_t bulkRowBytes() const { return s.qkDim; }
  /// Tile rows each warp copies in bulk where rows lie in pairs: its first
  /// lanes, a pair of rows each (one copy where the pair lies contiguous
  /// in the stage and in the cache, else one a row).
  int64_t bulkRowsPerWarp() const { return s.kvTile / warps(); }
  /// Without rowGroups, fp8 stages hold tile rows in pairs: row r at byte (r /
  /// 2) stagePairBytes() + (r % 2) stagePairRowOffset(). Where some pair stride
  /// puts the 8 rows of an ldmatrix in 8 different 16-byte bank groups with
  /// the pair's rows adjacent (Dqk / 16 odd, or 4 mod 8: Dqk = 576 gives
  /// 1168), a pair is one bulk copy; else the rows are padded to an odd
  /// number of 16-byte units, each its own copy.
  int64_t stagePairRowOffset() const {
    return adjacentPairStride() ? s.qkDim : paddedFp8RowBytes();
  }
  int64_t stagePairBytes() const {
    if (int64_t stride = adjacentPairStride())
      return stride;
    return 2 * paddedFp8RowBytes();
  }
  /// Whether a pair of tile rows can be one bulk copy (adjacent in the
  /// stage; the kernel checks that the cache rows are).
  bool bulkPairs() const { return adjacentPairStride() != 0; }
  /// fp8 stages in groups of kGroupRows adjacent rows and 16 bytes of
  /// padding, where Dqk / 16 is 4 mod 8 (576: groups of 4624 bytes) and
  /// the tile has 4 groups or more, one a warp: a group is one bulk copy
  /// by one lane, 8 a tile where pairs took 32 (ptxas issues a warp's
  /// copies one lane at a time). Rows 2 apart in a group share their
  /// 16-byte bank group, so an ldmatrix's 8 rows (8 consecutive logical
  /// rows: an n-block of QK, a k-step half of PV) are the physical rows
  /// stageRowOf gives, 2 from each of 4 groups: 8 bank groups (H100: fp8
  /// geomean 2% and q_len 4 5% faster than pairs; docs/performance.md).
  static constexpr int64_t kGroupRows = 8;
  bool rowGroups() const {
    return bulkCopies() && s.qkDim / 16 % 8 == 4 &&
           s.kvTile >= 4 * kGroupRows && s.kvTile / kGroupRows <= warps();
  }
  /// Rows a stage group holds (rowGroups: kGroupRows, else a pair), its
  /// bytes, and the offset of its row i at byte i stageRowOffset().
  int64_t stageGroupRows() const { return rowGroups() ? kGroupRows : 2; }
  int64_t stageGroupBytes() const {
    return rowGroups() ? kGroupRows * s.qkDim + 16 : stagePairBytes();
  }
  int64_t stageRowOffset() const {
    return rowGroups() ? s.qkDim : stagePairRowOffset();
  }
  /// The tile row (its position in the tile: rows in order in the stage)
  /// that score column / PV k index j reads. rowGroups: column 8 m + e is
  /// row 8 (4 (m / 4) + e / 2) + 2 (m % 4) + e % 2 (groups 0-3 for m < 4,
  /// 4-7 after); pairs: j.
  int64_t stageRowOf(int64_t j) const {
    if (!rowGroups())
      return j;
    int64_t m = j / kGroupRows, e = j % kGroupRows;
    return kGroupRows * (4 * (m / 4) + e / 2) + 2 * (m % 4) + e % 2;
  }
  /// The stages' mbarriers (bulk copies): 8 bytes each.
  int64_t barrierBytes() const { return bulkCopies() ? 8 * s.stages : 0; }
  /// Shared memory the CUDA driver keeps per resident block.
  static constexpr int64_t kReservedSharedPerBlock = 1024;

  explicit SM90KernelPlan(const SM90KernelShape &shape) : s(shape) {}

  int64_t rowsPerWorkgroup() const { return rows(); }
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
  /// QK: each warp scores a group of tile rows (mma n-blocks of 8) over a
  /// share of Dqk's 16-column k-steps, so that one Q fragment (read from
  /// shared memory) feeds an mma per n-block; the warps of a group add
  /// their partial scores through shared memory. 64-row tiles take groups
  /// of 32 rows: half the Q reads, twice the partials, of 16. A 32-row
  /// block's warps take 16 tile rows for each of its two fragments: the
  /// same 16 score accumulators a thread and mmas a k-step, each K
  /// fragment converted once for both.
  int64_t scoreRowsPerWarp() const {
    return s.kvTile >= 64 && rowFragments() == 1 ? 32 : 16;
  }
  int64_t scoreBlocksPerWarp() const { return scoreRowsPerWarp() / 8; }
  int64_t scoreGroups() const { return s.kvTile / scoreRowsPerWarp(); }
  int64_t scoreParts() const { return warps() / scoreGroups(); }
  int64_t kSteps() const { return s.qkDim / 16; }

  /// bf16 stages (Dqk a multiple of 64) in wgmma's 128-byte swizzle: the
  /// stage is Dqk / 64 slabs of kv_tile rows x 128 bytes (64 values), the
  /// 16-byte chunk c of row r stored at chunk c ^ (r % 8) of its row (the
  /// hardware's swizzle of address bits 4-6 by bits 7-9: slabs start
  /// 1024-byte aligned). V^T is wgmma's A operand as it lies (M = Dv
  /// contiguous, "MN-major"), ldmatrix's 8 rows of a chunk fall in 8
  /// different chunks (no bank conflict), and a warp copies 512
  /// contiguous bytes of a cache row into 4 whole 128-byte rows.
  bool swizzledStages() const {
    return s.format == CacheFormat::BF16 && (2 * s.qkDim) % kSwizzleBytes == 0;
  }
  static constexpr int64_t kSwizzleBytes = 128, kSwizzleRows = 8;
  static constexpr int64_t kSwizzleAlignment = kSwizzleBytes * kSwizzleRows;
  int64_t slabs() const { return 2 * s.qkDim / kSwizzleBytes; }
  int64_t slabBytes() const { return s.kvTile * kSwizzleBytes; }
  /// Swizzled copies: warp w copies tile rows w, w + 8, ..., lane l chunks
  /// l, l + 32, ... of each (512 contiguous bytes of the cache an
  /// instruction; constant strides in the cache and the stage).
  int64_t swizzledCopyPasses() const { return (rowChunks() + 31) / 32; }
  /// Core matrices (8 rows x 16 bytes, 128 contiguous bytes): P as wgmma's
  /// B operand, [row / 8][column / 8].
  static constexpr int64_t kCoreRows = 8;
  static constexpr int64_t kCoreBytes = 128;
  /// bf16 PV on warpgroup MMA: O^T = V^T · P^T by wgmma m64n16k16 bf16
  /// (M: 64 of Dv, N: the block's 16 rows, K: 16 tile rows a step), V^T
  /// from the stage and P^T (K-major: P's rows) from shared memory; each
  /// warpgroup owns half of Dv's 64-column blocks. Dv must split so.
  /// 16-row blocks only: a 32-row block's mma.sync PV on 64-row tiles
  /// (which only one block an SM can hold) measured 31% faster at H = 128
  /// than 16-row blocks' wgmma on 32-row tiles (docs/performance.md).
  bool outputOnWarpgroups() const {
    return rowFragments() == 1 && swizzledStages() &&
           s.vDim % (kWgmmaM * kWarpgroups) == 0;
  }
  /// (16-row blocks: 8 warps.)
  static constexpr int64_t kWarpgroups = 2;
  static constexpr int64_t kWgmmaM = 64, kWgmmaK = 16;
  int64_t outputMBlocksPerWarpgroup() const {
    return s.vDim / kWgmmaM / kWarpgroups;
  }
  /// P for wgmma (B = P^T, K-major) in the swizzle as wide as a row of P
  /// (kv_tile bf16: 32, 64 or 128 bytes): [row / 8][row % 8][stored chunk]
  /// [value], the 16-byte chunk c of row r stored at c ^ ((r % 8) ·
  /// pRowBytes / 128 mod pRowBytes / 16) (the hardware's XOR of address
  /// bits 4.. by bits 7..), 8-row groups aligned to their size. A row's
  /// 16 softmax threads then store into as many banks as the row has
  /// words, where unswizzled core matrices (16 bytes a row) gave 4-way
  /// conflicts.
  int64_t pRowBytes() const { return 2 * s.kvTile; }
  int64_t pRowGroupBytes() const { return kCoreRows * pRowBytes(); }
  int64_t pAlignment() const {
    return outputOnWarpgroups() ? pRowGroupBytes() : 16;
  }
  /// PV: Dv in n-blocks of 8, dealt to the warps round robin; fp8 deals
  /// groups of 32 columns, each four n-blocks (block j of a group holds
  /// its columns 16 (j / 2) + 2 n + j % 2: one transposed ldmatrix of the
  /// stage's byte pairs covers all four; the op's Dv is a multiple of 32).
  int64_t outputBlocks() const { return s.vDim / 8; }
  static constexpr int64_t kGroupColumns = 32;
  int64_t outputGroups() const { return s.vDim / kGroupColumns; }
  int64_t outputGroupsPerWarp() const {
    return (outputGroups() + warps() - 1) / warps();
  }
  int64_t outputBlocksPerWarp() const {
    if (s.format == CacheFormat::FP8)
      return 4 * outputGroupsPerWarp();
    if (outputOnWarpgroups()) // m64n16: 8 f32 a thread, 2 n-blocks of 4
      return 2 * outputMBlocksPerWarpgroup();
    return (outputBlocks() + warps() - 1) / warps();
  }
  /// Tile columns each of a row's 16 threads scores in the softmax,
  /// consecutive ones (one vector load of each partial, one P store).
  int64_t tileRowsPerLane() const { return s.kvTile / kLanesPerRow; }
  /// Shared memory: Q and the decoded tile (2-byte operands), the warps' partial
  /// scores (f32), P (the operand type) and the rows' rescale factors (f32).
  int64_t qBytes() const { return rows() * rowStride() * 2; }
  /// mxfp4 is decoded into a bf16 operand tile; bf16 and fp8 stages are
  /// the operands.
  bool decodesTile() const { return s.format == CacheFormat::MXFP4; }
  /// The decoded tile holds the values times 2^-kTileExponentShift, so
  /// that one bf16 multiply scales a decoded pair for every E8M0 scale up
  /// to 136 (the scores' scale and the output's factor undo it), and each
  /// 8 columns in the order the decode makes them: position p of a group
  /// holds its column decodedColumn(p) (0 4 1 5 2 6 3 7). Q is stored in
  /// that order too; PV's outputs come out in it, and the stores trade a
  /// value between neighbouring lanes to write whole column pairs.
  static constexpr int64_t kTileExponentShift = 8;
  static constexpr int64_t kDecodedGroup = 8;
  static int64_t decodedColumn(int64_t position) {
    int64_t p = position % kDecodedGroup;
    return position - p + p / 2 + (p % 2) * (kDecodedGroup / 2);
  }
  /// A stage's row: the cache row's bytes (E2M1 pairs for mxfp4, whose
  /// E8M0 scales travel in registers: cp.async moves 4, 8 or 16 bytes),
  /// padded like the operand tile for bf16 (unless swizzled); fp8's rows
  /// lie in pairs (stagePairBytes: half of it here).
  int64_t stageRowBytes() const {
    switch (s.format) {
    case CacheFormat::BF16:
      return swizzledStages() ? 2 * s.qkDim : rowStride() * 2;
    case CacheFormat::FP8:
      return stageGroupBytes() / stageGroupRows();
    case CacheFormat::MXFP4:
      return s.qkDim / 2;
    }
    return 0;
  }
  int64_t stageBytes() const { return s.kvTile * stageRowBytes(); }
  /// cp.async moves a cache row in 16-byte chunks; the block's threads copy
  /// whole rows a pass (thread i: row i / rowChunks, chunk i % rowChunks),
  /// so that a thread's chunks of a tile lie a constant stride apart in
  /// both the cache and the stage (one address, immediate offsets).
  int64_t rowChunks() const {
    switch (s.format) {
    case CacheFormat::BF16:
      return s.qkDim * 2 / 16;
    case CacheFormat::FP8:
      return s.qkDim / 16;
    case CacheFormat::MXFP4:
      return s.qkDim / 2 / 16;
    }
    return 0;
  }
  int64_t copyRowsPerPass() const { return threads() / rowChunks(); }
  int64_t copyPasses() const {
    return (s.kvTile + copyRowsPerPass() - 1) / copyRowsPerPass();
  }
  int64_t tileBytes() const {
    return decodesTile() ? s.kvTile * rowStride() * 2 : 0;
  }
  /// Elements between two rows of P: kv_tile + 8, so that the 8 rows of an
  /// ldmatrix fall in different banks.
  int64_t pRowStride() const { return s.kvTile + 8; }
  /// f32 between two rows of a part's partial scores: kv_tile + 8, so that
  /// a QK store (rows g of 8, each lane's 8-byte pair at column 2 t) puts
  /// four rows in different banks (two wavefronts, not eight).
  int64_t partialScoreStride() const { return s.kvTile + 8; }
  int64_t partialScoreBytes() const {
    return scoreParts() * rows() * partialScoreStride() * 4;
  }
  /// P in the operand type, in two parts (p ≈ hi + lo) where that is bf16:
  /// one bf16 part keeps 8 significant bits, too few where one cache row
  /// dominates the output (mla/Target/PartialKernelPlan.h, PEncoding); f16
  /// (fp8 caches) keeps 11, enough.
  int64_t pParts() const { return s.format == CacheFormat::FP8 ? 1 : 2; }
  int64_t pPartBytes() const {
    return outputOnWarpgroups() ? rows() * s.kvTile * 2
                                : rows() * pRowStride() * 2;
  }
  int64_t pBytes() const { return pParts() * pPartBytes(); }
  int64_t factorBytes() const { return rows() * 4; }
  /// Every buffer starts 16-byte aligned, swizzled stages 1024-byte
  /// aligned (mla-workgroup-memory-to-dynamic lays them out in this order).
  int64_t stageAlignment() const {
    return swizzledStages() ? kSwizzleAlignment : 16;
  }
  int64_t ldsBytes() const {
    int64_t end = 0;
    auto place = [&](int64_t bytes, int64_t alignment) {
      end = (end + alignment - 1) / alignment * alignment + bytes;
    };
    place(qBytes(), 16);
    place(s.stages * stageBytes(), stageAlignment());
    place(tileBytes(), 16);
    place(partialScoreBytes(), 16);
    place(pBytes(), pAlignment());
    place(factorBytes(), 16);
    place(barrierBytes(), 16);
    return (end + 15) / 16 * 16;
  }
  /// The persistent grid on a chip of `computeUnits` SMs.
  static int64_t workgroups(int64_t computeUnits, int64_t rows) {
    return computeUnits * blocksPerSM(rows);
  }
  /// Why the kernel cannot be built for these shapes and this config
  /// within `ldsLimit` bytes of shared memory per block, blocksPerSM()
  /// blocks per SM, if it cannot. An SM holds a block's limit and the
  /// driver's reserve (Hopper: 227 + 1 KiB).
  std::optional<std::string> unsupported(int64_t ldsLimit) const;
  /// Shared memory blocksPerSM() blocks take, reserves included.
  int64_t smBytes() const {
    return blocksPerSM() * (ldsBytes() + kReservedSharedPerBlock);
  }

private:
  /// A pair stride (bytes) for rows adjacent within a pair, or 0 if none.
  int64_t adjacentPairStride() const;
  /// An fp8 row padded to an odd number of 16-byte units.
  int64_t paddedFp8RowBytes() const {
    int64_t units = s.qkDim / 16;
    return 16 * (units % 2 ? units : units + 1);
  }
  SM90KernelShape s;
};

} // namespace mla

#endif // MLA_TARGET_SM90KERNELPLAN_H
