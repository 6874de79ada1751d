//===- KVDecoding.cpp - cache elements to f32 in lowered code -------------===//

#include "KVDecoding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/APFloat.h"

using namespace mlir;
using namespace mla;

namespace {
/// A table of the f32 values of every code of a small float format, built
/// with APFloat so that decoding is exact (NaN codes decode to NaN).
Value buildDecodeTable(OpBuilder &b, Location loc,
                       const llvm::fltSemantics &sem, unsigned bits) {
  SmallVector<float> values;
  for (unsigned code = 0; code < (1u << bits); ++code) {
    APFloat v(sem, APInt(bits, code));
    bool losesInfo = false;
    v.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &losesInfo);
    values.push_back(v.convertToFloat());
  }
  auto type = RankedTensorType::get({(int64_t)values.size()}, b.getF32Type());
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, ArrayRef<float>(values)));
}

Value lookup(OpBuilder &b, Location loc, Value table, Value code) {
  Value idx = arith::IndexCastUIOp::create(b, loc, b.getIndexType(), code);
  return tensor::ExtractOp::create(b, loc, table, ValueRange{idx});
}
} // namespace

KVDecoder::KVDecoder(OpBuilder &b, Location loc, KVFormat format,
                     Value kvScale)
    : format(format) {
  switch (format) {
  case KVFormat::bf16:
    break;
  case KVFormat::fp8: {
    valueTable = buildDecodeTable(b, loc, APFloat::Float8E4M3FN(), 8);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    tensorScale = tensor::ExtractOp::create(b, loc, kvScale, ValueRange{zero});
    break;
  }
  case KVFormat::mxfp4:
    valueTable = buildDecodeTable(b, loc, APFloat::Float4E2M1FN(), 4);
    scaleTable = buildDecodeTable(b, loc, APFloat::Float8E8M0FNU(), 8);
    break;
  }
}

Value KVDecoder::decode(OpBuilder &b, Location loc, Value raw,
                        Value blockScale, Value col) const {
  Type f32 = b.getF32Type(), i8 = b.getI8Type();
  switch (format) {
  case KVFormat::bf16:
    return arith::ExtFOp::create(b, loc, f32, raw);
  case KVFormat::fp8: {
    Value bits = arith::BitcastOp::create(b, loc, i8, raw);
    Value value = lookup(b, loc, valueTable, bits);
    return arith::MulFOp::create(b, loc, value, tensorScale);
  }
  case KVFormat::mxfp4: {
    // Even columns are the low nibble of their byte, odd ones the high one.
    Value two = arith::ConstantIndexOp::create(b, loc, 2);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value isOdd =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                              arith::RemUIOp::create(b, loc, col, two), zero);
    Value mask = arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(15));
    Value four = arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(4));
    Value lo = arith::AndIOp::create(b, loc, raw, mask);
    Value hi = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, raw, four), mask);
    Value nibble = arith::SelectOp::create(b, loc, isOdd, hi, lo);
    Value value = lookup(b, loc, valueTable, nibble);
    Value scaleBits = arith::BitcastOp::create(b, loc, i8, blockScale);
    Value scale = lookup(b, loc, scaleTable, scaleBits);
    return arith::MulFOp::create(b, loc, value, scale);
  }
  }
  llvm_unreachable("verified kv_format");
}
