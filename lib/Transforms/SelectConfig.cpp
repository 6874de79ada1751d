//===- SelectConfig.cpp - target and tuning config for mla.decode ---------===//
//
// L0 -> L1: reads the chip from the target table, serializes it into
// `mla.target`, and picks `mla.config` for each mla.decode — the only place
// defaults are chosen. Every field can be forced for tuning; what the chip
// cannot run is rejected here, on the op.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Target/KnownTargets.h"
#include "mla/Target/PartialKernelPlan.h"
#include "mla/Target/SM90KernelPlan.h"
#include "mla/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

namespace mla {
#define GEN_PASS_DEF_MLASELECTCONFIGPASS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
/// The KV tile, unless (gfx950) its stages do not fit the LDS.
constexpr int64_t kDefaultTile = 64;
/// gfx950's tile where a loop's fixed costs a tile bound it (below).
constexpr int64_t kLongTile = 128;

/// gfx950: mxfp4's decoded PV pays per tile for the row maxima's exchange,
/// the accumulator's rescale, the decode's barriers and the DMA's scalar
/// address arithmetic, the same for 64 rows as for 128: where all four
/// waves share one row group (H = 16) 128-row tiles take them half as often
/// (serial clocks per 64 KV rows 1589 -> 1478, docs/performance.md). The
/// grid is one workgroup a CU, so the LDS the second tile takes costs no
/// occupancy. fp8 and bf16 meet their budgets at 64 rows, where bf16's
/// stages of 128 do not fit.
bool prefersLongTiles(const PartialKernelPlan &plan) {
  return plan.isMXFP4() && plan.wavesPerRowGroup() == PartialKernelPlan::kWaves;
}

/// Enough waves per group of query rows that one token's rows fill the
/// workgroup (q_len 1, the common decode step): H = 16 splits each tile over
/// 4 waves, H = 32 over 2 — as far as the tile's rows and the Dv columns
/// split into 16s. Groups of 32 rows take at least 2 (a wave's accumulator
/// of 32 rows and all Dv columns would not fit its registers).
int64_t defaultRowGroupWaves(int64_t waves, int64_t headsPerWg,
                             int64_t rowsPerWave, int64_t tile, int64_t vDim) {
  int64_t groupsPerToken = std::max<int64_t>(1, headsPerWg / rowsPerWave);
  auto splitsInto16s = [](int64_t n, int64_t parts) {
    return n % (16 * parts) == 0;
  };
  int64_t split = 1;
  while (split < 4 && waves % (2 * split) == 0 &&
         2 * split * groupsPerToken <= waves &&
         splitsInto16s(tile, 2 * split) && splitsInto16s(vDim, 2 * split))
    split *= 2;
  return rowsPerWave > 16 ? std::max<int64_t>(split, 2) : split;
}

/// sm_90a: 32-row blocks where a sequence's query tokens have that many
/// rows (`tokenRows` = heads_per_workgroup x query-tokens; the last block
/// of a sequence's rows may be part idle): for bf16 and mxfp4 from 32 rows
/// (H100, B = 64, kv = 8192: 21-32% faster at H = 16 with 2-4 tokens and
/// at H = 32-128, 48 and 80 with one; smaller batches gain less, one shape
/// lost 4%: 64-row tiles that only one block an SM holds, mxfp4's decoded
/// tile shared by twice the rows), for fp8 from 64 (up to 11% faster; 1-7%
/// slower at 32 and 48 rows); docs/performance.md. Not where a forced tile
/// or warp count leaves the block unbuildable.
int64_t defaultSM90Rows(CacheFormat format, int64_t tokenRows,
                        int64_t forcedTile, int64_t forcedWarps) {
  constexpr int64_t rows = 2 * SM90KernelPlan::kFragmentRows;
  bool fits =
      (forcedTile == 0 || forcedTile >= 32) &&
      (forcedWarps == 0 || forcedWarps == SM90KernelPlan::warpsFor(rows));
  int64_t fromRows = format == CacheFormat::FP8 ? 2 * rows : rows;
  return tokenRows >= fromRows && fits ? rows : SM90KernelPlan::kFragmentRows;
}

/// gfx950: 32 query rows a wave where a token has them (H a multiple of 32):
/// each K and V fragment a wave reads from LDS then feeds two MFMA blocks,
/// which halves the LDS reads a tile at H = 128 (docs/performance.md), with
/// at least two waves a row group (`forcedSplit`: the forced
/// waves_per_row_group, 0 if none); not for pages smaller than a tile, whose
/// per-lane page lookups push the wave's registers (Q and the output of 32
/// rows: 272 of 512) into scratch. mxfp4 only with two waves a group (H >=
/// 64): its V decode's registers on top spill with four (H = 32: 12 to 20
/// VGPRs). (`tile`: the forced or default tile; a halved one, bf16's at H =
/// 128, is chosen later.)
int64_t defaultRowsPerWave(CacheFormat format, int64_t headsPerWg,
                           int64_t forcedSplit, int64_t pageSize,
                           int64_t tile) {
  bool pagesHoldTiles = pageSize == 0 || pageSize >= tile;
  bool fitsFormat =
      format != CacheFormat::MXFP4 ||
      (headsPerWg >= 64 && (forcedSplit == 0 || forcedSplit == 2));
  return headsPerWg % 32 == 0 && forcedSplit != 1 && pagesHoldTiles &&
                 fitsFormat
             ? 32
             : 16;
}

TargetAttr serializeTarget(MLIRContext *ctx, const TargetInfo &info) {
  Builder b(ctx);
  SmallVector<Attribute> instructions;
  for (const MatrixInstruction &mi : info.arch->matrixInstructions)
    instructions.push_back(b.getStringAttr(mi.name));
  return TargetAttr::get(ctx, info.name, info.arch->arch, info.computeUnits,
                         info.xcds, info.arch->waveSize,
                         info.arch->ldsBytesPerWorkgroup,
                         info.arch->vectorRegistersPerLane,
                         static_cast<int64_t>(info.hbmBytesPerSecond / 1e9),
                         b.getArrayAttr(instructions));
}

struct MLASelectConfigPass
    : public mla::impl::MLASelectConfigPassBase<MLASelectConfigPass> {
  using Base::Base;

  void runOnOperation() override {
    const TargetInfo *info = lookupTarget(targetName);
    if (!info) {
      std::string known;
      for (const TargetInfo &t : knownTargets())
        known += (known.empty() ? "" : ", ") + t.name.str();
      getOperation()->emitError()
          << "unknown target '" << targetName << "' (known: " << known << ")";
      return signalPassFailure();
    }
    MLIRContext *ctx = &getContext();
    TargetAttr target = serializeTarget(ctx, *info);
    bool isGpu = info->arch->waveSize > 1;

    if (queryTokens < 1 || queryTokens > kMaxQueryTokens) {
      getOperation()->emitError() << "query-tokens = " << int64_t(queryTokens)
                                  << " is not in 1.." << kMaxQueryTokens;
      return signalPassFailure();
    }
    bool nvidia = isNVIDIAArch(info->arch->arch);
    WalkResult result = getOperation()->walk([&](DecodeOp op) {
      int64_t heads = op.getNumHeads();
      auto pick = [](int64_t forced, int64_t chosen) {
        return forced != 0 ? forced : chosen;
      };
      // One block of all H heads: a workgroup's rows pack the (token, head)
      // rows of a sequence densely, so the fewest workgroups share a tile.
      int64_t headsPerWg = pick(headsPerWorkgroup, heads);
      int64_t stages = pick(pipelineStages,
                            nvidia  ? SM90KernelPlan::kDefaultStages
                            : isGpu ? 2
                                    : 1);
      int64_t vDim = static_cast<int64_t>(op.getVHeadDim());
      CacheFormat format = cacheFormat(op.getKvFormat());
      int64_t waveRows =
          pick(rowsPerWave,
               nvidia  ? defaultSM90Rows(format, headsPerWg * queryTokens,
                                         kvTile, wavesPerWorkgroup)
               : isGpu ? defaultRowsPerWave(format, headsPerWg,
                                            wavesPerRowGroup, op.getPageSize(),
                                            kvTile != 0 ? kvTile : kDefaultTile)
                       : 16);
      int64_t waves =
          pick(wavesPerWorkgroup, nvidia  ? SM90KernelPlan::warpsFor(waveRows)
                                  : isGpu ? 4
                                          : 1);
      auto rowGroupWavesFor = [&](int64_t tile) {
        return pick(
            wavesPerRowGroup,
            isGpu && !nvidia
                ? defaultRowGroupWaves(waves, headsPerWg, waveRows, tile, vDim)
                : 1);
      };
      // 64-row tiles, unless the kernel's stages of them do not fit a
      // workgroup's LDS (gfx950: bf16 rows are twice as wide; they fit when
      // the waves share row groups, whose score and P buffers are per
      // group; sm_90a: the stages and tiles of two blocks fit an SM).
      int64_t tile = kvTile;
      if (nvidia) {
        // sm_90a: the largest tile whose stages fit the blocks the plan
        // puts on an SM (two 16-row blocks or one 32-row block): a
        // step's barriers cost more than tiles in flight gain
        // (docs/performance.md: bf16 32-row tiles in 2 stages beat 16-row
        // tiles in 4 by 12%).
        auto fits = [&](int64_t t, int64_t st) {
          return !SM90KernelPlan({cacheFormat(op.getKvFormat()), heads,
                                  op.getQKHeadDim(), vDim, t, headsPerWg, waves,
                                  st, rowGroupWavesFor(t), waveRows})
                      .unsupported(info->arch->ldsBytesPerWorkgroup);
        };
        int64_t chosenTile = kvTile != 0 ? kvTile : 16;
        for (int64_t t = kvTile != 0 ? kvTile : 64; t >= 16;
             t = kvTile != 0 ? 0 : t / 2)
          if (fits(t, stages)) {
            chosenTile = t;
            break;
          }
        // Nothing fits: the forced or smallest tile, for the verifier's
        // diagnostic.
        tile = chosenTile;
      } else if (tile == 0 && isGpu) {
        // gfx950: the largest tile whose stages fit the LDS (128 rows where
        // a tile's fixed costs bound the loop).
        auto planFor = [&](int64_t candidate) {
          return PartialKernelPlan(PartialKernelShape{
              format, heads, op.getQKHeadDim(), vDim, candidate, stages,
              headsPerWg, waves, rowGroupWavesFor(candidate), waveRows});
        };
        auto fits = [&](int64_t candidate) {
          return planFor(candidate).ldsBytes() <=
                 info->arch->ldsBytesPerWorkgroup;
        };
        auto largestFitting = [&] {
          int64_t t = kDefaultTile;
          if (prefersLongTiles(planFor(kLongTile)) && fits(kLongTile))
            t = kLongTile;
          while (t > 16 && !fits(t))
            t /= 2;
          return t;
        };
        tile = largestFitting();
        // A forced split of the row group needs 16 tile rows a wave: where
        // 32-row groups leave too short a tile for it (their score and P
        // buffers are twice as large), 16-row groups keep the longer tile.
        if (rowsPerWave == 0 && waveRows == 32 &&
            wavesPerRowGroup * 16 > tile) {
          waveRows = 16;
          tile = largestFitting();
        }
      } else if (tile == 0) {
        tile = kDefaultTile;
      }
      int64_t rowGroupWaves = rowGroupWavesFor(tile);
      SplitPolicy policy =
          splits == -1 ? SplitPolicy::balanced : SplitPolicy::uniform;
      int64_t splitCount = splits == -1 ? 0 : int64_t(splits);
      auto emitError = [&] { return op.emitOpError(); };
      ConfigAttr config = ConfigAttr::getChecked(
          emitError, ctx, tile, headsPerWg, waves, stages, policy, splitCount,
          rowGroupWaves, waveRows);
      if (!config ||
          failed(verifyConfigForDecode(emitError, target, config,
                                       op.getKvFormat(), heads,
                                       op.getQKHeadDim(),
                                       static_cast<int64_t>(op.getVHeadDim()))))
        return WalkResult::interrupt();
      op->setAttr(MLADialect::kTargetAttrName, target);
      op->setAttr(MLADialect::kConfigAttrName, config);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
