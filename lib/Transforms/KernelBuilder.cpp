//===- KernelBuilder.cpp - what the kernel builders share -----------------===//

#include "KernelBuilder.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "mla/ABI.h"

using namespace mlir;
using namespace mla;

Value KernelBuilder::laneReduce(Value v, ArrayRef<int64_t> offsets,
                                bool isMax) {
  auto combine = [&](Value x, Value y) {
    return isMax ? fmax(x, y) : fadd(x, y);
  };
  for (int64_t offset : offsets) {
    // Within 32 lanes ds_swizzle's bit mode reaches lane ^ offset (one LDS
    // crossbar op; a shuffle by 16 would become two copies, a permlane
    // swap and a select on gfx950).
    if (offset < 32) {
      v = combine(v, amdgpu::SwizzleBitModeOp::create(b, loc, v, /*andMask=*/31,
                                                      /*orMask=*/0, offset));
      continue;
    }
    assert(offset == 32 && "a wave is 64 lanes");
    // Across the halves one v_permlane32_swap of v with itself: of its two
    // results each lane holds its own value in one and lane ^ 32's in the
    // other (which is which depends on the half), so combining the two
    // reduces without the lane select a shuffle by 32 lowers to.
    Type i32 = b.getI32Type();
    Value bits = arith::BitcastOp::create(b, loc, i32, v);
    auto pairType =
        LLVM::LLVMStructType::getLiteral(b.getContext(), {i32, i32});
    Value pair = ROCDL::Permlane32SwapOp::create(b, loc, pairType, bits, bits,
                                                 /*fi=*/false,
                                                 /*boundControl=*/false);
    auto half = [&](int64_t i) {
      return arith::BitcastOp::create(
          b, loc, v.getType(), LLVM::ExtractValueOp::create(b, loc, pair, i));
    };
    v = combine(half(0), half(1));
  }
  return v;
}

MemRefType mla::ldsType(ArrayRef<int64_t> shape, Type elem) {
  auto space = gpu::AddressSpaceAttr::get(elem.getContext(),
                                          gpu::AddressSpace::Workgroup);
  return MemRefType::get(shape, elem, MemRefLayoutAttrInterface(), space);
}

MemRefType mla::globalType(ArrayRef<int64_t> shape, Type elem) {
  auto space =
      gpu::AddressSpaceAttr::get(elem.getContext(), gpu::AddressSpace::Global);
  return MemRefType::get(shape, elem, MemRefLayoutAttrInterface(), space);
}

SmallVector<StringRef> PartialKernelSignature::argNames() const {
  SmallVector<StringRef> names = {arg::kQ, arg::kKV};
  if (format != CacheFormat::BF16)
    names.push_back(arg::kKVScale);
  names.append({arg::kQoIndptr, arg::kKVIndptr, arg::kWorkItems,
                arg::kPartialOut, arg::kPartialLse, arg::kItemIndptr, arg::kOut,
                arg::kLse, arg::kWorkUnits, arg::kWorkgroupUnits});
  if (pageSize > 0)
    names.append({arg::kKVIndices, arg::kKVLastPageLen});
  return names;
}

SmallVector<Type> PartialKernelSignature::argTypes(Builder &b) const {
  Type bf16 = b.getBF16Type(), f32 = b.getF32Type(), i32 = b.getI32Type();
  int64_t dyn = ShapedType::kDynamic;
  bool mx = format == CacheFormat::MXFP4;
  SmallVector<Type> types = {
      MemRefType::get({dyn, numHeads, qkDim}, bf16),       // q
      globalType({dyn, mx ? qkDim / 2 : qkDim}, kvCodes)}; // kv
  if (mx)
    types.push_back(globalType({dyn, qkDim / 32}, blockScales)); // kv_scale
  else if (format == CacheFormat::FP8)
    types.push_back(MemRefType::get({1}, f32)); // kv_scale
  types.append(
      {MemRefType::get({dyn}, i32),    // qo_indptr
       MemRefType::get({dyn}, i32),    // kv_indptr
       MemRefType::get({dyn, 4}, i32), // work_items
       MemRefType::get({dyn, kMaxQueryTokens, numHeads, vDim}, f32), // partials
       MemRefType::get({dyn, kMaxQueryTokens, numHeads}, f32), // partial_lse
       MemRefType::get({dyn}, i32),                  // item_indptr
       MemRefType::get({dyn, numHeads, vDim}, bf16), // out
       MemRefType::get({dyn, numHeads}, f32),        // lse
       MemRefType::get({dyn, 3}, i32),               // units
       MemRefType::get({workgroups + 1}, i32)});     // workgroup_unit_indptr
  if (pageSize > 0)
    types.append({MemRefType::get({dyn}, i32),   // kv_indices
                  MemRefType::get({dyn}, i32)}); // kv_last_page_len
  return types;
}

PartialKernelArguments PartialKernelSignature::bind(gpu::GPUFuncOp func) const {
  SmallVector<StringRef> names = argNames();
  auto argument = [&](StringRef name) -> Value {
    auto it = llvm::find(names, name);
    return it == names.end() ? Value() : func.getArgument(it - names.begin());
  };
  return {argument(arg::kQ),
          argument(arg::kKV),
          argument(arg::kKVScale),
          argument(arg::kQoIndptr),
          argument(arg::kKVIndptr),
          argument(arg::kWorkItems),
          argument(arg::kPartialOut),
          argument(arg::kPartialLse),
          argument(arg::kItemIndptr),
          argument(arg::kOut),
          argument(arg::kLse),
          argument(arg::kWorkUnits),
          argument(arg::kWorkgroupUnits),
          argument(arg::kKVIndices),
          argument(arg::kKVLastPageLen)};
}

namespace {
/// The size symbol of a kernel argument's leading dynamic dimension, as the
/// runtime names it (docs/artifact.md).
StringRef leadingDimSymbol(std::string_view arg) {
  if (arg == arg::kQ || arg == arg::kOut || arg == arg::kLse)
    return dim::kTokens;
  if (arg == arg::kKV || arg == arg::kKVScale)
    return dim::kKVRows;
  if (arg == arg::kQoIndptr || arg == arg::kKVIndptr || arg == arg::kItemIndptr)
    return dim::kSeqsPlusOne;
  if (arg == arg::kKVIndices)
    return dim::kKVIndices;
  if (arg == arg::kKVLastPageLen)
    return dim::kSequences;
  if (arg == arg::kWorkUnits)
    return dim::kWorkUnits;
  return dim::kWorkItems; // work_items, partial_out, partial_lse
}
} // namespace

DictionaryAttr mla::launchAttr(Builder &b, ArrayRef<std::string> grid,
                               int64_t threads, int64_t ldsBytes,
                               ArrayRef<StringRef> names, TypeRange argTypes,
                               ArrayRef<NamedAttribute> extra) {
  SmallVector<Attribute> dims;
  for (auto [name, type] : llvm::zip_equal(names, argTypes)) {
    auto memref = cast<MemRefType>(type);
    SmallVector<std::string> shape;
    for (int64_t d : memref.getShape())
      shape.push_back(ShapedType::isDynamic(d) ? leadingDimSymbol(name).str()
                                               : std::to_string(d));
    dims.push_back(b.getStrArrayAttr(SmallVector<StringRef>(shape.begin(),
                                                            shape.end())));
  }
  SmallVector<NamedAttribute> entries = {
      b.getNamedAttr("grid", b.getStrArrayAttr(SmallVector<StringRef>(
                                 grid.begin(), grid.end()))),
      b.getNamedAttr("block", b.getI64ArrayAttr({threads, 1, 1})),
      b.getNamedAttr("lds_bytes", b.getI64IntegerAttr(ldsBytes)),
      b.getNamedAttr("args", b.getStrArrayAttr(names)),
      b.getNamedAttr("arg_dims", b.getArrayAttr(dims))};
  entries.append(extra.begin(), extra.end());
  return b.getDictionaryAttr(entries);
}

void mla::forLoop(OpBuilder &b, Location loc, Value lb, Value ub, Value step,
                  llvm::function_ref<void(Value)> body) {
  scf::ForOp::create(b, loc, lb, ub, step, ValueRange{},
                     [&](OpBuilder &lb2, Location, Value i, ValueRange) {
                       OpBuilder::InsertionGuard g(b);
                       b.setInsertionPointToStart(lb2.getInsertionBlock());
                       body(i);
                       scf::YieldOp::create(b, loc);
                     });
}

namespace {
/// An scf.if region builder that runs `body` with `b` inside the region.
auto regionOf(OpBuilder &b, Location loc, llvm::function_ref<void()> body) {
  return [&b, loc, body](OpBuilder &ib, Location) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
    body();
    scf::YieldOp::create(b, loc);
  };
}
} // namespace

void mla::ifThen(OpBuilder &b, Location loc, Value cond,
                 llvm::function_ref<void()> body) {
  scf::IfOp::create(b, loc, cond, regionOf(b, loc, body));
}

void mla::ifThenElse(OpBuilder &b, Location loc, Value cond,
                     llvm::function_ref<void()> thenBody,
                     llvm::function_ref<void()> elseBody) {
  scf::IfOp::create(b, loc, cond, regionOf(b, loc, thenBody),
                    regionOf(b, loc, elseBody));
}
