//===- LoweringBuilder.h - helpers for the linalg lowerings -----*- C++ -*-===//
//
// The small vocabulary mla-decompose, mla-tile and mla-lower-combine are
// written in: constants, filled tensors, projection maps, linalg.generic with
// a body callback, indptr loads, and the softmax's guarded shift.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_TRANSFORMS_LOWERINGBUILDER_H
#define MLA_LIB_TRANSFORMS_LOWERINGBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

#include <limits>

namespace mla {

constexpr mlir::utils::IteratorType kPar = mlir::utils::IteratorType::parallel;
constexpr mlir::utils::IteratorType kRed = mlir::utils::IteratorType::reduction;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

class LoweringBuilder {
public:
  LoweringBuilder(mlir::OpBuilder &b, mlir::Location loc)
      : b(b), loc(loc), f32(b.getF32Type()) {}

  mlir::Value cIndex(int64_t v) {
    return mlir::arith::ConstantIndexOp::create(b, loc, v);
  }
  mlir::Value cF32(double v) {
    return mlir::arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  mlir::OpFoldResult attr(int64_t v) { return b.getIndexAttr(v); }
  /// Dimension `dim` of a result of type `type`: its static size, or
  /// `dynamicSize` when the type leaves it open. Results built this way keep
  /// the op's (possibly static) result types.
  mlir::OpFoldResult dimOf(mlir::Type type, unsigned dim,
                           mlir::Value dynamicSize) {
    auto shaped = mlir::cast<mlir::ShapedType>(type);
    if (shaped.isDynamicDim(dim))
      return dynamicSize;
    return attr(shaped.getDimSize(dim));
  }

  /// A tensor of `shape` filled with `value`.
  mlir::Value filled(llvm::ArrayRef<mlir::OpFoldResult> shape, mlir::Type elem,
                     mlir::Value value) {
    mlir::Value empty = mlir::tensor::EmptyOp::create(b, loc, shape, elem);
    return mlir::linalg::FillOp::create(b, loc, value, empty).getResult(0);
  }
  mlir::Value empty(llvm::ArrayRef<mlir::OpFoldResult> shape, mlir::Type elem) {
    return mlir::tensor::EmptyOp::create(b, loc, shape, elem);
  }

  /// (d0, ..., d{numDims-1}) -> (d{dims[0]}, d{dims[1]}, ...).
  mlir::AffineMap map(unsigned numDims, llvm::ArrayRef<unsigned> dims) {
    return mlir::AffineMap::getMultiDimMapWithTargets(numDims, dims,
                                                      b.getContext());
  }
  mlir::AffineMap identity(unsigned numDims) {
    return b.getMultiDimIdentityMap(numDims);
  }

  mlir::Value generic(
      mlir::Value init, mlir::ValueRange inputs,
      llvm::ArrayRef<mlir::AffineMap> maps,
      llvm::ArrayRef<mlir::utils::IteratorType> iters,
      llvm::function_ref<void(mlir::OpBuilder &, mlir::Location,
                              mlir::ValueRange)>
          body) {
    return mlir::linalg::GenericOp::create(b, loc, init.getType(), inputs,
                                           init, maps, iters, body)
        .getResult(0);
  }

  /// indptr[i] as an index.
  mlir::Value loadIndex(mlir::Value tensor, mlir::ValueRange indices) {
    mlir::Value v = mlir::tensor::ExtractOp::create(b, loc, tensor, indices);
    return mlir::arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
  }

  /// Slice with unit strides.
  mlir::Value slice(mlir::Value source,
                    llvm::ArrayRef<mlir::OpFoldResult> offsets,
                    llvm::ArrayRef<mlir::OpFoldResult> sizes) {
    return mlir::tensor::ExtractSliceOp::create(
        b, loc, source, offsets, sizes,
        llvm::SmallVector<mlir::OpFoldResult>(offsets.size(), attr(1)));
  }
  /// Insert with unit strides (rank-reducing when `source` has fewer dims).
  mlir::Value insert(mlir::Value source, mlir::Value dest,
                     llvm::ArrayRef<mlir::OpFoldResult> offsets,
                     llvm::ArrayRef<mlir::OpFoldResult> sizes) {
    return mlir::tensor::InsertSliceOp::create(
        b, loc, source, dest, offsets, sizes,
        llvm::SmallVector<mlir::OpFoldResult>(offsets.size(), attr(1)));
  }

  /// The amount a softmax row is shifted by: its max, or 0 when the max is
  /// -inf (a row that sees nothing), so that exp gives 0 instead of
  /// exp(-inf - -inf) = NaN. Emitted in a linalg body.
  static mlir::Value guardedShift(mlir::OpBuilder &nb, mlir::Location nl,
                                  mlir::Value rowMax) {
    mlir::Value ninf = mlir::arith::ConstantOp::create(
        nb, nl, nb.getFloatAttr(rowMax.getType(), kNegInf));
    mlir::Value zero = mlir::arith::ConstantOp::create(
        nb, nl, nb.getFloatAttr(rowMax.getType(), 0.0));
    mlir::Value isEmpty = mlir::arith::CmpFOp::create(
        nb, nl, mlir::arith::CmpFPredicate::OEQ, rowMax, ninf);
    return mlir::arith::SelectOp::create(nb, nl, isEmpty, zero, rowMax);
  }

  //===--------------------------------------------------------------------===//
  // Attention building blocks on [t, h, p] scores (token, head, position).
  //===--------------------------------------------------------------------===//

  /// s[t, h, p] = sum_d q[t, h, d] * k[p, d] for bf16 `qRows` [T, H, D] and
  /// f32 `keys` [P, D]; loops (t, h, p, d). The sum runs in f64 (rounded
  /// once to f32): an f32 running sum over Dqk products drifts past the lse
  /// bar (1e-6 |lse|) at sharp scores, where the kernels' blocked sums do
  /// not.
  mlir::Value qkScores(mlir::Value qRows, mlir::Value keys,
                       llvm::ArrayRef<mlir::OpFoldResult> shape);
  /// max_p x[t, h, p] folded into `init` [t, h]. `inputMap` reads x with
  /// loops (t, h, p) when x is laid out otherwise (default: identity).
  mlir::Value rowMax(mlir::Value x, mlir::Value init,
                     mlir::AffineMap inputMap = {});
  /// sum_p x[t, h, p] added to `init` [t, h] (f32 or f64; x is extended).
  mlir::Value rowSum(mlir::Value x, mlir::Value init,
                     mlir::AffineMap inputMap = {});
  /// exp(x[t, h, p] - guardedShift(max[t, h])), in place of x.
  mlir::Value expShifted(mlir::Value x, mlir::Value max);
  /// init[t, h, e] + sum_p p[t, h, p] * v[p, e]; loops (t, h, p, e) keep
  /// the innermost access contiguous.
  mlir::Value pvAccumulate(mlir::Value probs, mlir::Value values,
                           mlir::Value init);
  /// acc[t, h, e] / sum[t, h] as `elem`, 0 where sum == 0 (a row that saw
  /// nothing). `sum` may be f32 or f64.
  mlir::Value normalize(mlir::Value acc, mlir::Value sum,
                        llvm::ArrayRef<mlir::OpFoldResult> shape,
                        mlir::Type elem);
  /// max[t, h] + log(sum[t, h]) as f32, -inf where sum == 0. `sum` may be
  /// f32 or f64 (the log is taken in its precision).
  mlir::Value logSumExp(mlir::Value max, mlir::Value sum,
                        llvm::ArrayRef<mlir::OpFoldResult> shape);

protected:
  mlir::OpBuilder &b;
  mlir::Location loc;
  mlir::Type f32;
};

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_LOWERINGBUILDER_H
