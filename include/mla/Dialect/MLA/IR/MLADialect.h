//===- MLADialect.h - mla dialect -------------------------------*- C++ -*-===//
//
// Umbrella header for the mla dialect: the dialect class, its enum and
// attribute definitions, and its operations.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_DIALECT_MLA_IR_MLADIALECT_H
#define MLA_DIALECT_MLA_IR_MLADIALECT_H

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

#endif // MLA_DIALECT_MLA_IR_MLADIALECT_H
