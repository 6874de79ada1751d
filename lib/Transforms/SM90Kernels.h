//===- SM90Kernels.h - the sm_90a kernels mla-to-gpu builds -----*- C++ -*-===//
//
// The partial-decode kernel for NVIDIA Hopper (sm_90a), from the same split
// level as the gfx950 kernel, with the same arguments, work list and
// persistent schedule; the combine and plan kernels are the target-neutral
// ones of GFX950Kernels.h. Its layout is the SM90KernelPlan's
// (mla/Target/SM90KernelPlan.h): a block of 8 warps serves 16 (token,
// head) rows (at rows_per_wave = 32: 16 warps, two m16 row fragments,
// each warp's K and V fragments feeding both); KV tiles stream into
// shared-memory stages by cp.async, fp8's by cp.async.bulk eight rows a
// copy on a stage's mbarrier (SM90TileDecode.cpp), then
//
//   QK       mma.sync, each warp a group of tile rows over its share of
//            Dqk; the warps' partial scores add through shared memory
//   softmax  online, in f32, 16 threads a row, reduced by shuffles
//   PV       mma.sync, each warp its Dv columns over the whole tile
//            (16-row bf16 blocks: warpgroup MMA, each warpgroup half of
//            Dv)
//
// (SM90TensorCore.cpp, SM90WarpgroupMma.cpp). fp8 operands come from the
// stage's bytes, e4m3 pairs to f16 in registers; an mxfp4 stage is decoded
// into a bf16 tile.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_TRANSFORMS_SM90KERNELS_H
#define MLA_LIB_TRANSFORMS_SM90KERNELS_H

#include "KernelBuilder.h"

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Target/SM90KernelPlan.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

#include <array>
#include <optional>
#include <string>

namespace mla {

/// prmt (default mode): byte i of the result is byte selector.nibble(i)
/// of the 8 bytes {hi, lo}.
mlir::Value permute(mlir::OpBuilder &b, mlir::Location loc, mlir::Value lo,
                    mlir::Value hi, mlir::Value selector);
/// An i32 of four e4m3 codes as two f16 pairs (bytes 0, 1 and 2, 3) by
/// cvt.rn.f16x2.e4m3x2: exact.
std::array<mlir::Value, 2> fp8WordToF16(mlir::OpBuilder &b,
                                        mlir::Location loc, mlir::Value word);

class SM90PartialKernel {
public:
  /// `workgroups`: the persistent grid; `ldsLimit`: bytes of static shared
  /// memory a block may use (both from the target); `testHazard`: the bug
  /// mla-to-gpu's test-hazard option builds in, if one of this kernel's.
  SM90PartialKernel(PartialDecodeOp op, int64_t workgroups, int64_t ldsLimit,
                    llvm::StringRef testHazard = "");

  std::optional<std::string> unsupported() const {
    return plan.unsupported(ldsLimit);
  }
  mlir::gpu::GPUFuncOp build(mlir::OpBuilder &moduleBuilder,
                             llvm::StringRef name);
  int64_t rowsPerWorkgroup() const { return plan.rowsPerWorkgroup(); }
  int64_t headsPerBlock() const { return plan.headsPerBlock(); }

private:
  PartialKernelSignature signature(mlir::Builder &b) const;
  /// The pipeline stages' shared-memory type (per format and layout).
  mlir::MemRefType stageType(mlir::Builder &b) const;
  void bindArguments(mlir::gpu::GPUFuncOp func);
  void emitBody(mlir::OpBuilder &b);
  void emitUnit(mlir::OpBuilder &b, mlir::Value unit);
  /// griddepcontrol.launch_dependents: the combine kernel may launch once
  /// every block has issued it or ended (emitBody says where it is issued).
  void emitCombineLaunch(mlir::OpBuilder &b);
  /// The work item's sequence, positions and the thread's row.
  mlir::Value emitWorkAssignment(mlir::OpBuilder &b, mlir::Value unit);
  mlir::Value emitSequenceLength(mlir::OpBuilder &b);
  /// `count` 8-column chunks of the block's Q rows, firstChunk + stride i
  /// (row-major over the block's rows), loaded at once: their values, row
  /// in the block, first column, and whether the chunk is in the block.
  struct QChunk {
    mlir::Value values, row, col, valid;
  };
  llvm::SmallVector<QChunk> loadQChunks(mlir::OpBuilder &b,
                                        mlir::Value firstChunk, int64_t stride,
                                        int64_t count);
  /// The row block's Q rows into shared memory.
  void emitQLoad(mlir::OpBuilder &b);
  /// The copies of the first pipeline_stages - 1 tiles (mxfp4: their
  /// scales, which the KV loop carries).
  llvm::SmallVector<mlir::Value> emitFirstTiles(mlir::OpBuilder &b);
  mlir::scf::ForOp emitKVLoop(mlir::OpBuilder &b, mlir::ValueRange scales);
  void emitLoopStep(mlir::OpBuilder &b, mlir::Value tileStart,
                    mlir::ValueRange carried);
  /// Cache values per 16-byte chunk of a row.
  int64_t chunkValues() const;
  /// The thread's copy slot `slot` of a tile (SM90KernelPlan::rowChunks):
  /// its tile row and chunk of the row, and whether it copies (null:
  /// always). The mxfp4 decode reads the thread's own copies by it.
  struct CopySlot {
    mlir::Value row, chunk, valid;
  };
  CopySlot copySlot(mlir::OpBuilder &b, int64_t slot);
  struct TileCopies {
    /// mxfp4: the E8M0 scale of each of the thread's chunks (cp.async moves
    /// 4, 8 or 16 aligned bytes; a row's 18 scales are not).
    llvm::SmallVector<mlir::Value> scales;
  };
  /// The thread's 16-byte chunks of the tile at `tileStart` into stage
  /// `stage` by cp.async, one commit group (empty past the item's end).
  TileCopies emitTileCopies(mlir::OpBuilder &b, mlir::Value tileStart,
                            mlir::Value stage);
  /// bf16: the thread's chunks of its tile rows into the swizzled stage
  /// (SM90KernelPlan::swizzledCopyPasses).
  void emitSwizzledCopies(mlir::OpBuilder &b, mlir::Value stage,
                          mlir::Value tileIsReal,
                          llvm::function_ref<mlir::Value(mlir::Value)>
                              cacheRowOf);
  /// The copies of tile row r from cache row cacheRowOf(r), if tileIsReal
  /// (null: always).
  TileCopies emitRowCopies(mlir::OpBuilder &b, mlir::Value stage,
                           mlir::Value tileIsReal,
                           llvm::function_ref<mlir::Value(mlir::Value)>
                               cacheRowOf);
  /// mxfp4: the E8M0 scale of slot `c`'s chunk (a slot that copies
  /// nothing reads a row within the tile; its scale is not used). A tile
  /// past the item's end (every tile of an empty item) reads none: its
  /// rows may lie outside the cache and the page table.
  mlir::Value loadRowScale(mlir::OpBuilder &b, const CopySlot &c,
                           mlir::Value tileIsReal,
                           llvm::function_ref<mlir::Value(mlir::Value)>
                               cacheRowOf);
  /// Bulk copies: the tile at `tileStart` into stage `stage`, a group of
  /// 8 rows a warp (SM90KernelPlan::rowGroups), else a pair of rows by
  /// each of a warp's first bulkRowsPerWarp / 2 lanes (one copy where the
  /// rows are adjacent in the cache, SM90KernelPlan::bulkPairs), its
  /// bytes expected on the stage's mbarrier by thread 0 (nothing past the
  /// item's end).
  void emitBulkTileCopies(mlir::OpBuilder &b, mlir::Value tileStart,
                          mlir::Value stage);
  /// Bulk copies: tile rows 2 pair, 2 pair + 1 of the tile at `tileStart`
  /// into stage `stage`, one copy where they are adjacent in the cache.
  void emitRowPairCopies(mlir::OpBuilder &b, mlir::Value tileStart,
                         mlir::Value stage, mlir::Value barrier,
                         mlir::Value pair);
  /// Bulk copies (SM90KernelPlan::rowGroups): the warp's group of rows of
  /// the tile at `tileStart` into stage `stage`, one copy where its rows
  /// are adjacent in the cache, else a row a lane.
  void emitRowGroupCopies(mlir::OpBuilder &b, mlir::Value tileStart,
                          mlir::Value stage, mlir::Value barrier,
                          mlir::Value lane);
  /// Bulk copies: `rows` cache rows from the item's position `pos` (clamped
  /// to its last) to byte `stageOffset` of the stages, on `barrier`.
  void emitBulkRowCopy(mlir::OpBuilder &b, mlir::Value stageOffset,
                       mlir::Value pos, int64_t rows, mlir::Value barrier);
  /// Bulk copies: stage `stage`'s mbarrier, as a shared-memory pointer.
  mlir::Value stageBarrier(mlir::OpBuilder &b, mlir::Value stage);
  /// Bulk copies: thread 0 (re)initializes the stages' mbarriers for the
  /// next unit, whose tiles count phases from 0 (`invalidate`: they were
  /// initialized before). A block barrier must follow before they are used.
  void emitStageBarrierInit(mlir::OpBuilder &b, bool invalidate);
  /// Until the step's tile has landed: the thread's copies (cp.async), or
  /// its stage's mbarrier phase (bulk copies).
  void emitTileWait(mlir::OpBuilder &b);
  /// mxfp4: the thread's own copies (copySlot) in stage `stage` decoded
  /// into the bf16 operand tile.
  void emitTileDecode(mlir::OpBuilder &b, mlir::Value stage,
                      mlir::ValueRange scales);
  /// The operand tile (a bf16 stage, else mxfp4's decoded tile) and the
  /// indices of its 8 values (8 rowGroup + coreRow, 8 chunk .. + 7).
  mlir::Value operandTile() const;
  llvm::SmallVector<mlir::Value> tileIndices(mlir::OpBuilder &b,
                                             mlir::Value rowGroup,
                                             mlir::Value coreRow,
                                             mlir::Value chunk);
  /// mxfp4: where the decoded tile stores a row's 16-byte unit u (8 bf16):
  /// at u ^ (u / 8 % 4). A thread decodes a 16-byte chunk of the stage
  /// into units 4 c .. 4 c + 3, so without it the 8 threads of a store's
  /// phase (chunks c .. c + 7, 64 bytes apart) hit 2 of the 8 bank groups
  /// (4-way conflicts); with it, 8. The swap stays within an aligned group
  /// of 4 units (inside the row's padding), and the 8 rows an ldmatrix
  /// reads at one unit stay in 8 groups (rows are 1 mod 8 units apart).
  mlir::Value decodedTileUnit(mlir::OpBuilder &b, mlir::Value unit);
  /// The cache row of the item's position `pos` (page table applied).
  mlir::Value cacheRow(mlir::OpBuilder &b, mlir::Value pos);
  /// QK on the tensor cores: each warp's partial scores of its n-block of
  /// tile rows over its share of Dqk's k-steps, into shared memory.
  void emitScoreMma(mlir::OpBuilder &b);
  /// The scaled, masked scores of the thread's tile columns (exp2 domain),
  /// summed over the warps' partials.
  llvm::SmallVector<mlir::Value> emitScores(mlir::OpBuilder &b,
                                            mlir::Value tileStart);
  /// bf16: acc = acc · rescale(row) + (V^T · P^T) on warpgroup MMA
  /// (SM90WarpgroupMma.cpp), for the warpgroup's 64-column blocks of Dv.
  llvm::SmallVector<mlir::Value> emitOutputWgmma(mlir::OpBuilder &b,
                                                 mlir::ValueRange acc);
  /// The wgmma accumulators (O^T: lane 4 g + t of warp w holds Dv columns
  /// 16 w + g (+ 8) of each block, rows 2 t (+ 1) (+ 8)) times the rows'
  /// final factors, to out or the partials.
  void emitTransposedOutputStores(mlir::OpBuilder &b, mlir::ValueRange acc,
                                  mlir::Value direct);
  /// fence.proxy.async when wgmma reads shared memory the generic proxy
  /// wrote (before the barrier that publishes it).
  void fenceForWarpgroups(mlir::OpBuilder &b);
  /// acc = acc · rescale(row) + P · V on the tensor cores, for the warp's
  /// output n-blocks.
  llvm::SmallVector<mlir::Value> emitOutputMma(mlir::OpBuilder &b,
                                               mlir::ValueRange acc);
  /// A lane's output pair in the decoded tile's column order (mxfp4) as a
  /// pair of consecutive columns, by one shuffle with its neighbour.
  llvm::SmallVector<mlir::Value> tradeWithNeighbour(mlir::OpBuilder &b,
                                                    mlir::ValueRange pair);
  /// The accumulators times the rows' final factors, to out or the partials.
  void emitOutputStores(mlir::OpBuilder &b, mlir::ValueRange acc,
                        mlir::Value direct);
  /// The row's factor into shared memory (the row's first thread).
  void storeRowFactor(mlir::OpBuilder &b, mlir::Value factor);
  /// The tensor-core operands' element type: f16 for fp8 caches (e4m3 is
  /// exact in f16, one conversion per pair; Q is scaled per row into f16's
  /// range), bf16 otherwise.
  mlir::Type operandType(mlir::Builder &b) const;
  /// fp8: Q per row times a power of two that brings its largest magnitude
  /// into [2^14, 2^15), as f16; the row's scores undo it.
  void emitScaledQLoad(mlir::OpBuilder &b);
  /// `tiles` 8 x 8 matrices of operands in shared memory by ldmatrix (lane
  /// 8 i + r names row r of matrix i at [row, col]), one mma fragment
  /// register per matrix.
  llvm::SmallVector<mlir::Value> loadMatrices(mlir::OpBuilder &b,
                                              mlir::Value mem,
                                              mlir::ValueRange indices,
                                              int64_t tiles, bool transpose);
  /// D = A · B + C for one m16n8k16 fragment of the operand type (4 + 2
  /// registers: i32 for bf16, vector<2xf16> for f16; 4 f32).
  llvm::SmallVector<mlir::Value> mma(mlir::OpBuilder &b,
                                     llvm::ArrayRef<mlir::Value> a,
                                     llvm::ArrayRef<mlir::Value> bFrag,
                                     llvm::ArrayRef<mlir::Value> c);
  /// fp8: the B fragments of `blocks` (2, 4) n-blocks of tile rows from
  /// `row0` at k-step column `d` as e4m3 words (fp8WordToF16 makes each
  /// the block's two registers), by one ldmatrix of the stage's bytes (k
  /// in the order Q is stored in).
  llvm::SmallVector<mlir::Value> loadFp8KWords(mlir::OpBuilder &b,
                                               mlir::Value row0, mlir::Value d,
                                               int64_t blocks);
  /// fp8: the tile row score column / PV k index `j` reads
  /// (SM90KernelPlan::stageRowOf).
  mlir::Value stageRow(mlir::OpBuilder &b, mlir::Value j);
  /// fp8: the stage's indices of byte `byte` of the tile row column `row`
  /// reads (stageRow; its rows lie in groups,
  /// SM90KernelPlan::stageGroupBytes; 16-bit elements).
  llvm::SmallVector<mlir::Value>
  fp8StageIndices(mlir::OpBuilder &b, mlir::Value row, mlir::Value byte);
  /// fp8: `tiles` 8 x 8 matrices of the stage's byte pairs by ldmatrix
  /// (optionally transposed), each as a lane's 32-bit word.
  llvm::SmallVector<mlir::Value> loadStageWords(mlir::OpBuilder &b,
                                                mlir::ValueRange indices,
                                                int64_t tiles, bool transpose);
  /// fp8: the B fragments of tile rows [row0, row0 + 16) (k) x output
  /// group `group`'s four n-blocks, from the stage's bytes by one
  /// transposed ldmatrix.
  llvm::SmallVector<std::array<mlir::Value, 2>>
  loadFp8VFragments(mlir::OpBuilder &b, mlir::Value row0, mlir::Value group);
  /// The thread's output in vectors of consecutive columns from `col`:
  /// the accumulators of a row half (add 2 for rows g + 8) that hold them,
  /// and whether they lie within Dv.
  struct OutputVector {
    mlir::Value col, inDv;
    llvm::SmallVector<int64_t> accumulators;
  };
  llvm::SmallVector<OutputVector> outputVectors(mlir::OpBuilder &b);
  /// A block row's final output: its factor, whether it is real, and the
  /// indices of its column `col` in out and in the item's partials.
  struct OutputRow {
    mlir::Value factor, isReal;
    std::array<mlir::Value, 2> out;
    std::array<mlir::Value, 3> partial;
    llvm::SmallVector<mlir::Value> outIndices(mlir::Value col) const {
      return {out[0], out[1], col};
    }
    llvm::SmallVector<mlir::Value> partialIndices(mlir::Value col) const {
      return {partial[0], partial[1], partial[2], col};
    }
  };
  OutputRow outputRow(mlir::OpBuilder &b, mlir::Value row);
  /// Max or sum over the row's 16 threads.
  mlir::Value rowReduce(mlir::OpBuilder &b, mlir::Value v, bool isMax);
  void emitEpilogue(mlir::OpBuilder &b, mlir::scf::ForOp loop);

  mutable PartialDecodeOp op;
  mlir::Location loc;
  SM90KernelPlan plan;
  CacheFormat format;
  int64_t workgroups, ldsLimit;
  int64_t numHeads, qkDim, vDim, tile, pageSize;
  std::string testHazard;
  /// The KV loop carries the softmax state, then this many accumulators,
  /// then (mxfp4) the scales of the tiles in flight.
  int64_t numAccumulators = 0;

  PartialKernelArguments args;
  struct Shared {
    /// tile: the decoded operand tile (mxfp4 only); stageBarriers: the
    /// stages' mbarriers (bulk copies only).
    mlir::Value q, stages, tile, partialScores, p, factors, stageBarriers;
  } smem;
  /// The stage the current KV step computes on, and (bulk copies) the
  /// parity of the stage's mbarrier phase its tile completes (the
  /// stage's uses in the unit so far, mod 2).
  mlir::Value computeStage, computePhase;
  struct WorkItem {
    mlir::Value seq, begin, end, slot, qBegin, qLen, kvBegin, kvLen, lastPos;
    /// The sequence has this item only: its rows are final.
    mlir::Value direct;
    /// The block's first row (token-major over q_len·H) and row count.
    mlir::Value firstRow, numRows;
  } item;
  struct ThreadRow {
    mlir::Value tid, row, lane, isReal, token, head, tokenRow, visibleEnd;
    /// The mma.sync roles: the warp, and lane 4 group + pair within it.
    mlir::Value warp, group, pair;
    /// The ldmatrix roles: lane 8 matrix + matrixRow names that row; of an
    /// x4 load of a 16 x 16 step, stepRow = 8 (matrix % 2) + matrixRow.
    mlir::Value matrix, matrixRow, stepRow;
  } thread;
  mlir::Value c0, c1, scoreScale, outScale, negInf;
  /// The thread's row's score scale (scoreScale, over fp8's Q row scale).
  mlir::Value rowScoreScale;
  /// Where a full grid (more units than half its blocks) releases the
  /// combine's launch: in the block's last unit, before its tiles if it
  /// has more than kLongUnitTiles, else after them.
  static constexpr int64_t kLongUnitTiles = 4;
  struct {
    mlir::Value fullGrid, lastUnit;
  } combineLaunch;
};

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_SM90KERNELS_H
