//===- CacheRows.cpp - where a sequence's cache rows are ------------------===//

#include "CacheRows.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mla;

namespace {
Value cIdx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value loadIdx(OpBuilder &b, Location loc, Value tensor, Value i) {
  Value v = tensor::ExtractOp::create(b, loc, tensor, ValueRange{i});
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}

Value clamp(OpBuilder &b, Location loc, Value v, Value lo, Value hi) {
  return arith::MaxSIOp::create(b, loc,
                                arith::MinSIOp::create(b, loc, v, hi), lo);
}

/// [num_pages, P, w] -> [num_pages * P, w].
Value flattenPages(OpBuilder &b, Location loc, Value pages) {
  return tensor::CollapseShapeOp::create(
      b, loc, pages, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
}
} // namespace

CacheRows::CacheRows(OpBuilder &b, Location loc, Value kv, Value kvScale,
                     Value kvIndptr, Value indices, Value lastPageLen,
                     KVFormat format, bool flatten)
    : kv(kv), rows(kv), scaleRows(kvScale), kvIndptr(kvIndptr),
      indices(indices), lastPageLen(lastPageLen), format(format) {
  if (!indices)
    return;
  pageSize = cast<RankedTensorType>(kv.getType()).getDimSize(1);
  if (!flatten)
    return;
  rows = flattenPages(b, loc, kv);
  if (format == KVFormat::mxfp4)
    scaleRows = flattenPages(b, loc, kvScale);
}

CacheRows::Sequence CacheRows::sequence(OpBuilder &b, Location loc,
                                        Value seq) const {
  Value first = loadIdx(b, loc, kvIndptr, seq);
  Value next = loadIdx(
      b, loc, kvIndptr, arith::AddIOp::create(b, loc, seq, cIdx(b, loc, 1)));
  Value count = arith::SubIOp::create(b, loc, next, first);
  if (!paged())
    return {first, count};
  // (pages - 1) * P + last, 0 without pages.
  Value zero = cIdx(b, loc, 0), one = cIdx(b, loc, 1);
  Value p = cIdx(b, loc, pageSize);
  Value lastEntry = loadIdx(b, loc, lastPageLen, seq);
  Value last = clamp(b, loc, lastEntry, one, p);
  Value fullPages = arith::SubIOp::create(b, loc, count, one);
  Value full = arith::MulIOp::create(b, loc, fullPages, p);
  Value hasPages =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, count, zero);
  Value length = arith::SelectOp::create(
      b, loc, hasPages, arith::AddIOp::create(b, loc, full, last), zero);
  return {first, length};
}

Value CacheRows::row(OpBuilder &b, Location loc, Value first,
                     Value pos) const {
  if (!paged())
    return arith::AddIOp::create(b, loc, first, pos);
  Value p = cIdx(b, loc, pageSize);
  Value pageOfPos = arith::DivUIOp::create(b, loc, pos, p);
  Value entry = arith::AddIOp::create(b, loc, first, pageOfPos);
  // One op per statement: argument evaluation order would make the IR
  // differ between compilers.
  Value numPages = tensor::DimOp::create(b, loc, kv, 0);
  Value one = cIdx(b, loc, 1);
  Value lastPage = arith::SubIOp::create(b, loc, numPages, one);
  Value id = loadIdx(b, loc, indices, entry);
  Value zero = cIdx(b, loc, 0);
  Value page = clamp(b, loc, id, zero, lastPage);
  Value pageStart = arith::MulIOp::create(b, loc, page, p);
  Value offset = arith::RemUIOp::create(b, loc, pos, p);
  return arith::AddIOp::create(b, loc, pageStart, offset);
}

Value CacheRows::element(OpBuilder &b, Location loc, const KVDecoder &decoder,
                         Value row, Value col) const {
  if (format != KVFormat::mxfp4) {
    Value raw = tensor::ExtractOp::create(b, loc, rows, ValueRange{row, col});
    return decoder.decode(b, loc, raw, {}, col);
  }
  // Element j is in byte j/2 and scaled by block j/32.
  Value byteCol = arith::DivUIOp::create(b, loc, col, cIdx(b, loc, 2));
  Value block = arith::DivUIOp::create(b, loc, col, cIdx(b, loc, 32));
  Value raw = tensor::ExtractOp::create(b, loc, rows, ValueRange{row, byteCol});
  Value scale =
      tensor::ExtractOp::create(b, loc, scaleRows, ValueRange{row, block});
  return decoder.decode(b, loc, raw, scale, col);
}

Value CacheRows::positionIndptr(OpBuilder &b, Location loc) const {
  if (!paged())
    return kvIndptr;
  Type i32 = b.getI32Type();
  Value zero = cIdx(b, loc, 0), one = cIdx(b, loc, 1);
  Value size = tensor::DimOp::create(b, loc, kvIndptr, 0);
  Value init = tensor::EmptyOp::create(
      b, loc, ArrayRef<OpFoldResult>{size}, i32);
  Value c0i32 = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
  init = tensor::InsertOp::create(b, loc, c0i32, init, ValueRange{zero});
  Value numSeqs = arith::SubIOp::create(b, loc, size, one);
  auto loop = scf::ForOp::create(
      b, loc, zero, numSeqs, one, ValueRange{init, c0i32},
      [&](OpBuilder &lb, Location ll, Value seq, ValueRange carried) {
        Value length = sequence(lb, ll, seq).length;
        Value total = arith::AddIOp::create(
            lb, ll, carried[1],
            arith::IndexCastOp::create(lb, ll, i32, length));
        Value next = arith::AddIOp::create(lb, ll, seq, cIdx(lb, ll, 1));
        Value out = tensor::InsertOp::create(lb, ll, total, carried[0],
                                             ValueRange{next});
        scf::YieldOp::create(lb, ll, ValueRange{out, total});
      });
  return loop.getResult(0);
}
