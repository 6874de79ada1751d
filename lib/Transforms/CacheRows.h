//===- CacheRows.h - where a sequence's cache rows are ----------*- C++ -*-===//
//
// The one place the linalg lowerings (mla-decompose, mla-split-kv, mla-tile)
// find a sequence's cache positions: contiguous rows from its kv_indptr
// entry, or, for a paged cache, rows of the pages its kv_indices entries
// name. A paged cache is flattened to [num_pages * P, width] so that both
// forms read rows of one 2-D tensor. Page ids are clamped into the pool and
// kv_last_page_len into 1..P: a bad table reads wrong rows, never outside
// the cache.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_TRANSFORMS_CACHEROWS_H
#define MLA_LIB_TRANSFORMS_CACHEROWS_H

#include "KVDecoding.h"

#include "mlir/IR/Builders.h"

namespace mla {

class CacheRows {
public:
  /// Emits the flattening (paged caches) at `b`'s insertion point.
  template <typename AttentionOp>
  CacheRows(mlir::OpBuilder &b, mlir::Location loc, AttentionOp op)
      : CacheRows(b, loc, op, /*flatten=*/true) {}

  /// Only the sequences' lengths (sequence(), positionIndptr()): nothing
  /// is emitted for reading rows.
  template <typename AttentionOp>
  static CacheRows lengthsOnly(mlir::OpBuilder &b, mlir::Location loc,
                               AttentionOp op) {
    return CacheRows(b, loc, op, /*flatten=*/false);
  }

  /// A sequence: `first` is its kv_indptr entry (its first row, or its
  /// first entry of kv_indices), `length` its number of positions.
  struct Sequence {
    mlir::Value first, length;
  };
  Sequence sequence(mlir::OpBuilder &b, mlir::Location loc,
                    mlir::Value seq) const;

  /// The cache row (index) of position `pos` of the sequence at `first`.
  /// Emitted anywhere, linalg bodies included.
  mlir::Value row(mlir::OpBuilder &b, mlir::Location loc, mlir::Value first,
                  mlir::Value pos) const;

  /// The f32 value of element `col` of cache row `row`.
  mlir::Value element(mlir::OpBuilder &b, mlir::Location loc,
                      const KVDecoder &decoder, mlir::Value row,
                      mlir::Value col) const;

  /// [B+1] i32 prefix sums of the sequences' lengths: kv_indptr itself when
  /// contiguous (what the split planner reads).
  mlir::Value positionIndptr(mlir::OpBuilder &b, mlir::Location loc) const;

  bool paged() const { return pageSize > 0; }

private:
  template <typename AttentionOp>
  CacheRows(mlir::OpBuilder &b, mlir::Location loc, AttentionOp op,
            bool flatten)
      : CacheRows(b, loc, op.getKv(), op.getKvScale(), op.getKvIndptr(),
                  op.getKvIndices(), op.getKvLastPageLen(), op.getKvFormat(),
                  flatten) {}
  CacheRows(mlir::OpBuilder &b, mlir::Location loc, mlir::Value kv,
            mlir::Value kvScale, mlir::Value kvIndptr, mlir::Value indices,
            mlir::Value lastPageLen, KVFormat format, bool flatten);

  mlir::Value kv;              // as the op has it
  mlir::Value rows, scaleRows; // [N, width], mxfp4's [N, Dqk/32]
  mlir::Value kvIndptr, indices, lastPageLen;
  KVFormat format;
  int64_t pageSize = 0; // 0: contiguous
};

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_CACHEROWS_H
