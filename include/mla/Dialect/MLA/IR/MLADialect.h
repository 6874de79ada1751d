//===- MLADialect.h - mla dialect -------------------------------*- C++ -*-===//
//
// Umbrella header for the mla dialect: the dialect class, its enum and
// attribute definitions, and its operations.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_DIALECT_MLA_IR_MLADIALECT_H
#define MLA_DIALECT_MLA_IR_MLADIALECT_H

#include "mla/ABI.h"
#include "mla/Target/PartialKernelPlan.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "mla/Dialect/MLA/IR/MLAOpsDialect.h.inc"
#include "mla/Dialect/MLA/IR/MLAEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "mla/Dialect/MLA/IR/MLAAttrs.h.inc"

#define GET_OP_CLASSES
#include "mla/Dialect/MLA/IR/MLAOps.h.inc"

namespace mla {

/// The op's cache format as the ABI names it, and back.
CacheFormat cacheFormat(KVFormat format);
KVFormat kvFormat(CacheFormat format);

/// The gfx950 partial kernel's plan for a decode under `config`.
PartialKernelPlan partialKernelPlan(ConfigAttr config, KVFormat format,
                                    int64_t numHeads, int64_t qkDim,
                                    int64_t vDim);

/// Checks `config` against the target and the op it configures: head
/// grouping divides H, the workgroup fits, the partial kernel's LDS fits.
mlir::LogicalResult
verifyConfigForDecode(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                      TargetAttr target, ConfigAttr config, KVFormat format,
                      int64_t numHeads, int64_t qkDim, int64_t vDim);
} // namespace mla

#endif // MLA_DIALECT_MLA_IR_MLADIALECT_H
