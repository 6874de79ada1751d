//===- Passes.h - mla passes and pipelines ----------------------*- C++ -*-===//
//
// Declarations of every mla pass (generated from Passes.td) and of the
// pipeline builders an embedding compiler calls.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TRANSFORMS_PASSES_H
#define MLA_TRANSFORMS_PASSES_H

#include "mla/Target/KnownTargets.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mla {

#define GEN_PASS_DECL
#include "mla/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "mla/Transforms/Passes.h.inc"

/// The decomposition pipeline (mla-decode-to-cpu) has nothing to configure.
struct DecodeToCPUPipelineOptions
    : public mlir::PassPipelineOptions<DecodeToCPUPipelineOptions> {};

/// The IR levels of the gfx950 pipeline (docs/pipelines.md).
enum class GFX950Level { Config, Split, Kernels, MFMA, ROCDL, NVVM };

/// The one configuration of a decode: every pipeline that configures and
/// splits mla.decode (gfx950, emu, the host split pipeline) takes it, and
/// mla-opt, mla-compile, mla-run, artifacts and the embedding API all fill
/// this struct. A value of 0 (-1 for splits) leaves the choice to
/// mla-select-config; whatever is chosen is checked against the target
/// there, with the op's location.
struct DecodePipelineOptions
    : public mlir::PassPipelineOptions<DecodePipelineOptions> {
  DecodePipelineOptions() = default;
  DecodePipelineOptions(const DecodePipelineOptions &other)
      : DecodePipelineOptions() {
    copyOptionValuesFrom(other);
  }
  DecodePipelineOptions &operator=(const DecodePipelineOptions &other) {
    copyOptionValuesFrom(other);
    return *this;
  }

  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("Chip the kernels and work lists are for (see "
                     "mla-select-config)"),
      llvm::cl::init(mla::defaultTargetName().str())};
  Option<int64_t> splits{
      *this, "splits",
      llvm::cl::desc("Work items per sequence, 1..64 (-1 = the balanced "
                     "planner)"),
      llvm::cl::init(-1)};
  Option<int64_t> kvTile{
      *this, "kv-tile",
      llvm::cl::desc("KV rows per tile (0 = the config's choice)"),
      llvm::cl::init(0)};
  Option<int64_t> headsPerWorkgroup{
      *this, "heads-per-workgroup",
      llvm::cl::desc("Heads of the block a workgroup's query rows come from "
                     "(0 = all H)"),
      llvm::cl::init(0)};
  Option<int64_t> wavesPerWorkgroup{
      *this, "waves-per-workgroup",
      llvm::cl::desc("Waves per workgroup (0 = the config's choice)"),
      llvm::cl::init(0)};
  Option<int64_t> wavesPerRowGroup{
      *this, "waves-per-row-group",
      llvm::cl::desc("Waves sharing one group of query rows: 1, 2 or 4 "
                     "(0 = the config's choice)"),
      llvm::cl::init(0)};
  Option<int64_t> rowsPerWave{
      *this, "rows-per-wave",
      llvm::cl::desc("Query rows of a row group: 16 or 32 (0 = the "
                     "config's choice)"),
      llvm::cl::init(0)};
  Option<int64_t> pipelineStages{
      *this, "pipeline-stages",
      llvm::cl::desc("KV tiles in flight (0 = the config's choice)"),
      llvm::cl::init(0)};
  Option<int64_t> queryTokens{
      *this, "query-tokens",
      llvm::cl::desc("Query tokens per sequence the defaults are chosen for, "
                     "1..4 (every launch still takes 1..4)"),
      llvm::cl::init(1)};
  /// gfx950 and sm_90a pipelines only.
  Option<GFX950Level> stopAt{
      *this, "stop-at",
      llvm::cl::desc("Last IR level to produce (gfx950, sm_90a)"),
      llvm::cl::init(GFX950Level::ROCDL),
      llvm::cl::values(
          clEnumValN(GFX950Level::Config, "config",
                     "L1: mla.decode with its target and config"),
          clEnumValN(GFX950Level::Split, "split",
                     "L2: plan_splits, partial_decode, combine"),
          clEnumValN(GFX950Level::Kernels, "kernels",
                     "L3: gpu.module with the vector-level kernels"),
          clEnumValN(GFX950Level::MFMA, "mfma", "L4: MFMA fragments"),
          clEnumValN(GFX950Level::ROCDL, "rocdl",
                     "L5: ROCDL, ready for mla-translate (default)"),
          clEnumValN(GFX950Level::NVVM, "nvvm",
                     "sm_90a, L4: NVVM, ready for mla-translate "
                     "--mla-to-ptx"))};
  Option<bool> testCorruptLayout{
      *this, "test-corrupt-layout",
      llvm::cl::desc("Testing only: see mla-lower-to-mfma"),
      llvm::cl::init(false)};
  Option<std::string> testHazard{
      *this, "test-hazard", llvm::cl::desc("Testing only: see mla-to-gpu"),
      llvm::cl::init("")};
};

/// The mla-select-config options of `options`: one mapping for every
/// pipeline.
MLASelectConfigPassOptions selectConfigOptions(
    const DecodePipelineOptions &options);

/// mla.decode -> config -> split-KV -> gfx950 kernels (mla-to-gpu) -> MFMA
/// (mla-lower-to-mfma) -> ROCDL. The gpu.module is then ready for
/// mla-translate; the host ops keep their `mla.kernel` references.
void buildDecodeToGFX950Pipeline(mlir::OpPassManager &pm,
                                 const DecodePipelineOptions &options);

/// mla.decode -> config -> split-KV -> sm_90a kernels (mla-to-gpu) -> NVVM.
/// The gpu.module is then ready for mla-translate --mla-to-ptx. The target
/// must be an sm_90a chip (sm_90a, h200, h100); left at the default it is
/// sm_90a. stop-at: config, split, kernels, or the NVVM level (nvvm; mfma
/// and rocdl name it too).
void buildDecodeToSM90aPipeline(mlir::OpPassManager &pm,
                                const DecodePipelineOptions &options);

/// The gfx950 kernels for the emu backend: config (gfx950) -> split-KV ->
/// mla-to-gpu -> mla-lower-to-mfma -> mla-gpu-to-emu, i.e. the very
/// MFMA-level kernels of the gfx950 pipeline as host lane functions.
void buildDecodeToEmuKernelsPipeline(mlir::OpPassManager &pm,
                                     const DecodePipelineOptions &options);
/// The same, lowered to the LLVM dialect for the ExecutionEngine.
void buildDecodeToEmuPipeline(mlir::OpPassManager &pm,
                              const DecodePipelineOptions &options);
/// Upstream tensor/vector/memref ops -> LLVM dialect on the host.
void addHostLoweringPasses(mlir::OpPassManager &pm);

/// mla.decode -> decomposed upstream ops -> bufferized loops -> LLVM dialect,
/// ready for MLIR's ExecutionEngine. Functions are expected to carry
/// `llvm.emit_c_interface` if called from C++.
void buildDecodeToCPUPipeline(mlir::OpPassManager &pm,
                              const DecodeToCPUPipelineOptions &options);

/// The split level on the host: config -> split-KV -> KV tiles with online
/// softmax -> combine -> LLVM dialect. The work list comes from the runtime
/// planner through `mla_plan_splits` (see registerBufferizationInterfaces).
void buildDecodeSplitToCPUPipeline(mlir::OpPassManager &pm,
                                   const DecodePipelineOptions &options);

/// The C interface function `mla.plan_splits` bufferizes to a call of:
///   int64_t _mlir_ciface_mla_plan_splits(StridedMemRefType<int32_t, 1> *kvIndptr,
///       StridedMemRefType<int32_t, 2> *workItems,
///       StridedMemRefType<int32_t, 1> *itemIndptr, int64_t computeUnits,
///       int64_t kvTile, int64_t uniformSplits)
/// returning the number of work items written.
constexpr llvm::StringLiteral kPlanSplitsFunctionName = "mla_plan_splits";

/// Attaches the host bufferization of mla.plan_splits.
void registerBufferizationInterfaces(mlir::DialectRegistry &registry);

/// Registers every mla pass and pipeline with the global registry (for
/// textual pipelines such as `--mla-decode-to-gfx950=...`). Idempotent.
void registerMLAPassesAndPipelines();

} // namespace mla

#endif // MLA_TRANSFORMS_PASSES_H
