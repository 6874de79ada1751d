//===- MLADialect.h - mla dialect -------------------------------*- C++ -*-===//
//
// Umbrella header for the mla dialect: the dialect class, its enum and
// attribute definitions, and its operations.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_DIALECT_MLA_IR_MLADIALECT_H
#define MLA_DIALECT_MLA_IR_MLADIALECT_H

#include "mla/ABI.h"

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

/// LDS bytes one workgroup needs under `config`: `pipeline_stages` KV tiles
/// of the cache's row size. Q and the accumulators live in registers.
int64_t estimateLdsBytes(ConfigAttr config, KVFormat format, int64_t qkDim);

/// Checks `config` against the target and the op it configures: head
/// grouping divides H, the workgroup fits, the LDS fits.
mlir::LogicalResult
verifyConfigForDecode(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                      TargetAttr target, ConfigAttr config, KVFormat format,
                      int64_t numHeads, int64_t qkDim);
} // namespace mla

#endif // MLA_DIALECT_MLA_IR_MLADIALECT_H
