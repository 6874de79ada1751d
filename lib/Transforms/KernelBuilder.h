//===- KernelBuilder.h - what the kernel builders share ---------*- C++ -*-===//
//
// A small arithmetic vocabulary over index and f32 values, the memref types
// of workgroup and global memory, the partial-decode kernels' arguments
// (one ABI for every target) and the `mla.launch` description the runtime
// launches a kernel by.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_TRANSFORMS_KERNELBUILDER_H
#define MLA_LIB_TRANSFORMS_KERNELBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include "mla/ABI.h"

#include <string>

namespace mla {

/// Small arithmetic vocabulary over index and f32 values.
struct KernelBuilder {
  mlir::OpBuilder &b;
  mlir::Location loc;

  mlir::Value idx(int64_t v) {
    return mlir::arith::ConstantIndexOp::create(b, loc, v);
  }
  mlir::Value i32(int64_t v) {
    return mlir::arith::ConstantOp::create(
        b, loc, b.getI32IntegerAttr(static_cast<int32_t>(v)));
  }
  mlir::Value f32(double v) {
    return mlir::arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  mlir::Value add(mlir::Value x, mlir::Value y) {
    return mlir::arith::AddIOp::create(b, loc, x, y);
  }
  mlir::Value sub(mlir::Value x, mlir::Value y) {
    return mlir::arith::SubIOp::create(b, loc, x, y);
  }
  mlir::Value mul(mlir::Value x, mlir::Value y) {
    return mlir::arith::MulIOp::create(b, loc, x, y);
  }
  mlir::Value div(mlir::Value x, mlir::Value y) {
    return mlir::arith::DivUIOp::create(b, loc, x, y);
  }
  mlir::Value rem(mlir::Value x, mlir::Value y) {
    return mlir::arith::RemUIOp::create(b, loc, x, y);
  }
  /// x / y for 0 <= x and 0 < y below 2^31, in 32 bits: a 64-bit division
  /// by a variable is a subroutine call in PTX (the registers it saves are
  /// the spills ptxas reports) and a long sequence on gfx950.
  mlir::Value div32(mlir::Value x, mlir::Value y) {
    mlir::Type i32 = b.getI32Type();
    mlir::Value q = mlir::arith::DivUIOp::create(
        b, loc, mlir::arith::IndexCastUIOp::create(b, loc, i32, x),
        mlir::arith::IndexCastUIOp::create(b, loc, i32, y));
    return mlir::arith::IndexCastUIOp::create(b, loc, b.getIndexType(), q);
  }
  mlir::Value minS(mlir::Value x, mlir::Value y) {
    return mlir::arith::MinSIOp::create(b, loc, x, y);
  }
  mlir::Value maxS(mlir::Value x, mlir::Value y) {
    return mlir::arith::MaxSIOp::create(b, loc, x, y);
  }
  mlir::Value lessThan(mlir::Value x, mlir::Value y) {
    return mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::slt,
                                       x, y);
  }
  mlir::Value fadd(mlir::Value x, mlir::Value y) {
    return mlir::arith::AddFOp::create(b, loc, x, y);
  }
  mlir::Value fmul(mlir::Value x, mlir::Value y) {
    return mlir::arith::MulFOp::create(b, loc, x, y);
  }
  mlir::Value fmax(mlir::Value x, mlir::Value y) {
    return mlir::arith::MaximumFOp::create(b, loc, x, y);
  }
  mlir::Value load(mlir::Value mem, mlir::ValueRange indices) {
    return mlir::memref::LoadOp::create(b, loc, mem, indices);
  }
  mlir::Value loadIndex(mlir::Value mem, mlir::ValueRange indices) {
    return mlir::arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                            load(mem, indices));
  }
  /// Butterfly reduction over the lanes `lane ^ offset` for each offset.
  mlir::Value laneReduce(mlir::Value v, llvm::ArrayRef<int64_t> offsets,
                         bool isMax);
};

/// A loop `for (i = lb; i < ub; i += step)` without results whose body
/// `body` builds at the builder's insertion point.
void forLoop(mlir::OpBuilder &b, mlir::Location loc, mlir::Value lb,
             mlir::Value ub, mlir::Value step,
             llvm::function_ref<void(mlir::Value)> body);
/// `if (cond) body` at the builder's insertion point.
void ifThen(mlir::OpBuilder &b, mlir::Location loc, mlir::Value cond,
            llvm::function_ref<void()> body);
/// `if (cond) thenBody else elseBody` at the builder's insertion point.
void ifThenElse(mlir::OpBuilder &b, mlir::Location loc, mlir::Value cond,
                llvm::function_ref<void()> thenBody,
                llvm::function_ref<void()> elseBody);
mlir::MemRefType ldsType(llvm::ArrayRef<int64_t> shape, mlir::Type elem);
mlir::MemRefType globalType(llvm::ArrayRef<int64_t> shape, mlir::Type elem);

/// The partial-decode kernel's arguments, the same for every target: the
/// runtime binds them by the names of mla/ABI.h's `arg::`.
struct PartialKernelArguments {
  /// kvScale: fp8's per-tensor scale or mxfp4's block scales (bf16: none);
  /// kvIndices, kvLastPageLen: paged caches only.
  mlir::Value q, kv, kvScale, qoIndptr, kvIndptr, workItems, partialOut,
      partialLse, itemIndptr, out, lse, workUnits, workgroupUnits;
  mlir::Value kvIndices, kvLastPageLen;
};

/// What the partial-decode kernel's arguments are for a decode's shapes.
struct PartialKernelSignature {
  CacheFormat format;
  int64_t numHeads, qkDim, vDim;
  /// The persistent grid (workgroup_unit_indptr holds one more entry).
  int64_t workgroups;
  /// 0: a contiguous cache.
  int64_t pageSize;
  /// What the kernel reads the cache's codes as (bf16, an fp8 type or the
  /// bytes as i8) and mxfp4's E8M0 scales as (their type or i8).
  mlir::Type kvCodes, blockScales;

  llvm::SmallVector<llvm::StringRef> argNames() const;
  llvm::SmallVector<mlir::Type> argTypes(mlir::Builder &b) const;
  /// The arguments of `func`, a kernel of this signature.
  PartialKernelArguments bind(mlir::gpu::GPUFuncOp func) const;
};

/// `mla.launch`: how the runtime launches a kernel of `threads` threads and
/// binds its arguments by name; `arg_dims` gives each memref argument's
/// shape with the leading dynamic size as a symbol; `extra` adds
/// kernel-specific entries.
mlir::DictionaryAttr launchAttr(mlir::Builder &b,
                                llvm::ArrayRef<std::string> grid,
                                int64_t threads, int64_t ldsBytes,
                                llvm::ArrayRef<llvm::StringRef> names,
                                mlir::TypeRange argTypes,
                                llvm::ArrayRef<mlir::NamedAttribute> extra = {});

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_KERNELBUILDER_H
