//===- MLADialect.cpp - mla dialect registration --------------------------===//
//
// Registers the mla operations and attributes with the MLIR context.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Target/KnownTargets.h"
#include "mla/Target/SM90KernelPlan.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mla;

#include "mla/Dialect/MLA/IR/MLAOpsDialect.cpp.inc"
#include "mla/Dialect/MLA/IR/MLAEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "mla/Dialect/MLA/IR/MLAAttrs.cpp.inc"

void MLADialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "mla/Dialect/MLA/IR/MLAOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "mla/Dialect/MLA/IR/MLAAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

LogicalResult
TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                   StringRef arch, int64_t computeUnits, int64_t xcds,
                   int64_t waveSize, int64_t ldsBytes, int64_t vectorRegisters,
                   int64_t hbmGbps, ArrayAttr matrixInstructions) {
  if (name.empty() || arch.empty())
    return emitError() << "target name and arch must not be empty";
  if (computeUnits <= 0 || xcds <= 0 || waveSize <= 0)
    return emitError() << "compute_units, xcds and wave_size must be positive";
  if (ldsBytes < 0 || vectorRegisters < 0 || hbmGbps < 0)
    return emitError() << "lds_bytes, vector_registers and hbm_gbps must not "
                          "be negative";
  if (!llvm::all_of(matrixInstructions,
                    [](Attribute a) { return isa<StringAttr>(a); }))
    return emitError() << "matrix_instructions must be a list of strings";
  return success();
}

LogicalResult ConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 int64_t kvTile, int64_t headsPerWorkgroup,
                                 int64_t wavesPerWorkgroup,
                                 int64_t pipelineStages, SplitPolicy policy,
                                 int64_t splits, int64_t wavesPerRowGroup,
                                 int64_t rowsPerWave) {
  if (kvTile <= 0 || !llvm::isPowerOf2_64(kvTile))
    return emitError() << "kv_tile = " << kvTile
                       << " must be a positive power of two";
  if (headsPerWorkgroup <= 0 || headsPerWorkgroup % 16 != 0)
    return emitError() << "heads_per_workgroup = " << headsPerWorkgroup
                       << " must be a positive multiple of 16";
  if (wavesPerWorkgroup <= 0)
    return emitError() << "waves_per_workgroup = " << wavesPerWorkgroup
                       << " must be positive";
  if (wavesPerRowGroup <= 0 || wavesPerWorkgroup % wavesPerRowGroup != 0)
    return emitError() << "waves_per_row_group = " << wavesPerRowGroup
                       << " must be positive and divide waves_per_workgroup = "
                       << wavesPerWorkgroup;
  if (rowsPerWave != 16 && rowsPerWave != 32)
    return emitError() << "rows_per_wave = " << rowsPerWave
                       << " must be 16 or 32";
  if (pipelineStages < 1)
    return emitError() << "pipeline_stages = " << pipelineStages
                       << " must be at least 1";
  if (policy == SplitPolicy::uniform && splits < 1)
    return emitError() << "uniform split_policy needs splits >= 1, got splits = "
                       << splits;
  if (policy == SplitPolicy::uniform && splits > kMaxSplitsPerSeq)
    return emitError() << "splits = " << splits
                       << " exceeds the combine's fan-in of "
                       << kMaxSplitsPerSeq << " work items per sequence";
  if (policy == SplitPolicy::balanced && splits != 0)
    return emitError() << "balanced split_policy chooses the splits itself; "
                          "got splits = "
                       << splits;
  return success();
}

CacheFormat mla::cacheFormat(KVFormat format) {
  switch (format) {
  case KVFormat::bf16:
    return CacheFormat::BF16;
  case KVFormat::fp8:
    return CacheFormat::FP8;
  case KVFormat::mxfp4:
    return CacheFormat::MXFP4;
  }
  llvm_unreachable("unknown KVFormat");
}

KVFormat mla::kvFormat(CacheFormat format) {
  switch (format) {
  case CacheFormat::BF16:
    return KVFormat::bf16;
  case CacheFormat::FP8:
    return KVFormat::fp8;
  case CacheFormat::MXFP4:
    return KVFormat::mxfp4;
  }
  llvm_unreachable("unknown CacheFormat");
}

PartialKernelPlan mla::partialKernelPlan(ConfigAttr config, KVFormat format,
                                         int64_t numHeads, int64_t qkDim,
                                         int64_t vDim) {
  return PartialKernelPlan(PartialKernelShape{
      cacheFormat(format), numHeads, qkDim, vDim, config.getKvTile(),
      config.getPipelineStages(), config.getHeadsPerWorkgroup(),
      config.getWavesPerWorkgroup(), config.getWavesPerRowGroup(),
      config.getRowsPerWave()});
}

LogicalResult
mla::verifyConfigForDecode(function_ref<InFlightDiagnostic()> emitError,
                           TargetAttr target, ConfigAttr config,
                           KVFormat format, int64_t numHeads, int64_t qkDim,
                           int64_t vDim) {
  if (numHeads % config.getHeadsPerWorkgroup() != 0)
    return emitError() << "heads_per_workgroup = "
                       << config.getHeadsPerWorkgroup()
                       << " does not divide H = " << numHeads;
  int64_t threads = config.getWavesPerWorkgroup() * target.getWaveSize();
  if (threads > 1024)
    return emitError() << "waves_per_workgroup = "
                       << config.getWavesPerWorkgroup() << " gives " << threads
                       << " threads, more than 1024";
  // NVIDIA chips run the sm_90a kernel, whose plan says what it supports.
  if (isNVIDIAArch(target.getArch())) {
    SM90KernelPlan plan(
        {cacheFormat(format), numHeads, qkDim, vDim, config.getKvTile(),
         config.getHeadsPerWorkgroup(), config.getWavesPerWorkgroup(),
         config.getPipelineStages(), config.getWavesPerRowGroup(),
         config.getRowsPerWave()});
    if (std::optional<std::string> why = plan.unsupported(target.getLdsBytes()))
      return emitError() << *why << " (target " << target.getName() << ")";
    return success();
  }
  // A target without workgroup memory (the host) has no LDS budget; on a
  // GPU the partial kernel's plan says what it needs.
  if (target.getLdsBytes() > 0) {
    PartialKernelPlan plan =
        partialKernelPlan(config, format, numHeads, qkDim, vDim);
    if (plan.ldsBytes() > target.getLdsBytes()) {
      InFlightDiagnostic diag = emitError();
      diag << "config needs " << plan.ldsBytes() << " bytes of LDS ("
           << config.getPipelineStages() << " stages x " << config.getKvTile()
           << " kv rows:";
      for (const LdsBuffer &buffer : plan.ldsBuffers())
        diag << " " << buffer.role << " " << buffer.bytes();
      return diag << "), target " << target.getName() << " has "
                  << target.getLdsBytes();
    }
  }
  return success();
}

LogicalResult MLADialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  if (attr.getName() == kTargetAttrName) {
    if (!isa<TargetAttr>(attr.getValue()))
      return op->emitError() << "'" << kTargetAttrName
                             << "' must be a #mla.target";
    return success();
  }
  if (attr.getName() == kKernelAttrName) {
    if (!isa<SymbolRefAttr>(attr.getValue()))
      return op->emitError() << "'" << kKernelAttrName
                             << "' must be a symbol reference to a kernel";
    return success();
  }
  if (attr.getName() == kLaunchAttrName) {
    auto launch = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!launch || !launch.get("grid") || !launch.get("block") ||
        !launch.get("lds_bytes") || !launch.get("args") ||
        !launch.get("arg_dims"))
      return op->emitError() << "'" << kLaunchAttrName
                             << "' must be a dictionary with grid, block, "
                                "lds_bytes, args and arg_dims";
    return success();
  }
  if (attr.getName() == kLhsExp2AttrName) {
    auto exp2 = dyn_cast<IntegerAttr>(attr.getValue());
    if (op->getName().getStringRef() != "vector.contract" || !exp2 ||
        std::abs(exp2.getInt()) > 127)
      return op->emitError() << "'" << kLhsExp2AttrName
                             << "' must be an integer in -127..127 on a "
                                "vector.contract";
    return success();
  }
  if (attr.getName() != kConfigAttrName)
    return op->emitError() << "unknown mla attribute '" << attr.getName().getValue()
                           << "'";
  auto config = dyn_cast<ConfigAttr>(attr.getValue());
  if (!config)
    return op->emitError() << "'" << kConfigAttrName
                           << "' must be a #mla.config";
  auto decode = dyn_cast<DecodeOp>(op);
  if (!decode)
    return op->emitError() << "'" << kConfigAttrName
                           << "' configures mla.decode ops only";
  // Attributes are verified before the op's own invariants, so the op may
  // lack its kv_format or have a q of any type here (the generic form can
  // say anything): its verifier reports those; read nothing it has not
  // checked yet.
  auto qType = op->getNumOperands() > 0
                   ? dyn_cast<RankedTensorType>(op->getOperand(0).getType())
                   : RankedTensorType();
  KVFormatAttr format = decode.getProperties().kv_format;
  if (!qType || !format || qType.getRank() != 3 ||
      ShapedType::isDynamic(qType.getDimSize(1)) ||
      ShapedType::isDynamic(qType.getDimSize(2)))
    return success();
  auto target = op->getAttrOfType<TargetAttr>(kTargetAttrName);
  if (!target)
    return op->emitError() << "'" << kConfigAttrName << "' needs an '"
                           << kTargetAttrName << "' beside it";
  return verifyConfigForDecode([&] { return op->emitOpError(); }, target,
                               config, format.getValue(), qType.getDimSize(1),
                               qType.getDimSize(2),
                               decode.getProperties().v_head_dim
                                   ? decode.getProperties().v_head_dim.getInt()
                                   : 512);
}
