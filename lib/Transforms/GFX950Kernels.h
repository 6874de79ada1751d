//===- GFX950Kernels.h - the gfx950 kernels mla-to-gpu builds ---*- C++ -*-===//
//
// The partial-decode kernel is built stage by stage, one file per stage, in
// kernel order:
//
//   PartialKernel.cpp          signature, work assignment, the KV loop
//   PartialKernelStaging.cpp   KV tiles global -> LDS by DMA, the waits
//   PartialKernelQK.cpp        S = Q·Kᵀ (Q resident in registers)
//   PartialKernelSoftmax.cpp   online softmax, P in LDS
//   PartialKernelPV.cpp        acc = acc·rescale + P·V
//   PartialKernelEpilogue.cpp  normalization, output or partials
//
// What differs between cache formats is the plan's FormatStrategy; shapes,
// the wave mapping and the LDS buffers are the plan's too
// (mla/Target/PartialKernelPlan.h), the same plan the config verifier uses.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_TRANSFORMS_GFX950KERNELS_H
#define MLA_LIB_TRANSFORMS_GFX950KERNELS_H

#include "KernelBuilder.h"

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Target/PartialKernelPlan.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

#include <optional>
#include <string>

namespace mla {

/// Builds the partial-decode kernel for one op's shapes.
class PartialKernel {
public:
  /// `xcds`: the chiplets the chip deals workgroups to (1 when unknown);
  /// `workgroups`: the persistent grid (a multiple of xcds); `ldsLimit`:
  /// bytes of LDS a workgroup may use; all from the target.
  PartialKernel(PartialDecodeOp op, int64_t xcds, int64_t workgroups,
                int64_t ldsLimit, llvm::StringRef testHazard = "");

  /// Why the kernel cannot be built for this op, if it cannot.
  std::optional<std::string> unsupported() const {
    return plan.unsupported(ldsLimit);
  }
  mlir::gpu::GPUFuncOp build(mlir::OpBuilder &moduleBuilder,
                             llvm::StringRef name);
  /// The row blocks the planner counts: a workgroup serves up to
  /// rowsPerWorkgroup() rows of one block of headsPerBlock() heads.
  int64_t rowsPerWorkgroup() const { return plan.rowsPerWorkgroup(); }
  int64_t headsPerBlock() const { return headsPerWg; }

private:
  /// fp8 and mxfp4: the wave's Q as scaled-MFMA A fragments, two fp8 parts.
  struct ScaledQFragments {
    // vector<32xf8E4M3FN> per whole 128-wide K chunk.
    llvm::SmallVector<mlir::Value> hi, lo;
    mlir::Value scaleHi, scaleLo; // E8M0 2^e and 2^(e-4) of the lane's head
    // Dqk = 128·n + 64: the last 64 columns' hi and lo parts share one
    // chunk (hi at K 0..63, lo at 64..127; null when Dqk is a multiple of
    // 128), with the lane's A scale for its K block: hi's for blocks 0-1.
    mlir::Value tail, scaleTail;
  };
  /// The online softmax's running state of a lane's row: its maximum and
  /// the lane's part of its sum (over the lane's columns).
  struct SoftmaxState {
    mlir::Value max, sum;
  };
  /// What the KV loop carries for each of the wave's fragments f (16 rows
  /// each): its rows' softmax state and its accumulator's column chunks
  /// (acc[f · chunks + c]), as the loop's values max_0.., sum_0.., acc...
  struct RunningState {
    llvm::SmallVector<SoftmaxState, 2> softmax;
    llvm::SmallVector<mlir::Value, 8> acc;
    static RunningState unpack(mlir::ValueRange values, int64_t fragments);
    llvm::SmallVector<mlir::Value> pack() const;
  };

  // PartialKernel.cpp
  PartialKernelSignature signature(mlir::Builder &b) const;
  llvm::SmallVector<mlir::Type> ldsTypes(mlir::Builder &b) const;
  void bindArguments(mlir::gpu::GPUFuncOp func);
  /// The unit's work item and row block; returns whether the block has rows.
  mlir::Value emitWorkAssignment(mlir::OpBuilder &b, mlir::Value itemId,
                                 mlir::Value rowBlock);
  /// One unit of the workgroup's schedule: the whole decode of a row block.
  void emitUnit(mlir::OpBuilder &b, mlir::Value unit);
  /// The wave's 16 query rows and the lane roles.
  void emitWaveRows(mlir::OpBuilder &b);
  /// The sequence's length: kv_indptr's difference, or (pages - 1) · P +
  /// last for a paged cache (kv_last_page_len clamped into 1..P).
  mlir::Value emitSequenceLength(mlir::OpBuilder &b);
  void emitBody(mlir::OpBuilder &b);
  /// The item's KV loop; returns the loop whose results are the final
  /// running state.
  mlir::scf::ForOp emitKVLoop(mlir::OpBuilder &b);
  /// The end of the item's first tiles that every row of the block sees
  /// whole (no row past the item, none past a token's causal limit).
  mlir::Value emitWholeTilesEnd(mlir::OpBuilder &b);
  /// Tiles from `begin` to `end` (i32), `masked` where some may be partial.
  mlir::scf::ForOp emitTileLoop(mlir::OpBuilder &b, mlir::Value begin,
                                mlir::Value end, mlir::ValueRange init,
                                bool masked);
  /// One tile; returns the new running state (RunningState's order).
  llvm::SmallVector<mlir::Value> emitLoopStep(mlir::OpBuilder &b,
                                              mlir::Value tileStart,
                                              mlir::ValueRange carried,
                                              bool masked);

  // PartialKernelStaging.cpp
  /// Where a tile's positions lie in the cache, as wave-uniform i32 values
  /// (rows fit: the C API counts a cache's rows, num_kv_rows, in an
  /// int32, and 32-bit row arithmetic saves the lanes' 64-bit selects).
  /// `kv` and `kvScale` hold the tile's rows as buffers (tileBuffer): one
  /// on a contiguous cache or pages of at least a tile (a tile lies in one
  /// page: items start on tiles), one a page where pages of 64 rows or more
  /// are shorter than the tile (tileBuffers). Smaller pages: none; `start`
  /// and `lastPos` are positions and each lane looks its row's page up
  /// (cacheRow).
  struct TileRows {
    mlir::Value start, lastPos, kvBegin;
    llvm::SmallVector<mlir::Value, 2> kv, kvScale;
  };
  TileRows emitTileRows(mlir::OpBuilder &b, mlir::Value tileStart);
  /// The buffers a tile's rows come from: 1, kTileRows / pageSize, or 0
  /// (per-lane page lookups).
  int64_t tileBuffers() const;
  /// Appends page `p` of the tile (of tileBuffers() > 1, or the one page
  /// holding it) to `tile`'s buffers, its id loaded once by the scalar
  /// unit.
  void emitPageBuffer(mlir::OpBuilder &b, TileRows &tile, int64_t p);
  /// The cache row of the tile's row `localRow` (clamped to the item's last
  /// position) in a cache of pages smaller than a tile. Page ids are
  /// clamped into the pool everywhere, so a bad table never reads outside
  /// it.
  mlir::Value cacheRow(mlir::OpBuilder &b, const TileRows &tile,
                       mlir::Value localRow);
  mlir::Value clampPage(mlir::OpBuilder &b, mlir::Value pageId);
  /// Rows `first`..`last` (cache rows, at most `rows` of them) of `cache`
  /// (kv or kv_scale) as a bounds-checked buffer
  /// (amdgpu.fat_raw_buffer_cast) based at `first`: a lane's offset in it
  /// is the same every tile (no per-load VALU arithmetic, no clamp), 32
  /// bits however large the cache, and a row past the item reads as zeros
  /// (its scores are masked; zeros keep P x V finite).
  mlir::Value tileBuffer(mlir::OpBuilder &b, mlir::Value first,
                         mlir::Value last, int64_t rows, mlir::Value cache);
  /// Calls `read` with where a DMA lane finds the element at (`localRow`,
  /// `col`) of the tile in `cache` (kv or kv_scale, rows of `rowElems`):
  /// its offset in the buffer of `buffers` that holds DMA piece `piece` (of
  /// `pieces`, split evenly between them), or (no buffers) its cache row
  /// and column in `cache`.
  void emitTileRead(
      mlir::OpBuilder &b, const TileRows &tile, mlir::Value cache,
      llvm::ArrayRef<mlir::Value> buffers, mlir::Value piece, int64_t pieces,
      mlir::Value localRow, mlir::Value col, int64_t rowElems,
      llvm::function_ref<void(mlir::Value src, mlir::ValueRange at)> read);
  mlir::Value toI32(mlir::OpBuilder &b, mlir::Value index);
  mlir::Value toIndex(mlir::OpBuilder &b, mlir::Value i32);
  mlir::Value i32Const(mlir::OpBuilder &b, int64_t v);
  void emitTileDma(mlir::OpBuilder &b, mlir::Value tileStart,
                   mlir::Value stage);
  void emitDataGather(mlir::OpBuilder &b, const TileRows &tile,
                      mlir::Value stage, mlir::Value piece);
  void emitScaleGather(mlir::OpBuilder &b, const TileRows &tile,
                       mlir::Value stage, mlir::Value piece);
  /// Puts the next tile in flight (into `nextStage`) and waits for the
  /// current one.
  void emitTileHandoff(mlir::OpBuilder &b, mlir::Value nextStage,
                       mlir::Value nextStart);

  // PartialKernelQK.cpp
  /// The score scale, and fp8/mxfp4's Q fragments, before the loop.
  void emitQPreload(mlir::OpBuilder &b);
  /// bf16: the wave's Q tile, read right before the loop.
  void emitBf16QTile(mlir::OpBuilder &b);
  /// Fragment f's Q (heads 16·f .. of the wave's group).
  ScaledQFragments buildScaledQFragments(mlir::OpBuilder &b, int64_t f);
  /// The wave's scores of the tile: in LDS (bf16, returns none) or the
  /// lane's own in registers, per fragment (fp8, mxfp4; see laneColumns).
  llvm::SmallVector<mlir::Value, 2> emitQK(mlir::OpBuilder &b,
                                           mlir::Value stage);
  void emitBf16QK(mlir::OpBuilder &b, mlir::Value stage);
  llvm::SmallVector<mlir::Value, 2> emitScaledQK(mlir::OpBuilder &b,
                                                 mlir::Value stage);
  /// A lane's B operand of a scaled QK MFMA and its E8M0 scale: K tile row
  /// `tileRow`, the 128-wide chunk at column `chunkBase` (or its last 64
  /// columns twice).
  struct ScaledKFragment {
    mlir::Value values, scale;
  };
  ScaledKFragment scaledKFragment(mlir::OpBuilder &b, mlir::Value stage,
                                  mlir::Value tileRow, int64_t chunkBase,
                                  mlir::Value kg);
  /// fp8: a lane's 32 K bytes of a K tile row for the scaled MFMA, runs
  /// `chunkBase` + 16·kg + j and `chunkBase` + 64 + 16·kg + j (the first
  /// run again past Dqk).
  mlir::Value fp8Fragment(mlir::OpBuilder &b, mlir::Value stage,
                          mlir::Value tileRow, int64_t chunkBase,
                          mlir::Value laneK);
  /// mxfp4: the E8M0 scale of (tile row, 32-element block) in the LDS copy
  /// of the tile's scales.
  mlir::Value loadTileScale(KernelBuilder &k, mlir::Value stage,
                            mlir::Value tileRow, mlir::Value block);
  /// mxfp4: that scale as the f32 2^(s - 127) (PartialKernelPV.cpp).
  mlir::Value tileScaleAsF32(KernelBuilder &k, mlir::Value stage,
                             mlir::Value tileRow, mlir::Value block);

  // PartialKernelSoftmax.cpp
  /// Scores of the tile -> P in LDS and the rows' rescale factors in LDS,
  /// per fragment (`laneScores`: each fragment's, or none: in LDS);
  /// returns the new running states.
  llvm::SmallVector<SoftmaxState, 2>
  emitSoftmax(mlir::OpBuilder &b, mlir::Value tileStart,
              mlir::ValueRange laneScores, llvm::ArrayRef<SoftmaxState> running,
              bool masked);
  /// Where the lane's scores lie in the wave's share of the tile: runs of
  /// `run` columns, `stride` apart, from `start` (a tile row).
  struct LaneColumns {
    mlir::Value start;
    int64_t count, run, stride;
    /// Element e's column, relative to `start`.
    int64_t offset(int64_t e) const { return e / run * stride + e % run; }
  };
  LaneColumns laneColumns(mlir::OpBuilder &b);
  /// The lane offsets (xor) that reach the other three lanes of a row.
  llvm::SmallVector<int64_t, 2> rowLaneOffsets() const;
  /// The lane's scaled scores (`laneScores`, or its run from LDS); if
  /// `masked`, -inf where the item or the token's causal limit hides them.
  mlir::Value tileScores(mlir::OpBuilder &b, mlir::Value tileStart,
                         mlir::Value laneScores, const LaneColumns &columns,
                         bool masked, int64_t f);
  /// Fragment f's softmax step on its scaled, masked scores `s` and its
  /// rows' maxima over the tile.
  SoftmaxState emitFragmentSoftmax(mlir::OpBuilder &b, mlir::Value s,
                                   mlir::Value tileMax, SoftmaxState running,
                                   const LaneColumns &columns, int64_t f);
  /// Fragment f's P into the row group's P buffer.
  void emitPStore(mlir::OpBuilder &b, mlir::Value p, const LaneColumns &columns,
                  int64_t f);
  /// The rows' maxima over the whole tile from the wave's own maxima (one
  /// a fragment): the waves of a row group exchange theirs through LDS.
  llvm::SmallVector<mlir::Value, 2>
  emitRowGroupMax(mlir::OpBuilder &b, llvm::ArrayRef<mlir::Value> ownMax);
  /// The first head (of H) of fragment f of the wave's group.
  mlir::Value fragmentFirstHead(mlir::OpBuilder &b, int64_t f);
  /// The lane's row of fragment f in the group's buffers (P, scores, row
  /// factors, maxima).
  mlir::Value fragmentRow(mlir::OpBuilder &b, int64_t f);
  /// The first Dv column of the wave's accumulator chunk c.
  mlir::Value chunkColumn(mlir::OpBuilder &b, int64_t c);

  // PartialKernelPV.cpp
  /// Fragment f's acc + P·V on its accumulator's column chunk c, V read
  /// from the KV tile (fp8, bf16).
  mlir::Value emitTilePV(mlir::OpBuilder &b, mlir::Value stage, mlir::Value acc,
                         int64_t f, int64_t c);
  /// Every accumulator (fragment-major, a column chunk each) + P·V, V
  /// decoded into bf16 half tiles once for all of them (mxfp4).
  llvm::SmallVector<mlir::Value>
  emitDecodedPV(mlir::OpBuilder &b, mlir::Value stage,
                llvm::ArrayRef<mlir::Value> accs);
  /// Fragment f's per-row factors in LDS broadcast over an accumulator
  /// chunk.
  mlir::Value readRowFactors(mlir::OpBuilder &b, int64_t f);

  // PartialKernelEpilogue.cpp
  /// The rows' softmax sums from the lane's parts of them (a fragment
  /// each).
  llvm::SmallVector<mlir::Value, 2>
  emitRowSums(mlir::OpBuilder &b, llvm::ArrayRef<mlir::Value> lanePartialSums);
  /// Fragment f's output (its accumulator's chunks, normalized) and lse
  /// stores.
  void emitFragmentStores(mlir::OpBuilder &b, llvm::ArrayRef<mlir::Value> out,
                          mlir::Value lse, int64_t f);
  void emitEpilogue(mlir::OpBuilder &b, mlir::scf::ForOp loop);

  mlir::Type elemType(mlir::Builder &b) const;
  mlir::Type kvMemType(mlir::Builder &b) const;
  mlir::Type pvType(mlir::Builder &b) const;

  mutable PartialDecodeOp op; // its accessors are not const
  mlir::Location loc;
  PartialKernelPlan plan;
  FormatStrategy strategy;
  int64_t xcds, workgroups, ldsLimit;
  /// Testing only: the synchronization bug to build in (mla-to-gpu
  /// test-hazard), or "".
  std::string testHazard;
  int64_t numHeads, qkDim, vDim, paddedQK, kTileRows, kStages, headsPerWg;
  int64_t pageSize; // rows per page; 0: a contiguous cache

  // What the stages share while the body is built.
  PartialKernelArguments args;
  struct LdsBuffers {
    mlir::Value kvTiles, scores, p, rowFactors, tileMaxima, decodedV, tileScales;
  } lds;
  /// The workgroup's work item: its sequence, positions [begin, end) of
  /// the sequence, its partial slot; `kvBegin` is the sequence's kv_indptr
  /// entry (its first row, or its first page entry), `lastPos` the item's
  /// last position.
  struct WorkItem {
    mlir::Value seq, begin, end, slot, qBegin, qLen, kvBegin, kvLen, lastPos;
  } item;
  /// The thread and its wave's rows: group of 16 heads of one token.
  /// The block's groups of 16 rows: the first, how many, its head block.
  struct BlockGroups {
    mlir::Value firstGroup, numGroups, headBlock;
  } groupsOfBlock;
  struct WaveRows {
    mlir::Value tid, wave, lane, isRealRow, token, headGroup, tokenRow,
        visibleEnd;
    /// `wave` in a form the backend keeps in an SGPR (the DMA's pieces).
    mlir::Value uniformWave;
    /// The wave's group among the workgroup's (its score buffer), whether it
    /// is the group's first wave (it writes lse; null when the wave is
    /// alone in its group), and the first tile row and Dv column of its
    /// share.
    mlir::Value rowGroup, part, firstPart, kvRowBase, vColBase;
    /// Lane roles in the per-lane code (softmax, epilogue): a row of each
    /// fragment (row, 16 + row, ...) and which quarter of the wave's tile
    /// rows the lane holds of it. Scores in LDS (bf16): row = lane / 4,
    /// quarter = lane % 4 (a run of a quarter of the columns); scores in
    /// registers (fp8, mxfp4: the scaled MFMA's accumulator of S
    /// transposed): row = lane % 16, quarter = lane / 16 (rows 4·quarter
    /// .. +3 of each 16-row block).
    mlir::Value row, quarter;
  } rows;
  mlir::Value c0, c1;
  /// log2(e)·sm_scale (·kv_scale for fp8): raw MFMA products -> exp2 scores.
  mlir::Value scoreScale, kvScale;
  llvm::SmallVector<ScaledQFragments, 2> qFrags; // one a fragment
  llvm::SmallVector<mlir::Value, 2> qTileBf16;   // one a fragment
  // Loop constants.
  mlir::Value zeroAcc, negInf, padElem, padF32;
  mlir::ArrayAttr qkMaps, pvMaps, iters;
};

/// What the plan kernel plans for: the chip and config the host planner
/// is given (SplitOptions), the partial kernel's row blocks and the
/// persistent grid.
struct PlanKernelFacts {
  int64_t computeUnits, workgroups, xcds;
  /// kvTile: the rows items are cut on (mla::itemTile of the kernels').
  int64_t kvTile, forcedSplits, minTilesPerItem, fineItemsFrom,
      maxSplitsPerSeq, unitOverhead;
  int64_t numHeads, qkDim, headsPerBlock, rowsPerWorkgroup, pageSize;
  /// The LLVM sync scope of one workgroup: "workgroup" on AMDGPU, "block"
  /// on NVPTX.
  llvm::StringRef workgroupScope = "workgroup";
};

/// Builds the plan kernel (PlanKernel.cpp): one workgroup that writes the
/// work list and schedule of the batch in the device indptrs.
mlir::gpu::GPUFuncOp buildPlanKernel(const PlanKernelFacts &facts,
                                     mlir::Location loc, mlir::OpBuilder &mb,
                                     llvm::StringRef name);

/// Builds the combine kernel: one workgroup per (sequence, head), 256
/// threads over its (token, column) outputs; sequences with a single work
/// item are left to the partial kernel's direct write. `waitsForPrevious`
/// (sm_90a): it may start while the partial kernel finishes and waits for
/// it (griddepcontrol.wait) after loading its indices, before the partials.
/// `columnSlices` (sm_90a): the grid's z cuts each (sequence, head)'s
/// columns into `combine_slices` blocks (mla::combineSlices).
mlir::gpu::GPUFuncOp buildCombineKernel(CombineOp op, mlir::OpBuilder &mb,
                                        llvm::StringRef name,
                                        bool waitsForPrevious,
                                        bool columnSlices);

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_GFX950KERNELS_H
