//===- MLAOps.cpp - mla operations ----------------------------------------===//
//
// Verification of `mla.decode`. Every malformed combination of operand shapes,
// element types, formats and attributes gets its own message, because this op
// is the contract with the ML compilers that emit it: a wrong op must be
// rejected here, not produce a wrong kernel later.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Runtime/SplitPlanner.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace mla;

#define GET_OP_CLASSES
#include "mla/Dialect/MLA/IR/MLAOps.cpp.inc"

namespace {
/// Prints a shape as `[?, 16, 576]` for diagnostics.
std::string formatShape(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(shape, os, [&](int64_t d) {
    if (ShapedType::isDynamic(d))
      os << "?";
    else
      os << d;
  });
  os << "]";
  return s;
}

/// Two dimensions agree unless both are static and differ.
bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

bool shapesCompatible(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (auto [x, y] : llvm::zip_equal(a, b))
    if (!dimsCompatible(x, y))
      return false;
  return true;
}
} // namespace

static double effectiveSmScale(std::optional<APFloat> scale, int64_t qkDim) {
  if (scale)
    return scale->convertToDouble();
  return 1.0 / std::sqrt(static_cast<double>(qkDim));
}

double DecodeOp::getEffectiveSmScale() {
  return effectiveSmScale(getSmScale(), getQKHeadDim());
}

double PartialDecodeOp::getEffectiveSmScale() {
  return effectiveSmScale(getSmScale(), getQKHeadDim());
}

namespace {
/// Head dimensions of a verified attention op.
struct AttentionShape {
  int64_t numTokens, numHeads, qkDim, vDim, numRows;
};

/// A paged cache's page table: both operands or neither, 1-D i32, and a
/// static power-of-two page size of at most 256 rows.
LogicalResult verifyPages(Operation *op, RankedTensorType kvType,
                          Value indices, Value lastPageLen) {
  if (static_cast<bool>(indices) != static_cast<bool>(lastPageLen))
    return op->emitOpError(
        "a paged cache needs both kv_indices and kv_last_page_len");
  if (!indices) {
    if (kvType.getRank() != 2)
      return op->emitOpError("kv must have rank 2 [N, row width] (rank 3 "
                             "[num_pages, P, row width] with pages(...)), "
                             "got rank ")
             << kvType.getRank();
    return success();
  }
  for (auto [value, name] : {std::pair{indices, "kv_indices"},
                             std::pair{lastPageLen, "kv_last_page_len"}})
    if (cast<RankedTensorType>(value.getType()).getRank() != 1)
      return op->emitOpError(name) << " must be 1-D";
  if (kvType.getRank() != 3)
    return op->emitOpError("a paged kv must have rank 3 [num_pages, P, row "
                           "width], got rank ")
           << kvType.getRank();
  int64_t pageSize = kvType.getDimSize(1);
  if (ShapedType::isDynamic(pageSize) || pageSize < 1 || pageSize > 256 ||
      !llvm::isPowerOf2_64(pageSize))
    return op->emitOpError("page size P = kv's dimension 1 must be a static "
                           "power of two in 1..256, got ")
           << formatShape(kvType.getShape());
  return success();
}

/// Verification shared by mla.decode and mla.partial_decode: q, kv, the
/// scale, the page table, the indptrs and the attributes.
LogicalResult verifyAttentionInputs(Operation *op, RankedTensorType qType,
                                    RankedTensorType kvType, Value scale,
                                    Value indices, Value lastPageLen,
                                    RankedTensorType qoType,
                                    RankedTensorType kvpType, KVFormat format,
                                    int64_t vDim,
                                    std::optional<APFloat> smScale,
                                    AttentionShape &shape) {
  auto emitOpError = [&](const Twine &msg) { return op->emitOpError(msg); };
  StringRef formatName = stringifyKVFormat(format);

  // q: [T, H, Dqk] with static head dimensions.
  if (qType.getRank() != 3)
    return emitOpError("q must have rank 3 [T, H, Dqk], got rank ")
           << qType.getRank();
  int64_t numTokens = qType.getDimSize(0);
  int64_t numHeads = qType.getDimSize(1);
  int64_t qkDim = qType.getDimSize(2);
  if (ShapedType::isDynamic(numHeads) || ShapedType::isDynamic(qkDim))
    return emitOpError("q head dimensions H and Dqk must be static, got ")
           << formatShape(qType.getShape());
  if (numHeads <= 0 || numHeads % 16 != 0)
    return emitOpError("number of heads H = ")
           << numHeads << " must be a positive multiple of 16";
  if (numHeads > 128)
    return emitOpError("number of heads H = ") << numHeads << " exceeds 128";
  if (qkDim <= 0 || qkDim % 32 != 0)
    return emitOpError("q/k head dim Dqk = ")
           << qkDim << " must be a positive multiple of 32";

  // v_head_dim: the first Dv columns of a cache row are the values.
  if (vDim <= 0 || vDim % 32 != 0)
    return emitOpError("v_head_dim = ")
           << vDim << " must be a positive multiple of 32";
  if (vDim > qkDim)
    return emitOpError("v_head_dim = ")
           << vDim << " exceeds the q/k head dim Dqk = " << qkDim;

  if (smScale) {
    double s = smScale->convertToDouble();
    if (!std::isfinite(s) || s <= 0.0)
      return emitOpError("sm_scale must be a positive finite number, got ")
             << s;
  }

  // kv: element type and row width per format; paged, a page table.
  if (failed(verifyPages(op, kvType, indices, lastPageLen)))
    return failure();
  // The rows before the width: [N] or [num_pages, P].
  ArrayRef<int64_t> rowDims = kvType.getShape().drop_back();
  Type kvElem = kvType.getElementType();
  Type expectedElem;
  int64_t expectedWidth = qkDim;
  Builder b(op->getContext());
  switch (format) {
  case KVFormat::bf16:
    expectedElem = b.getBF16Type();
    break;
  case KVFormat::fp8:
    expectedElem = b.getType<Float8E4M3FNType>();
    break;
  case KVFormat::mxfp4:
    expectedElem = b.getI8Type();
    expectedWidth = qkDim / 2;
    break;
  }
  if (kvElem != expectedElem)
    return emitOpError("kv_format ")
           << formatName << " requires kv elements of type " << expectedElem
           << ", got " << kvElem;
  int64_t kvWidth = kvType.getShape().back();
  if (kvWidth != expectedWidth) {
    if (format == KVFormat::mxfp4)
      return emitOpError("mxfp4 kv rows must hold Dqk/2 = ")
             << expectedWidth << " packed bytes, got "
             << formatShape(kvType.getShape());
    return emitOpError("kv row width ")
           << formatShape(kvType.getShape())
           << " does not match q head dim Dqk = " << qkDim;
  }
  int64_t numRows = kvType.getDimSize(0);
  for (int64_t d : rowDims.drop_front())
    numRows = ShapedType::isDynamic(numRows) ? numRows : numRows * d;

  // kv_scale: absent for bf16, per-tensor for fp8, per 32 elements for mxfp4.
  switch (format) {
  case KVFormat::bf16:
    if (scale)
      return emitOpError("kv_format bf16 takes no kv_scale operand");
    break;
  case KVFormat::fp8: {
    if (!scale)
      return emitOpError(
          "kv_format fp8 requires a kv_scale operand of type tensor<1xf32>");
    auto scaleType = cast<RankedTensorType>(scale.getType());
    if (scaleType.getRank() != 1 || scaleType.getDimSize(0) != 1 ||
        !scaleType.getElementType().isF32())
      return emitOpError("fp8 kv_scale must be tensor<1xf32>, got ")
             << scaleType;
    break;
  }
  case KVFormat::mxfp4: {
    if (!scale)
      return emitOpError("kv_format mxfp4 requires a kv_scale operand of "
                         "f8E8M0FNU [N, Dqk/32]");
    auto scaleType = cast<RankedTensorType>(scale.getType());
    if (!isa<Float8E8M0FNUType>(scaleType.getElementType()))
      return emitOpError("mxfp4 kv_scale elements must be f8E8M0FNU, got ")
             << scaleType.getElementType();
    SmallVector<int64_t> expected(rowDims);
    expected.push_back(qkDim / 32);
    if (scaleType.getRank() != (int64_t)expected.size() ||
        !shapesCompatible(scaleType.getShape(), expected) ||
        ShapedType::isDynamic(scaleType.getShape().back()))
      return emitOpError("mxfp4 kv_scale must have shape ")
             << (indices ? "[num_pages, P, Dqk/32]" : "[N, Dqk/32]") << " = "
             << formatShape(expected) << ", got "
             << formatShape(scaleType.getShape());
    break;
  }
  }

  // Indptrs: 1-D i32 of the same length B+1 >= 2.
  if (qoType.getRank() != 1)
    return emitOpError("qo_indptr must be 1-D [B+1], got rank ")
           << qoType.getRank();
  if (kvpType.getRank() != 1)
    return emitOpError("kv_indptr must be 1-D [B+1], got rank ")
           << kvpType.getRank();
  if (!dimsCompatible(qoType.getDimSize(0), kvpType.getDimSize(0)))
    return emitOpError("qo_indptr and kv_indptr must have the same length "
                       "B+1, got ")
           << qoType.getDimSize(0) << " and " << kvpType.getDimSize(0);
  for (RankedTensorType t : {qoType, kvpType})
    if (!ShapedType::isDynamic(t.getDimSize(0)) && t.getDimSize(0) < 2)
      return emitOpError("indptrs must hold B+1 >= 2 entries, got ")
             << t.getDimSize(0);
  shape = AttentionShape{numTokens, numHeads, qkDim, vDim, numRows};
  return success();
}
} // namespace

LogicalResult DecodeOp::verify() {
  AttentionShape shape;
  if (failed(verifyAttentionInputs(*this, getQ().getType(), getKv().getType(),
                                   getKvScale(), getKvIndices(),
                                   getKvLastPageLen(), getQoIndptr().getType(),
                                   getKvIndptr().getType(), getKvFormat(),
                                   getVHeadDim(), getSmScale(), shape)))
    return failure();
  int64_t numTokens = shape.numTokens, numHeads = shape.numHeads,
          vDim = shape.vDim;

  // Results: out [T, H, Dv] bf16, optional lse [T, H] f32.
  RankedTensorType outType = getOut().getType();
  SmallVector<int64_t> expectedOut = {numTokens, numHeads, vDim};
  if (outType.getRank() != 3 ||
      !shapesCompatible(outType.getShape(), expectedOut) ||
      ShapedType::isDynamic(outType.getDimSize(2)))
    return emitOpError("out must have shape [T, H, Dv] = ")
           << formatShape(expectedOut) << ", got "
           << formatShape(outType.getShape());
  if (Value lse = getLse()) {
    auto lseType = cast<RankedTensorType>(lse.getType());
    SmallVector<int64_t> expectedLse = {numTokens, numHeads};
    if (lseType.getRank() != 2 ||
        !shapesCompatible(lseType.getShape(), expectedLse))
      return emitOpError("lse must have shape [T, H] = ")
             << formatShape(expectedLse) << ", got "
             << formatShape(lseType.getShape());
  }
  return success();
}

//===----------------------------------------------------------------------===//
// L2: split-KV ops
//===----------------------------------------------------------------------===//

int64_t PlanSplitsOp::getMaxItemsPerSequence() {
  ConfigAttr config = getConfig();
  return config.getSplitPolicy() == SplitPolicy::uniform ? config.getSplits()
                                                         : kMaxSplitsPerSeq;
}

LogicalResult PlanSplitsOp::verify() {
  if (getKvIndptr().getType().getRank() != 1)
    return emitOpError("kv_indptr must be 1-D [B+1]");
  RankedTensorType items = getWorkItems().getType();
  if (items.getRank() != 2 || items.getDimSize(1) != 4)
    return emitOpError("work_items must have shape [num_items, 4], got ")
           << formatShape(items.getShape());
  RankedTensorType indptr = getItemIndptr().getType();
  if (indptr.getRank() != 1 ||
      !dimsCompatible(indptr.getDimSize(0),
                      getKvIndptr().getType().getDimSize(0)))
    return emitOpError("item_indptr must have the shape of kv_indptr [B+1], "
                       "got ")
           << formatShape(indptr.getShape());
  return success();
}

LogicalResult PartialDecodeOp::verify() {
  AttentionShape shape;
  if (failed(verifyAttentionInputs(*this, getQ().getType(), getKv().getType(),
                                   getKvScale(), getKvIndices(),
                                   getKvLastPageLen(), getQoIndptr().getType(),
                                   getKvIndptr().getType(), getKvFormat(),
                                   getVHeadDim(), getSmScale(), shape)))
    return failure();
  RankedTensorType items = getWorkItems().getType();
  if (items.getRank() != 2 || items.getDimSize(1) != 4)
    return emitOpError("work_items must have shape [num_items, 4], got ")
           << formatShape(items.getShape());
  int64_t numItems = items.getDimSize(0);
  SmallVector<int64_t> expectedOut = {numItems, kMaxQueryTokens,
                                      shape.numHeads, shape.vDim};
  RankedTensorType outType = getPartialOut().getType();
  if (!shapesCompatible(outType.getShape(), expectedOut))
    return emitOpError("partial_out must have shape [num_items, 4, H, Dv] = ")
           << formatShape(expectedOut) << ", got "
           << formatShape(outType.getShape());
  SmallVector<int64_t> expectedLse = {numItems, kMaxQueryTokens,
                                      shape.numHeads};
  RankedTensorType lseType = getPartialLse().getType();
  if (!shapesCompatible(lseType.getShape(), expectedLse))
    return emitOpError("partial_lse must have shape [num_items, 4, H] = ")
           << formatShape(expectedLse) << ", got "
           << formatShape(lseType.getShape());
  return success();
}

LogicalResult CombineOp::verify() {
  RankedTensorType partialOut = getPartialOut().getType();
  RankedTensorType partialLse = getPartialLse().getType();
  if (partialOut.getRank() != 4 || partialOut.getDimSize(1) != kMaxQueryTokens)
    return emitOpError("partial_out must have shape [num_items, 4, H, Dv], got ")
           << formatShape(partialOut.getShape());
  int64_t numItems = partialOut.getDimSize(0);
  int64_t numHeads = partialOut.getDimSize(2), vDim = partialOut.getDimSize(3);
  SmallVector<int64_t> expectedLse = {numItems, kMaxQueryTokens, numHeads};
  if (!shapesCompatible(partialLse.getShape(), expectedLse))
    return emitOpError("partial_lse must have shape [num_items, 4, H] = ")
           << formatShape(expectedLse) << ", got "
           << formatShape(partialLse.getShape());
  if (getItemIndptr().getType().getRank() != 1 ||
      getQoIndptr().getType().getRank() != 1 ||
      !dimsCompatible(getItemIndptr().getType().getDimSize(0),
                      getQoIndptr().getType().getDimSize(0)))
    return emitOpError("item_indptr and qo_indptr must both be [B+1]");
  SmallVector<int64_t> expectedOut = {ShapedType::kDynamic, numHeads, vDim};
  RankedTensorType outType = getOut().getType();
  if (outType.getRank() != 3 ||
      !shapesCompatible(outType.getShape(), expectedOut))
    return emitOpError("out must have shape [T, H, Dv] = ")
           << formatShape(expectedOut) << ", got "
           << formatShape(outType.getShape());
  if (Value lse = getLse()) {
    auto lseType = cast<RankedTensorType>(lse.getType());
    SmallVector<int64_t> expected = {outType.getDimSize(0), numHeads};
    if (!shapesCompatible(lseType.getShape(), expected))
      return emitOpError("lse must have shape [T, H] = ")
             << formatShape(expected) << ", got "
             << formatShape(lseType.getShape());
  }
  return success();
}
