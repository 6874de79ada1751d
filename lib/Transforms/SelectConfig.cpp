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
#include "mla/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

namespace mla {
#define GEN_PASS_DEF_MLASELECTCONFIGPASS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
TargetAttr serializeTarget(MLIRContext *ctx, const TargetInfo &info) {
  Builder b(ctx);
  SmallVector<Attribute> instructions;
  for (const MatrixInstruction &mi : info.arch->matrixInstructions)
    instructions.push_back(b.getStringAttr(mi.name));
  return TargetAttr::get(ctx, info.name, info.arch->arch, info.computeUnits,
                         info.xcds, info.arch->waveSize,
                         info.arch->ldsBytesPerCU,
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

    WalkResult result = getOperation()->walk([&](DecodeOp op) {
      int64_t heads = op.getNumHeads();
      auto pick = [](int64_t forced, int64_t chosen) {
        return forced != 0 ? forced : chosen;
      };
      // 64 rows of fp8 or mxfp4 and 32 of bf16 are the same bytes: the
      // gfx950 kernel's two stages fit its LDS.
      int64_t tile = pick(kvTile, isGpu && op.getKvFormat() == KVFormat::bf16
                                      ? 32
                                      : 64);
      // One block of all H heads: a workgroup's rows pack the (token, head)
      // rows of a sequence densely, so the fewest workgroups share a tile.
      int64_t headsPerWg = pick(headsPerWorkgroup, heads);
      int64_t waves = pick(wavesPerWorkgroup, isGpu ? 4 : 1);
      int64_t stages = pick(pipelineStages, isGpu ? 2 : 1);
      SplitPolicy policy =
          splits == -1 ? SplitPolicy::balanced : SplitPolicy::uniform;
      int64_t splitCount = splits == -1 ? 0 : int64_t(splits);
      auto emitError = [&] { return op.emitOpError(); };
      ConfigAttr config = ConfigAttr::getChecked(
          emitError, ctx, tile, headsPerWg, waves, stages, policy, splitCount);
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
