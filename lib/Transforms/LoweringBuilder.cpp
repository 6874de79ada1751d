//===- LoweringBuilder.cpp - helpers for the linalg lowerings -------------===//

#include "LoweringBuilder.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mla;

namespace {
/// Converts `v` to `type` (f32 <-> f64) inside a linalg body.
Value castFloat(OpBuilder &b, Location loc, Value v, Type type) {
  if (v.getType() == type)
    return v;
  if (type.getIntOrFloatBitWidth() > v.getType().getIntOrFloatBitWidth())
    return arith::ExtFOp::create(b, loc, type, v);
  return arith::TruncFOp::create(b, loc, type, v);
}

Type elementType(Value tensor) {
  return cast<ShapedType>(tensor.getType()).getElementType();
}
} // namespace

Value LoweringBuilder::qkScores(Value qRows, Value keys,
                                ArrayRef<OpFoldResult> shape) {
  Type f64 = b.getF64Type();
  Value zero = arith::ConstantOp::create(b, loc, b.getF64FloatAttr(0.0));
  Value sums = generic(
      filled(shape, f64, zero), {qRows, keys},
      {map(4, {0, 1, 3}), map(4, {2, 3}), map(4, {0, 1, 2})},
      {kPar, kPar, kPar, kRed}, [&](OpBuilder &nb, Location nl, ValueRange a) {
        // Both factors are exact in f32, their product in f64.
        Value qv = arith::ExtFOp::create(nb, nl, f64, a[0]);
        Value kv = arith::ExtFOp::create(nb, nl, f64, a[1]);
        Value prod = arith::MulFOp::create(nb, nl, qv, kv);
        linalg::YieldOp::create(
            nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[2], prod)});
      });
  return generic(empty(shape, f32), sums, {identity(3), identity(3)},
                 {kPar, kPar, kPar},
                 [&](OpBuilder &nb, Location nl, ValueRange a) {
                   linalg::YieldOp::create(nb, nl,
                                           castFloat(nb, nl, a[0], f32));
                 });
}

Value LoweringBuilder::rowMax(Value x, Value init, AffineMap inputMap) {
  return generic(init, x, {inputMap ? inputMap : identity(3), map(3, {0, 1})},
                 {kPar, kPar, kRed},
                 [&](OpBuilder &nb, Location nl, ValueRange a) {
                   linalg::YieldOp::create(
                       nb, nl,
                       ValueRange{arith::MaximumFOp::create(nb, nl, a[0], a[1])});
                 });
}

Value LoweringBuilder::rowSum(Value x, Value init, AffineMap inputMap) {
  Type accType = elementType(init);
  return generic(init, x, {inputMap ? inputMap : identity(3), map(3, {0, 1})},
                 {kPar, kPar, kRed},
                 [&](OpBuilder &nb, Location nl, ValueRange a) {
                   Value v = castFloat(nb, nl, a[0], accType);
                   linalg::YieldOp::create(
                       nb, nl, ValueRange{arith::AddFOp::create(nb, nl, v, a[1])});
                 });
}

Value LoweringBuilder::expShifted(Value x, Value max) {
  return generic(x, max, {map(3, {0, 1}), identity(3)}, {kPar, kPar, kPar},
                 [&](OpBuilder &nb, Location nl, ValueRange a) {
                   Value shift = guardedShift(nb, nl, a[0]);
                   linalg::YieldOp::create(
                       nb, nl,
                       ValueRange{math::ExpOp::create(
                           nb, nl, arith::SubFOp::create(nb, nl, a[1], shift))});
                 });
}

Value LoweringBuilder::pvAccumulate(Value probs, Value values, Value init) {
  return generic(init, {probs, values},
                 {map(4, {0, 1, 2}), map(4, {2, 3}), map(4, {0, 1, 3})},
                 {kPar, kPar, kRed, kPar},
                 [&](OpBuilder &nb, Location nl, ValueRange a) {
                   Value prod = arith::MulFOp::create(nb, nl, a[0], a[1]);
                   linalg::YieldOp::create(
                       nb, nl,
                       ValueRange{arith::AddFOp::create(nb, nl, a[2], prod)});
                 });
}

Value LoweringBuilder::normalize(Value acc, Value sum,
                                 ArrayRef<OpFoldResult> shape, Type elem) {
  return generic(
      empty(shape, elem), {acc, sum},
      {identity(3), map(3, {0, 1}), identity(3)}, {kPar, kPar, kPar},
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        Value zero = arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0.0));
        Value s = castFloat(nb, nl, a[1], f32);
        Value isEmpty =
            arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ, s, zero);
        Value o = arith::SelectOp::create(
            nb, nl, isEmpty, zero, arith::DivFOp::create(nb, nl, a[0], s));
        linalg::YieldOp::create(nb, nl, castFloat(nb, nl, o, elem));
      });
}

Value LoweringBuilder::logSumExp(Value max, Value sum,
                                 ArrayRef<OpFoldResult> shape) {
  Type sumType = elementType(sum);
  return generic(
      empty(shape, f32), {max, sum}, {identity(2), identity(2), identity(2)},
      {kPar, kPar}, [&](OpBuilder &nb, Location nl, ValueRange a) {
        Value zero =
            arith::ConstantOp::create(nb, nl, nb.getFloatAttr(sumType, 0.0));
        Value minusInf =
            arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(kNegInf));
        Value isEmpty =
            arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ, a[1], zero);
        Value lse = arith::AddFOp::create(nb, nl,
                                          castFloat(nb, nl, a[0], sumType),
                                          math::LogOp::create(nb, nl, a[1]));
        linalg::YieldOp::create(
            nb, nl,
            ValueRange{arith::SelectOp::create(
                nb, nl, isEmpty, minusInf, castFloat(nb, nl, lse, f32))});
      });
}
