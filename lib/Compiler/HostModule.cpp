//===- HostModule.cpp - one decode configuration as a host function -------===//
//
// The host entry point is built around the user's own op (a copy, with its
// location and attributes), so what the artifact computes is what the user
// wrote and a diagnostic from any pipeline points at the user's line. A
// decode known only by its signature (mla-run --generate) is first built as
// such an op.
//
//===----------------------------------------------------------------------===//

#include "mla/Compiler/HostModule.h"

#include "mla/Dialect/MLA/IR/MLADialect.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

using namespace mla;
using namespace mlir;

namespace {
MemRefType bufferOf(Type tensor) {
  auto t = cast<RankedTensorType>(tensor);
  return MemRefType::get(t.getShape(), t.getElementType());
}
} // namespace

OwningOpRef<ModuleOp> mla::buildHostModule(DecodeOp op) {
  MLIRContext *ctx = op->getContext();
  Location loc = op.getLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module->getBody());

  // The runtime's argument order: q, kv, qo_indptr, kv_indptr, [scale],
  // [kv_indices, kv_last_page_len], out, lse (docs/abi.md).
  SmallVector<Value> inputs = {op.getQ(), op.getKv(), op.getQoIndptr(),
                               op.getKvIndptr()};
  if (op.getKvScale())
    inputs.push_back(op.getKvScale());
  if (op.isPaged())
    inputs.append({op.getKvIndices(), op.getKvLastPageLen()});
  auto outType = cast<RankedTensorType>(op.getOut().getType());
  auto lseType = RankedTensorType::get(outType.getShape().drop_back(),
                                       b.getF32Type());
  SmallVector<Type> argTypes;
  for (Value v : inputs)
    argTypes.push_back(bufferOf(v.getType()));
  argTypes.push_back(bufferOf(outType));
  argTypes.push_back(bufferOf(lseType));
  auto func = func::FuncOp::create(b, loc, "mla_decode",
                                   b.getFunctionType(argTypes, {}));
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  b.setInsertionPointToStart(func.addEntryBlock());

  SmallVector<Value> tensors;
  for (auto [i, v] : llvm::enumerate(inputs))
    tensors.push_back(bufferization::ToTensorOp::create(
        b, loc, v.getType(), func.getArgument(i), /*restrict=*/true));
  unsigned next = 4;
  Value kvScale = op.getKvScale() ? tensors[next++] : Value();
  Value kvIndices = op.isPaged() ? tensors[next++] : Value();
  Value kvLastPageLen = op.isPaged() ? tensors[next++] : Value();
  // Both results, whether or not the user's op asked for the lse.
  auto decode = DecodeOp::create(
      b, loc, outType, lseType, tensors[0], tensors[1], tensors[2], tensors[3],
      kvScale, kvIndices, kvLastPageLen, op.getKvFormatAttr(),
      op.getVHeadDimAttr(), op.getSmScaleAttr());
  decode->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  unsigned outArg = inputs.size();
  for (auto [result, arg] : {std::pair{decode.getOut(), outArg},
                             std::pair{decode.getLse(), outArg + 1}})
    bufferization::MaterializeInDestinationOp::create(
        b, loc, /*result=*/Type(), result, func.getArgument(arg),
        /*restrict=*/true, /*writable=*/true);
  func::ReturnOp::create(b, loc);
  return module;
}

OwningOpRef<ModuleOp> mla::buildDecodeModule(MLIRContext &ctx,
                                             const KernelSignature &sig) {
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  int64_t dyn = ShapedType::kDynamic;
  Type kvElement = sig.format == CacheFormat::BF16  ? Type(b.getBF16Type())
                   : sig.format == CacheFormat::FP8 ? Type(b.getType<Float8E4M3FNType>())
                                                    : Type(b.getI8Type());
  int64_t width = sig.format == CacheFormat::MXFP4 ? sig.qkDim / 2 : sig.qkDim;
  auto indptr = RankedTensorType::get({dyn}, b.getI32Type());
  // [N] rows, or [num_pages, P] for a paged cache.
  SmallVector<int64_t> rows = {dyn};
  if (sig.pageSize > 0)
    rows.push_back(sig.pageSize);
  auto rowsOf = [&](int64_t width, Type elem) {
    SmallVector<int64_t> shape(rows);
    shape.push_back(width);
    return RankedTensorType::get(shape, elem);
  };
  SmallVector<Type> types = {
      RankedTensorType::get({dyn, sig.numHeads, sig.qkDim}, b.getBF16Type()),
      rowsOf(width, kvElement), indptr, indptr};
  if (sig.format == CacheFormat::FP8)
    types.push_back(RankedTensorType::get({1}, b.getF32Type()));
  if (sig.format == CacheFormat::MXFP4)
    types.push_back(
        rowsOf(sig.qkDim / 32, b.getType<Float8E8M0FNUType>()));
  unsigned pagesArg = types.size();
  if (sig.pageSize > 0)
    types.append({indptr, indptr}); // kv_indices, kv_last_page_len
  auto func = func::FuncOp::create(b, loc, "decode", b.getFunctionType(types, {}));
  b.setInsertionPointToStart(func.addEntryBlock());
  auto arg = [&](unsigned i) { return func.getArgument(i); };
  KVFormat format = kvFormat(sig.format);
  FloatAttr smScale =
      sig.smScale > 0.0 ? b.getF32FloatAttr(static_cast<float>(sig.smScale))
                        : FloatAttr();
  DecodeOp::create(
      b, loc, RankedTensorType::get({dyn, sig.numHeads, sig.vDim}, b.getBF16Type()),
      RankedTensorType::get({dyn, sig.numHeads}, b.getF32Type()), arg(0), arg(1),
      arg(2), arg(3), sig.format == CacheFormat::BF16 ? Value() : arg(4),
      sig.pageSize > 0 ? arg(pagesArg) : Value(),
      sig.pageSize > 0 ? arg(pagesArg + 1) : Value(),
      KVFormatAttr::get(&ctx, format), b.getI64IntegerAttr(sig.vDim), smScale);
  func::ReturnOp::create(b, loc);
  return module;
}
