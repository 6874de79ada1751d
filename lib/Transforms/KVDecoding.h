//===- KVDecoding.h - cache elements to f32 in lowered code -----*- C++ -*-===//
//
// The one place the lowerings turn a stored cache element into its f32 value:
// bf16 by extension, fp8 e4m3 and E8M0 through exact 256-entry tables, E2M1
// through a 16-entry table (tables built with APFloat). Shared by
// mla-decompose (whole rows) and mla-tile (gathered tiles).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_TRANSFORMS_KVDECODING_H
#define MLA_LIB_TRANSFORMS_KVDECODING_H

#include "mla/Dialect/MLA/IR/MLADialect.h"

#include "mlir/IR/Builders.h"

namespace mla {

class KVDecoder {
public:
  /// Materializes the tables (and the fp8 scale) at `b`'s insertion point.
  KVDecoder(mlir::OpBuilder &b, mlir::Location loc, KVFormat format,
            mlir::Value kvScale);

  /// The f32 value of element `col` of a row, given `raw` — the stored
  /// element (bf16, f8E4M3FN) or, for mxfp4, the byte holding it — and, for
  /// mxfp4, the row's E8M0 scale element of that column's block.
  mlir::Value decode(mlir::OpBuilder &b, mlir::Location loc, mlir::Value raw,
                     mlir::Value blockScale, mlir::Value col) const;

private:
  KVFormat format;
  mlir::Value valueTable; // fp8 or E2M1 codes -> f32
  mlir::Value scaleTable; // E8M0 codes -> f32 (mxfp4)
  mlir::Value tensorScale; // fp8 per-tensor scale
};

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_KVDECODING_H
