//===- GPUToEmu.cpp - MFMA-level kernels -> host lane functions -----------===//
//
// The emu backend runs the gfx950 kernels as they stand after
// mla-lower-to-mfma on the CPU. Every kernel becomes a host function that one
// lane (fiber) executes, with a context handle as its last argument; what a
// lane cannot do alone becomes a call into the emu runtime
// (runtime/jit/emu/Runtime.cpp): thread and block ids, workgroup barriers, and
// the wave-level operations — amdgpu.mfma, gpu.shuffle,
// amdgpu.swizzle_bitmode (xor), rocdl.permlane32.swap,
// rocdl.readfirstlane, amdgpu.gather_to_lds (from global memory or a
// bounds-checked buffer), amdgpu.memory_counter_wait —
// which rendezvous the wave's 64 lanes and compute exactly what the
// instruction does (include/mla/Emu/MFMA.h); an LDS DMA lands only when a
// wait retires it. Every load and store on workgroup
// memory is announced to the runtime first (mla_emu_lds_read/_write), which
// checks it against the LDS hazard model (include/mla/Emu/LdsHazards.h).
// fp8 conversions follow the hardware's round-to-nearest-even; exp2/log are
// the host's. Workgroup memory arrives as arguments (one buffer per
// workgroup). An op the emulator does not model is an error naming it.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/PatternMatch.h"

namespace mla {
#define GEN_PASS_DEF_MLAGPUTOEMUPASS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
/// Declares `name` : (inputs) -> (results) in `module` once.
func::FuncOp runtimeFunction(ModuleOp module, StringRef name,
                             TypeRange inputs, TypeRange results) {
  if (auto fn = module.lookupSymbol<func::FuncOp>(name))
    return fn;
  OpBuilder b(module.getBodyRegion());
  auto fn = func::FuncOp::create(b, module.getLoc(), name,
                                 b.getFunctionType(inputs, results));
  fn.setPrivate();
  return fn;
}

class LaneFunctionBuilder {
public:
  LaneFunctionBuilder(ModuleOp module, func::FuncOp fn, Value ctx)
      : module(module), fn(fn), ctx(ctx), b(fn.getContext()) {}

  LogicalResult run();

private:
  /// What lowering an op did: replaced it (run() erases it), left it in
  /// place, or nothing (another lowering's op).
  enum class Outcome { Replaced, Kept, NotHandled };
  /// Lowers `op` by the first of the lower*Op below that handles it; an op
  /// of the gpu or amdgpu dialect that none handles is an error.
  LogicalResult lowerOp(Operation *op, Outcome &done);
  static LogicalResult keep(Outcome &done) {
    done = Outcome::Kept;
    return success();
  }
  LogicalResult lowerWaveOp(Operation *op, Outcome &done);
  LogicalResult lowerLdsLoadOp(Operation *op, Outcome &done);
  LogicalResult lowerMfmaOp(Operation *op, Outcome &done);
  LogicalResult lowerTensorCoreOp(Operation *op, Outcome &done);
  LogicalResult lowerConversionOp(Operation *op, Outcome &done);
  LogicalResult lowerAsyncCopyOp(Operation *op, Outcome &done);
  /// Erases the pointer casts and buffer views the lowered ops read
  /// through, and turns gpu.return into func.return.
  LogicalResult eraseLeftovers();

  Value call(Location loc, StringRef name, TypeRange results,
             ValueRange args) {
    SmallVector<Type> inputs;
    for (Value a : args)
      inputs.push_back(a.getType());
    func::FuncOp callee = runtimeFunction(module, name, inputs, results);
    auto op = func::CallOp::create(b, loc, callee, args);
    return op.getNumResults() ? op.getResult(0) : Value();
  }
  Value i64(Location loc, Value index) {
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
  }
  Value index(Location loc, Value v) {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
  }
  /// Byte address of memref[indices] as i64.
  Value address(Location loc, Value memref, ValueRange indices);
  /// The address an LLVM pointer operand holds, as i64 (the kernels make
  /// them by llvm.inttoptr of an address).
  Value pointerAddress(Location loc, Value pointer) {
    if (auto intToPtr = pointer.getDefiningOp<LLVM::IntToPtrOp>())
      return intToPtr.getArg();
    return LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), pointer);
  }
  SmallVector<LLVM::IntToPtrOp> pointerCasts;
  /// A DMA lane's source address and how many of its `size` bytes it
  /// reads: all of them from global memory; from a bounds-checked buffer
  /// (amdgpu.fat_raw_buffer_cast), those below its valid bytes (the
  /// hardware returns zeros past them).
  LogicalResult gatherSource(amdgpu::GatherToLDSOp gather, Value size,
                             Value &src, Value &readable);
  /// A stack buffer of `bytes` i8 allocated once at the function entry.
  Value scratch(int64_t bytes);
  /// Announces a load (or store) of `op` on workgroup memory to the runtime,
  /// which checks it; an op touching workgroup memory otherwise is an error.
  LogicalResult announceLdsAccess(Operation *op);
  /// Checks the indices of `op`'s access to global memory against its
  /// memref's sizes (the last one with the elements read or written) in
  /// the runtime, which reports an access outside the memref as an error:
  /// a GPU reads or writes other memory there, or faults.
  void checkGlobalBounds(Operation *op);
  /// Replaces the single-operand `op` on a scalar or 1-D vector by `convert`
  /// applied to each element.
  LogicalResult replaceElementwise(Operation *op,
                                   function_ref<Value(Value)> convert);

  ModuleOp module;
  func::FuncOp fn;
  Value ctx;
  OpBuilder b;
  // Stack buffers the matrix and transposed loads pass to the runtime.
  Value aBuf, bBuf, cBuf, dBuf, trBuf, wgmmaC, wgmmaD;
  // Buffer casts the DMAs read through, erased after them.
  SmallVector<Operation *> buffers;
};

Value LaneFunctionBuilder::address(Location loc, Value memref,
                                   ValueRange indices) {
  auto type = cast<MemRefType>(memref.getType());
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  Value linear = meta.getOffset();
  for (auto [i, idx] : llvm::enumerate(indices))
    linear = arith::AddIOp::create(
        b, loc, linear,
        arith::MulIOp::create(b, loc, idx, meta.getStrides()[i]));
  int64_t elemBytes = type.getElementTypeBitWidth() / 8;
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value offset = arith::MulIOp::create(
      b, loc, linear, arith::ConstantIndexOp::create(b, loc, elemBytes));
  return i64(loc, arith::AddIOp::create(b, loc, base, offset));
}

LogicalResult LaneFunctionBuilder::gatherSource(amdgpu::GatherToLDSOp gather,
                                                Value size, Value &src,
                                                Value &readable) {
  Location loc = gather.getLoc();
  auto buffer = gather.getSrc().getDefiningOp<amdgpu::FatRawBufferCastOp>();
  if (!buffer) {
    src = address(loc, gather.getSrc(), gather.getSrcIndices());
    readable = size;
    return success();
  }
  if (!buffer.getValidBytes() || !buffer.getResetOffset())
    return gather.emitOpError("emu: only buffers with valid bytes and a reset "
                              "offset are modelled as DMA sources");
  // The buffer's layout is its source's, with the offset in the base.
  Value view = buffer.getSource();
  src = address(loc, view, gather.getSrcIndices());
  SmallVector<Value> zeros(gather.getSrcIndices().size(),
                           arith::ConstantIndexOp::create(b, loc, 0));
  Value offset =
      arith::SubIOp::create(b, loc, src, address(loc, view, zeros));
  Value left = arith::SubIOp::create(b, loc, buffer.getValidBytes(), offset);
  Value zero = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
  readable = arith::MinSIOp::create(
      b, loc, arith::MaxSIOp::create(b, loc, left, zero), size);
  return success();
}

Value LaneFunctionBuilder::scratch(int64_t bytes) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&fn.getBody().front());
  return memref::AllocaOp::create(
      b, fn.getLoc(), MemRefType::get({bytes}, b.getI8Type()));
}

static bool isWorkgroupMemory(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  auto space = memref ? dyn_cast_or_null<gpu::AddressSpaceAttr>(
                            memref.getMemorySpace())
                      : nullptr;
  return space && space.getValue() == gpu::AddressSpace::Workgroup;
}

LogicalResult LaneFunctionBuilder::announceLdsAccess(Operation *op) {
  Value memref;
  ValueRange indices;
  Type accessed;
  bool isWrite = false;
  if (auto load = dyn_cast<memref::LoadOp>(op)) {
    memref = load.getMemRef(), indices = load.getIndices();
    accessed = load.getType();
  } else if (auto store = dyn_cast<memref::StoreOp>(op)) {
    memref = store.getMemRef(), indices = store.getIndices();
    accessed = store.getValueToStore().getType(), isWrite = true;
  } else if (auto load = dyn_cast<vector::LoadOp>(op)) {
    memref = load.getBase(), indices = load.getIndices();
    accessed = load.getType();
  } else if (auto store = dyn_cast<vector::StoreOp>(op)) {
    memref = store.getBase(), indices = store.getIndices();
    accessed = store.getValueToStore().getType(), isWrite = true;
  }
  if (!memref || !isWorkgroupMemory(memref.getType())) {
    bool touchesLds = llvm::any_of(op->getOperandTypes(), isWorkgroupMemory);
    // Views are not accesses; the DMA and transposed loads are wave
    // operations the runtime checks itself.
    if (touchesLds && !isa<ViewLikeOpInterface, amdgpu::GatherToLDSOp,
                           amdgpu::TransposeLoadOp, nvgpu::LdMatrixOp,
                           nvgpu::DeviceAsyncCopyOp,
                           memref::ExtractStridedMetadataOp,
                           memref::ExtractAlignedPointerAsIndexOp>(op))
      return op->emitOpError(
          "emu: this access to workgroup memory is not modelled by the LDS "
          "hazard checker");
    return success();
  }
  int64_t bits = getElementTypeOrSelf(accessed).getIntOrFloatBitWidth();
  if (auto vt = dyn_cast<VectorType>(accessed))
    bits *= vt.getNumElements();
  Location loc = op->getLoc();
  Value bytes = arith::ConstantOp::create(
      b, loc, b.getI64IntegerAttr((bits + 7) / 8));
  call(loc, isWrite ? "mla_emu_lds_write" : "mla_emu_lds_read", {},
       {ctx, address(loc, memref, indices), bytes});
  return success();
}

void LaneFunctionBuilder::checkGlobalBounds(Operation *op) {
  Value memref;
  ValueRange indices;
  int64_t elements = 1;
  bool isWrite = false;
  auto vectorElements = [](Type t) {
    auto vt = dyn_cast<VectorType>(t);
    return vt ? vt.getNumElements() : int64_t(1);
  };
  if (auto load = dyn_cast<memref::LoadOp>(op)) {
    memref = load.getMemRef(), indices = load.getIndices();
  } else if (auto store = dyn_cast<memref::StoreOp>(op)) {
    memref = store.getMemRef(), indices = store.getIndices(), isWrite = true;
  } else if (auto load = dyn_cast<vector::LoadOp>(op)) {
    memref = load.getBase(), indices = load.getIndices();
    elements = vectorElements(load.getType());
  } else if (auto store = dyn_cast<vector::StoreOp>(op)) {
    memref = store.getBase(), indices = store.getIndices(), isWrite = true;
    elements = vectorElements(store.getValueToStore().getType());
  } else if (auto gather = dyn_cast<amdgpu::GatherToLDSOp>(op)) {
    // From a bounds-checked buffer the hardware reads zeros past its end.
    if (gather.getSrc().getDefiningOp<amdgpu::FatRawBufferCastOp>())
      return;
    memref = gather.getSrc(), indices = gather.getSrcIndices();
    Type moved = gather.getTransferType();
    int64_t bits = getElementTypeOrSelf(moved).getIntOrFloatBitWidth() *
                   vectorElements(moved);
    elements =
        bits / cast<MemRefType>(memref.getType()).getElementTypeBitWidth();
  } else if (auto copy = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op)) {
    memref = copy.getSrc(), indices = copy.getSrcIndices();
    elements = copy.getDstElements().getZExtValue();
  }
  auto type = memref ? dyn_cast<MemRefType>(memref.getType()) : nullptr;
  if (!type || isWorkgroupMemory(type) || indices.empty())
    return;
  Location loc = op->getLoc();
  Value write = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(isWrite));
  for (auto [d, idx] : llvm::enumerate(indices)) {
    bool last = d + 1 == indices.size();
    Value size = memref::DimOp::create(b, loc, memref, d);
    call(loc, "mla_emu_global_index", {},
         {ctx, write, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(d)),
          i64(loc, idx),
          arith::ConstantOp::create(b, loc,
                                    b.getI64IntegerAttr(last ? elements : 1)),
          i64(loc, size)});
  }
}

LogicalResult
LaneFunctionBuilder::replaceElementwise(Operation *op,
                                        function_ref<Value(Value)> convert) {
  Location loc = op->getLoc();
  Value in = op->getOperand(0);
  auto vt = dyn_cast<VectorType>(in.getType());
  if (!vt) {
    op->getResult(0).replaceAllUsesWith(convert(in));
    return success();
  }
  if (vt.getRank() != 1)
    return op->emitOpError("emu: fp8 conversion of a rank-")
           << vt.getRank() << " vector";
  SmallVector<Value> elements;
  for (int64_t e = 0; e < vt.getDimSize(0); ++e)
    elements.push_back(
        convert(vector::ExtractOp::create(b, loc, in, ArrayRef<int64_t>{e})));
  op->getResult(0).replaceAllUsesWith(vector::FromElementsOp::create(
      b, loc, cast<VectorType>(op->getResult(0).getType()), elements));
  return success();
}

LogicalResult LaneFunctionBuilder::run() {
  aBuf = scratch(32), bBuf = scratch(32), cBuf = scratch(16),
  dBuf = scratch(16), trBuf = scratch(8);
  // wgmma's accumulators: up to 32 f32 a lane (N <= 64).
  wgmmaC = scratch(128), wgmmaD = scratch(128);
  SmallVector<Operation *> ops;
  fn.walk([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : ops) {
    b.setInsertionPoint(op);
    Outcome done;
    checkGlobalBounds(op);
    if (failed(announceLdsAccess(op)) || failed(lowerOp(op, done)))
      return failure();
    if (done == Outcome::Replaced)
      op->erase();
  }
  return eraseLeftovers();
}

LogicalResult LaneFunctionBuilder::lowerOp(Operation *op, Outcome &done) {
  using Lowering =
      LogicalResult (LaneFunctionBuilder::*)(Operation *, Outcome &);
  for (Lowering lower :
       {&LaneFunctionBuilder::lowerWaveOp, &LaneFunctionBuilder::lowerLdsLoadOp,
        &LaneFunctionBuilder::lowerMfmaOp,
        &LaneFunctionBuilder::lowerTensorCoreOp,
        &LaneFunctionBuilder::lowerConversionOp,
        &LaneFunctionBuilder::lowerAsyncCopyOp}) {
    if (failed((this->*lower)(op, done)))
      return failure();
    if (done != Outcome::NotHandled)
      return success();
  }
  if (isa<gpu::GPUDialect, amdgpu::AMDGPUDialect>(op->getDialect()) &&
      !isa<gpu::ReturnOp>(op))
    return op->emitOpError("is not modelled by the emu backend");
  done = Outcome::Kept;
  return success();
}

/// Lane and wave operations: ids, barriers, counters, shuffles.
LogicalResult LaneFunctionBuilder::lowerWaveOp(Operation *op, Outcome &done) {
  Location loc = op->getLoc();
  Type i64Type = b.getI64Type();
  Type f32 = b.getF32Type();
  done = Outcome::Replaced;
  if (auto tid = dyn_cast<gpu::ThreadIdOp>(op)) {
    if (tid.getDimension() != gpu::Dimension::x)
      return op->emitOpError("emu: only x thread ids are modelled");
    op->getResult(0).replaceAllUsesWith(
        index(loc, call(loc, "mla_emu_thread_id", {i64Type}, {ctx})));
    return success();
  }
  // The block's id or the grid's size in one dimension, from the runtime.
  auto gridQuery = [&](StringRef fn, gpu::Dimension which) {
    Value dim = arith::ConstantOp::create(
        b, loc, b.getI64IntegerAttr(static_cast<int64_t>(which)));
    op->getResult(0).replaceAllUsesWith(
        index(loc, call(loc, fn, {i64Type}, {ctx, dim})));
    return success();
  };
  if (auto block = dyn_cast<gpu::BlockIdOp>(op))
    return gridQuery("mla_emu_block_id", block.getDimension());
  if (auto grid = dyn_cast<gpu::GridDimOp>(op))
    return gridQuery("mla_emu_grid_dim", grid.getDimension());
  if (isa<gpu::BarrierOp, amdgpu::LDSBarrierOp>(op)) {
    call(loc, "mla_emu_barrier", {}, {ctx});
    return success();
  }
  if (auto wait = dyn_cast<amdgpu::MemoryCounterWaitOp>(op)) {
    // The load counter (vmcnt) retires LDS DMAs; the emu's other memory
    // operations complete at once, so the other counters have nothing to
    // wait for.
    if (std::optional<int32_t> loads = wait.getLoad())
      call(loc, "mla_emu_wait_loads", {},
           {ctx,
            arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(*loads))});
    return success();
  }
  if (isa<amdgpu::SchedBarrierOp>(op)) {
    // There is no instruction scheduler to constrain.
    return success();
  }
  if (isa<LLVM::FenceOp>(op)) {
    // A lane's memory operations complete in program order, and lanes
    // switch only at the synchronizing operations: memory is already
    // ordered as a fence orders it.
    return success();
  }
  if (isa<NVVM::GriddepcontrolOp>(op)) {
    // sm_90a's programmatic launch: the emu runs a launch's kernels one
    // after the other, each to its end.
    return success();
  }
  if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op)) {
    if (shuffle.getMode() != gpu::ShuffleMode::XOR ||
        !shuffle.getValue().getType().isF32())
      return op->emitOpError("emu: only f32 xor shuffles are modelled");
    Value v = call(loc, "mla_emu_shuffle_xor", {f32},
                   {ctx, shuffle.getValue(), shuffle.getOffset()});
    shuffle.getShuffleResult().replaceAllUsesWith(v);
    shuffle.getValid().replaceAllUsesWith(
        arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
    return success();
  }
  if (auto swizzle = dyn_cast<amdgpu::SwizzleBitModeOp>(op)) {
    // Bit mode with all five lane bits kept and none set: lane ^ xor_mask.
    if (swizzle.getAndMask() != 31 || swizzle.getOrMask() != 0 ||
        swizzle.getXorMask() > 31 || !swizzle.getType().isF32())
      return op->emitOpError(
          "emu: only f32 xor swizzles (and_mask 31, or_mask 0) are modelled");
    Value offset = arith::ConstantOp::create(
        b, loc, b.getI32IntegerAttr(swizzle.getXorMask()));
    swizzle.getResult().replaceAllUsesWith(call(
        loc, "mla_emu_shuffle_xor", {f32}, {ctx, swizzle.getSrc(), offset}));
    return success();
  }
  if (auto swap = dyn_cast<ROCDL::Permlane32SwapOp>(op)) {
    // Lanes 32..63 of `old` trade places with lanes 0..31 of `src`: the
    // first result is old's value in the low half and src's of lane ^ 32
    // in the high half; the second old's of lane ^ 32, then src's own.
    Type i32 = b.getI32Type();
    Value offset = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(32));
    auto ofPartner = [&](Value v) {
      Value bits = arith::BitcastOp::create(b, loc, f32, v);
      return arith::BitcastOp::create(
          b, loc, i32,
          call(loc, "mla_emu_shuffle_xor", {f32}, {ctx, bits, offset}));
    };
    Value oldOfPartner = ofPartner(swap.getOld());
    Value srcOfPartner = ofPartner(swap.getSrc());
    Value lane = arith::RemUIOp::create(
        b, loc, call(loc, "mla_emu_thread_id", {i64Type}, {ctx}),
        arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(64)));
    Value lowHalf = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ult, lane,
        arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(32)));
    Value first =
        arith::SelectOp::create(b, loc, lowHalf, swap.getOld(), srcOfPartner);
    Value second =
        arith::SelectOp::create(b, loc, lowHalf, oldOfPartner, swap.getSrc());
    Value pair = LLVM::PoisonOp::create(b, loc, swap.getRes().getType());
    pair =
        LLVM::InsertValueOp::create(b, loc, pair, first, ArrayRef<int64_t>{0});
    pair =
        LLVM::InsertValueOp::create(b, loc, pair, second, ArrayRef<int64_t>{1});
    swap.getRes().replaceAllUsesWith(pair);
    return success();
  }
  if (auto first = dyn_cast<ROCDL::ReadfirstlaneOp>(op)) {
    if (!first.getType().isInteger(32))
      return op->emitOpError("emu: only i32 readfirstlane is modelled");
    Value v = call(loc, "mla_emu_readfirstlane", {first.getType()},
                   {ctx, first.getSrc()});
    first.getRes().replaceAllUsesWith(v);
    return success();
  }
  done = Outcome::NotHandled;
  return success();
}

/// Wave loads into and out of workgroup memory: the DMA, transposed loads,
/// ldmatrix.
LogicalResult LaneFunctionBuilder::lowerLdsLoadOp(Operation *op,
                                                  Outcome &done) {
  Location loc = op->getLoc();
  done = Outcome::Replaced;
  if (isa<amdgpu::FatRawBufferCastOp>(op)) {
    // Read through by the DMAs (gatherSource); erased after them.
    buffers.push_back(op);
    return keep(done);
  }
  if (auto gather = dyn_cast<amdgpu::GatherToLDSOp>(op)) {
    Type transfer = gather.getTransferType();
    int64_t bytes = 0;
    if (auto vt = dyn_cast<VectorType>(transfer))
      bytes = vt.getNumElements() * vt.getElementTypeBitWidth() / 8;
    else
      bytes = transfer.getIntOrFloatBitWidth() / 8;
    Value size = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(bytes));
    Value src, readable;
    if (failed(gatherSource(gather, size, src, readable)))
      return failure();
    Value dst = address(loc, gather.getDst(), gather.getDstIndices());
    call(loc, "mla_emu_gather_to_lds", {}, {ctx, src, dst, size, readable});
    return success();
  }
  if (auto tr = dyn_cast<amdgpu::TransposeLoadOp>(op)) {
    auto vt = cast<VectorType>(tr.getType());
    int64_t bits = vt.getElementTypeBitWidth();
    if ((bits != 4 && bits != 8 && bits != 16) ||
        vt.getNumElements() * bits != 64)
      return op->emitOpError("emu: only 64-bit transpose loads of 4-, 8- "
                             "or 16-bit elements (ds_read_b64_tr_b4/_b8/"
                             "_b16) are modelled");
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    call(loc, "mla_emu_transpose_load", {},
         {ctx, address(loc, tr.getSrc(), tr.getSrcIndices()),
          arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(bits)),
          address(loc, trBuf, {c0})});
    Value bytes = vector::LoadOp::create(
        b, loc, VectorType::get({8}, b.getI8Type()), trBuf, ValueRange{c0});
    op->getResult(0).replaceAllUsesWith(
        vector::BitCastOp::create(b, loc, vt, bytes));
    return success();
  }
  if (auto ldm = dyn_cast<nvgpu::LdMatrixOp>(op)) {
    // sm_90a ldmatrix: 1, 2 or 4 8 x 8 matrices of 16-bit elements (a
    // lane's 4 bytes of each), or of the same bytes as 8-bit elements,
    // untransposed.
    auto vt = cast<VectorType>(ldm.getType());
    int64_t bits = vt.getElementTypeBitWidth();
    if (vt.getRank() != 2 || bits * vt.getDimSize(1) != 32 ||
        (bits != 16 && (bits != 8 || ldm.getTranspose())))
      return op->emitOpError("emu: only ldmatrix of 16-bit 8 x 8 matrices "
                             "(or their bytes, untransposed) is modelled");
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    call(loc, "mla_emu_ldmatrix", {},
         {ctx, address(loc, ldm.getSrcMemref(), ldm.getIndices()),
          arith::ConstantOp::create(b, loc,
                                    b.getI64IntegerAttr(ldm.getNumTiles())),
          arith::ConstantOp::create(b, loc,
                                    b.getI64IntegerAttr(ldm.getTranspose())),
          address(loc, cBuf, {c0})});
    Value bytes = vector::LoadOp::create(
        b, loc, VectorType::get({4 * vt.getDimSize(0)}, b.getI8Type()), cBuf,
        ValueRange{c0});
    op->getResult(0).replaceAllUsesWith(vector::ShapeCastOp::create(
        b, loc, vt,
        vector::BitCastOp::create(
            b, loc, VectorType::get({vt.getNumElements()}, vt.getElementType()),
            bytes)));
    return success();
  }
  done = Outcome::NotHandled;
  return success();
}

/// gfx950's matrix instructions.
LogicalResult LaneFunctionBuilder::lowerMfmaOp(Operation *op, Outcome &done) {
  Location loc = op->getLoc();
  Type f32 = b.getF32Type();
  done = Outcome::Replaced;
  if (auto mfma = dyn_cast<amdgpu::MFMAOp>(op)) {
    auto aType = dyn_cast<VectorType>(mfma.getSourceA().getType());
    bool isFp8 = mfma.getK() == 128 && aType &&
                 isa<Float8E4M3FNType>(aType.getElementType());
    bool isBf16 = mfma.getK() == 32 && aType &&
                  aType.getElementType().isBF16() &&
                  aType.getNumElements() == 8;
    if (mfma.getM() != 16 || mfma.getN() != 16 || !(isFp8 || isBf16) ||
        mfma.getSourceB().getType() != aType)
      return op->emitOpError("emu: only amdgpu.mfma 16x16x128 on f8E4M3FN "
                             "and 16x16x32 on bf16 are modelled");
    auto bytes = VectorType::get({isFp8 ? 32 : 16}, b.getI8Type());
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    vector::StoreOp::create(
        b, loc, vector::BitCastOp::create(b, loc, bytes, mfma.getSourceA()),
        aBuf, ValueRange{c0});
    vector::StoreOp::create(
        b, loc, vector::BitCastOp::create(b, loc, bytes, mfma.getSourceB()),
        bBuf, ValueRange{c0});
    auto f32x4 = VectorType::get({4}, f32);
    auto i8x16 = VectorType::get({16}, b.getI8Type());
    vector::StoreOp::create(
        b, loc, vector::BitCastOp::create(b, loc, i8x16, mfma.getDestC()), cBuf,
        ValueRange{c0});
    call(loc,
         isFp8 ? "mla_emu_mfma_16x16x128_fp8" : "mla_emu_mfma_16x16x32_bf16",
         {},
         {ctx, address(loc, aBuf, {c0}), address(loc, bBuf, {c0}),
          address(loc, cBuf, {c0}), address(loc, dBuf, {c0})});
    Value d = vector::LoadOp::create(b, loc, i8x16, dBuf, ValueRange{c0});
    op->getResult(0).replaceAllUsesWith(
        vector::BitCastOp::create(b, loc, f32x4, d));
    return success();
  }
  if (auto scaled = dyn_cast<amdgpu::ScaledMFMAOp>(op)) {
    auto aType = dyn_cast<VectorType>(scaled.getSourceA().getType());
    auto bType = dyn_cast<VectorType>(scaled.getSourceB().getType());
    auto formatOf = [](VectorType t) -> int64_t {
      if (t && t.getNumElements() == 32 &&
          isa<Float8E4M3FNType>(t.getElementType()))
        return 0; // emu::MatrixFormat::FP8
      if (t && t.getNumElements() == 32 &&
          isa<Float4E2M1FNType>(t.getElementType()))
        return 4; // emu::MatrixFormat::FP4
      return -1;
    };
    int64_t formatA = formatOf(aType), formatB = formatOf(bType);
    if (scaled.getM() != 16 || scaled.getN() != 16 || scaled.getK() != 128 ||
        formatA < 0 || formatB < 0 ||
        !isa<Float8E8M0FNUType>(scaled.getScalesA().getType()) ||
        !isa<Float8E8M0FNUType>(scaled.getScalesB().getType()))
      return op->emitOpError("emu: only amdgpu.scaled_mfma 16x16x128 on "
                             "fp8/fp4 operands with scalar scales is "
                             "modelled");
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    auto storeBytes = [&](Value v, VectorType t, Value buffer) {
      auto bytes = VectorType::get(
          {t.getNumElements() * t.getElementTypeBitWidth() / 8}, b.getI8Type());
      Value asBytes = vector::BitCastOp::create(b, loc, bytes, v);
      if (bytes.getNumElements() < 32) { // fp4: the upper 16 bytes are unused
        SmallVector<int64_t> twice;
        for (int64_t e = 0; e < 32; ++e)
          twice.push_back(e % 16);
        asBytes = vector::ShuffleOp::create(b, loc, asBytes, asBytes, twice);
      }
      vector::StoreOp::create(b, loc, asBytes, buffer, ValueRange{c0});
    };
    storeBytes(scaled.getSourceA(), aType, aBuf);
    storeBytes(scaled.getSourceB(), bType, bBuf);
    auto f32x4 = VectorType::get({4}, f32);
    auto i8x16 = VectorType::get({16}, b.getI8Type());
    vector::StoreOp::create(
        b, loc, vector::BitCastOp::create(b, loc, i8x16, scaled.getDestC()),
        cBuf, ValueRange{c0});
    auto scaleByte = [&](Value s) {
      return arith::BitcastOp::create(b, loc, b.getI8Type(), s).getResult();
    };
    auto i64 = [&](int64_t v) {
      return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v))
          .getResult();
    };
    call(loc, "mla_emu_scaled_mfma_16x16x128", {},
         {ctx, i64(formatA), i64(formatB), address(loc, aBuf, {c0}),
          address(loc, bBuf, {c0}), scaleByte(scaled.getScalesA()),
          scaleByte(scaled.getScalesB()), address(loc, cBuf, {c0}),
          address(loc, dBuf, {c0})});
    Value d = vector::LoadOp::create(b, loc, i8x16, dBuf, ValueRange{c0});
    op->getResult(0).replaceAllUsesWith(
        vector::BitCastOp::create(b, loc, f32x4, d));
    return success();
  }
  done = Outcome::NotHandled;
  return success();
}

/// sm_90a's tensor-core instructions.
LogicalResult LaneFunctionBuilder::lowerTensorCoreOp(Operation *op,
                                                     Outcome &done) {
  Location loc = op->getLoc();
  Type f32 = b.getF32Type();
  done = Outcome::Replaced;
  if (auto mma = dyn_cast<NVVM::MmaOp>(op)) {
    // sm_90a: mma.sync m16n8k16 bf16 or f16 (4 + 2 i32 registers, 4 f32).
    NVVM::MMAShapeAttr shape = mma.getShape();
    auto type = mma.getMultiplicandAPtxType();
    if (shape.getM() != 16 || shape.getN() != 8 || shape.getK() != 16 ||
        (type != NVVM::MMATypes::bf16 && type != NVVM::MMATypes::f16) ||
        mma.getMultiplicandBPtxType() != type ||
        mma.getOperandA().size() != 4 || mma.getOperandB().size() != 2 ||
        mma.getOperandC().size() != 4)
      return op->emitOpError(
          "emu: only bf16 and f16 mma.sync m16n8k16 are modelled");
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    auto store = [&](ValueRange operands, Value buffer) {
      // f16 pairs (vector<2xf16>) travel as the i32 registers they are.
      SmallVector<Value> regs;
      for (Value r : operands) {
        if (isa<VectorType>(r.getType()))
          r = vector::ExtractOp::create(
              b, loc,
              vector::BitCastOp::create(
                  b, loc, VectorType::get({1}, b.getI32Type()), r),
              ArrayRef<int64_t>{0});
        regs.push_back(r);
      }
      auto vt = VectorType::get({int64_t(regs.size())}, regs[0].getType());
      Value v = vector::FromElementsOp::create(b, loc, vt, regs);
      auto bytes = VectorType::get({4 * int64_t(regs.size())}, b.getI8Type());
      vector::StoreOp::create(b, loc,
                              vector::BitCastOp::create(b, loc, bytes, v),
                              buffer, ValueRange{c0});
    };
    store(mma.getOperandA(), aBuf);
    store(mma.getOperandB(), bBuf);
    store(mma.getOperandC(), cBuf);
    call(loc, "mla_emu_mma_sync_16x8x16", {},
         {ctx, address(loc, aBuf, {c0}), address(loc, bBuf, {c0}),
          address(loc, cBuf, {c0}), address(loc, dBuf, {c0}),
          arith::ConstantOp::create(
              b, loc, b.getI64IntegerAttr(type == NVVM::MMATypes::f16))});
    auto i8x16 = VectorType::get({16}, b.getI8Type());
    Value d = vector::BitCastOp::create(
        b, loc, VectorType::get({4}, f32),
        vector::LoadOp::create(b, loc, i8x16, dBuf, ValueRange{c0}));
    Value result = LLVM::UndefOp::create(b, loc, mma.getType());
    for (int64_t i = 0; i < 4; ++i)
      result = LLVM::InsertValueOp::create(
          b, loc, result,
          vector::ExtractOp::create(b, loc, d, ArrayRef<int64_t>{i}), i);
    op->getResult(0).replaceAllUsesWith(result);
    return success();
  }
  if (auto wgmma = dyn_cast<NVVM::WgmmaMmaAsyncOp>(op)) {
    // sm_90a wgmma m64nNk16 bf16 x bf16 -> f32 from shared-memory
    // descriptors: each lane computes its own accumulators when it
    // issues it (the emu's wgmma completes at once; the fences and the
    // group's commit and wait are no-ops).
    NVVM::MMAShapeAttr shape = wgmma.getShape();
    if (wgmma.getTypeA() != NVVM::WGMMATypes::bf16 ||
        wgmma.getTypeB() != NVVM::WGMMATypes::bf16 ||
        wgmma.getTypeD() != NVVM::WGMMATypes::f32 || shape.getM() != 64 ||
        shape.getK() != 16 || shape.getN() % 8 != 0 || shape.getN() > 64 ||
        wgmma.getScaleA() != NVVM::WGMMAScaleIn::one ||
        wgmma.getScaleB() != NVVM::WGMMAScaleIn::one ||
        wgmma.getLayoutB() != NVVM::MMALayout::col)
      return op->emitOpError("emu: only wgmma m64nNk16 bf16 x bf16 -> f32 "
                             "(N <= 64, unscaled, B K-major) is modelled");
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    int64_t count = shape.getN() / 2;
    SmallVector<Value> in;
    for (int64_t i = 0; i < count; ++i)
      in.push_back(LLVM::ExtractValueOp::create(b, loc, wgmma.getInouts(), i));
    auto f32xN = VectorType::get({count}, f32);
    auto bytes = VectorType::get({4 * count}, b.getI8Type());
    vector::StoreOp::create(
        b, loc,
        vector::BitCastOp::create(
            b, loc, bytes, vector::FromElementsOp::create(b, loc, f32xN, in)),
        wgmmaC, ValueRange{c0});
    auto i64 = [&](int64_t v) {
      return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v))
          .getResult();
    };
    call(loc, "mla_emu_wgmma_bf16", {},
         {ctx, wgmma.getDescriptorA(), wgmma.getDescriptorB(),
          i64(shape.getN()), i64(wgmma.getLayoutA() == NVVM::MMALayout::col),
          i64(wgmma.getScaleD() == NVVM::WGMMAScaleOut::one),
          address(loc, wgmmaC, {c0}), address(loc, wgmmaD, {c0})});
    Value d = vector::BitCastOp::create(
        b, loc, f32xN,
        vector::LoadOp::create(b, loc, bytes, wgmmaD, ValueRange{c0}));
    Value result = LLVM::UndefOp::create(b, loc, wgmma.getType());
    for (int64_t i = 0; i < count; ++i)
      result = LLVM::InsertValueOp::create(
          b, loc, result,
          vector::ExtractOp::create(b, loc, d, ArrayRef<int64_t>{i}), i);
    op->getResult(0).replaceAllUsesWith(result);
    return success();
  }
  if (isa<NVVM::WgmmaFenceAlignedOp, NVVM::WgmmaGroupSyncAlignedOp,
          NVVM::WgmmaWaitGroupSyncOp, NVVM::FenceProxyOp>(op)) {
    // Orderings the emu's immediate wgmma already has.
    return success();
  }
  done = Outcome::NotHandled;
  return success();
}

/// The chips' conversions, byte permutes and intrinsics.
LogicalResult LaneFunctionBuilder::lowerConversionOp(Operation *op,
                                                     Outcome &done) {
  Location loc = op->getLoc();
  Type f32 = b.getF32Type();
  done = Outcome::Replaced;
  if (auto ext = dyn_cast<amdgpu::ScaledExtPackedOp>(op)) {
    // Two E2M1 values of byte `index` of a 32-bit word, times the f32
    // scale, as the chip's v_cvt_scalef32_pk_*_fp4 computes them.
    auto srcType = dyn_cast<VectorType>(ext.getSource().getType());
    if (!srcType || srcType.getNumElements() != 8 ||
        !isa<Float4E2M1FNType>(srcType.getElementType()))
      return op->emitOpError("emu: only amdgpu.scaled_ext_packed of "
                             "vector<8xf4E2M1FN> is modelled");
    auto i32x1 = VectorType::get({1}, b.getI32Type());
    auto fromWord = ext.getSource().getDefiningOp<vector::BitCastOp>();
    Value word = fromWord && fromWord.getSource().getType() == i32x1
                     ? fromWord.getSource()
                     : vector::BitCastOp::create(b, loc, i32x1, ext.getSource())
                           .getResult();
    Value bits = vector::ExtractOp::create(b, loc, word, ArrayRef<int64_t>{0});
    auto resultType = cast<VectorType>(ext.getType());
    SmallVector<Value> values;
    for (int64_t e = 0; e < 2; ++e) {
      Value nibble = arith::ConstantOp::create(
          b, loc, b.getI64IntegerAttr(2 * ext.getIndex() + e));
      Value value = call(loc, "mla_emu_scaled_fp4_to_f32", {f32},
                         {bits, nibble, ext.getScale()});
      if (resultType.getElementType() != f32)
        value =
            arith::TruncFOp::create(b, loc, resultType.getElementType(), value);
      values.push_back(value);
    }
    op->getResult(0).replaceAllUsesWith(
        vector::FromElementsOp::create(b, loc, resultType, values));
    op->erase();
    if (fromWord && fromWord->use_empty())
      fromWord->erase();
    return keep(done);
  }
  if (auto trunc = dyn_cast<arith::TruncFOp>(op)) {
    if (!isa<Float8E4M3FNType>(getElementTypeOrSelf(trunc.getType())))
      return keep(done);
    // The hardware's f32 -> fp8 conversion, element by element.
    Type fp8 = getElementTypeOrSelf(trunc.getType());
    if (failed(replaceElementwise(op, [&](Value x) {
          Value byte =
              call(loc, "mla_emu_cvt_f32_to_fp8", {b.getI8Type()}, {x});
          return arith::BitcastOp::create(b, loc, fp8, byte).getResult();
        })))
      return failure();
    return success();
  }
  if (auto ext = dyn_cast<arith::ExtFOp>(op)) {
    if (!isa<Float8E4M3FNType>(getElementTypeOrSelf(ext.getIn().getType())))
      return keep(done);
    // The hardware's fp8 -> f32 conversion, element by element.
    if (failed(replaceElementwise(op, [&](Value x) {
          Value byte = arith::BitcastOp::create(b, loc, b.getI8Type(), x);
          return call(loc, "mla_emu_cvt_fp8_to_f32", {f32}, {byte});
        })))
      return failure();
    return success();
  }
  if (auto prmt = dyn_cast<NVVM::PermuteOp>(op)) {
    // sm_90a prmt, index mode: result byte i is byte selector.nibble(i)
    // & 7 of {hi, lo}, or that byte's sign bit replicated if the
    // nibble's bit 3 is set.
    if (prmt.getMode() != NVVM::PermuteMode::DEFAULT || !prmt.getHi())
      return op->emitOpError("emu: only prmt's index mode is modelled");
    op->getResult(0).replaceAllUsesWith(
        call(loc, "mla_emu_prmt", {b.getI32Type()},
             {prmt.getLo(), prmt.getHi(), prmt.getSelector()}));
    return success();
  }
  if (auto cvt = dyn_cast<NVVM::ConvertF8x2ToF16x2Op>(op)) {
    // sm_90a: cvt.rn.f16x2.e4m3x2, exact: each code as the emu's fp8.
    if (!isa<Float8E4M3FNType>(cvt.getSrcType()) || cvt.getRelu())
      return op->emitOpError("emu: only e4m3 pairs without relu are "
                             "modelled");
    SmallVector<Value> halves;
    for (int64_t e = 0; e < 2; ++e) {
      Value code =
          vector::ExtractOp::create(b, loc, cvt.getSrc(), ArrayRef<int64_t>{e});
      Value x = call(loc, "mla_emu_cvt_fp8_to_f32", {f32}, {code});
      halves.push_back(arith::TruncFOp::create(b, loc, b.getF16Type(), x));
    }
    op->getResult(0).replaceAllUsesWith(vector::FromElementsOp::create(
        b, loc, cast<VectorType>(cvt.getType()), halves));
    return success();
  }
  if (auto intr = dyn_cast<LLVM::CallIntrinsicOp>(op)) {
    StringRef name = intr.getIntrin();
    Value x = intr.getArgs()[0];
    Value y;
    if (name == "llvm.amdgcn.exp2")
      y = math::Exp2Op::create(b, loc, x);
    else if (name == "llvm.amdgcn.log")
      y = math::Log2Op::create(b, loc, x);
    else
      return op->emitOpError("emu: intrinsic ") << name << " is not modelled";
    op->getResult(0).replaceAllUsesWith(y);
    return success();
  }
  done = Outcome::NotHandled;
  return success();
}

/// sm_90a's asynchronous copies and mbarriers.
LogicalResult LaneFunctionBuilder::lowerAsyncCopyOp(Operation *op,
                                                    Outcome &done) {
  Location loc = op->getLoc();
  Type i64Type = b.getI64Type();
  done = Outcome::Replaced;
  if (auto copy = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op)) {
    // sm_90a cp.async: the bytes land in shared memory at the wait that
    // retires their group (the emu checks that wait).
    if (copy.getSrcElements())
      return op->emitOpError("emu: cp.async with a source size is not "
                             "modelled");
    auto dstType = cast<MemRefType>(copy.getDst().getType());
    int64_t bytes = copy.getDstElements().getZExtValue() *
                    dstType.getElementTypeBitWidth() / 8;
    call(loc, "mla_emu_async_copy", {},
         {ctx, address(loc, copy.getSrc(), copy.getSrcIndices()),
          address(loc, copy.getDst(), copy.getDstIndices()),
          arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(bytes))});
    if (!copy.getAsyncToken().use_empty())
      return op->emitOpError("emu: cp.async tokens are not modelled (the "
                             "kernels group copies by nvvm.cp.async ops)");
    return success();
  }
  if (isa<NVVM::CpAsyncCommitGroupOp>(op)) {
    call(loc, "mla_emu_async_commit", {}, {ctx});
    return success();
  }
  if (auto wait = dyn_cast<NVVM::CpAsyncWaitGroupOp>(op)) {
    call(loc, "mla_emu_async_wait", {},
         {ctx,
          arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(wait.getN()))});
    return success();
  }
  if (auto init = dyn_cast<NVVM::MBarrierInitOp>(op)) {
    // sm_90a mbarriers (the bulk copies' completion): state the runtime
    // keeps per barrier address; a wait yields until its phase completes.
    if (init.getPredicate())
      return op->emitOpError("emu: a predicated mbarrier.init is not "
                             "modelled");
    call(loc, "mla_emu_mbarrier_init", {},
         {ctx, pointerAddress(loc, init.getAddr()),
          arith::ExtUIOp::create(b, loc, i64Type, init.getCount())});
    return success();
  }
  if (auto inval = dyn_cast<NVVM::MBarrierInvalOp>(op)) {
    call(loc, "mla_emu_mbarrier_inval", {},
         {ctx, pointerAddress(loc, inval.getAddr())});
    return success();
  }
  if (auto arrive = dyn_cast<NVVM::MBarrierArriveExpectTxOp>(op)) {
    if (arrive.getPredicate() || arrive.getRes() ||
        arrive.getScope() != NVVM::MemScopeKind::CTA)
      return op->emitOpError("emu: only mbarrier.arrive.expect_tx of the "
                             "CTA without a predicate or state is "
                             "modelled");
    call(loc, "mla_emu_mbarrier_arrive_expect_tx", {},
         {ctx, pointerAddress(loc, arrive.getAddr()),
          arith::ExtUIOp::create(b, loc, i64Type, arrive.getTxcount())});
    return success();
  }
  if (auto wait = dyn_cast<NVVM::MBarrierTryWaitParityOp>(op)) {
    call(loc, "mla_emu_mbarrier_wait_parity", {},
         {ctx, pointerAddress(loc, wait.getAddr()),
          arith::ExtUIOp::create(b, loc, i64Type, wait.getPhase())});
    return success();
  }
  if (isa<NVVM::FenceMbarrierInitOp>(op)) {
    // The emu's mbarrier.init is visible to every lane at once.
    return success();
  }
  if (auto bulk = dyn_cast<NVVM::CpAsyncBulkGlobalToSharedClusterOp>(op)) {
    // sm_90a cp.async.bulk: the source is read now, the bytes land in
    // shared memory when the mbarrier's phase completes (an L2 cache
    // hint changes no value).
    if (bulk.getMulticastMask())
      return op->emitOpError("emu: cp.async.bulk with a multicast mask is "
                             "not modelled");
    call(loc, "mla_emu_bulk_copy", {},
         {ctx, pointerAddress(loc, bulk.getSrcMem()),
          pointerAddress(loc, bulk.getDstMem()),
          arith::ExtUIOp::create(b, loc, i64Type, bulk.getSize()),
          pointerAddress(loc, bulk.getMbar())});
    return success();
  }
  if (auto intToPtr = dyn_cast<LLVM::IntToPtrOp>(op)) {
    // Pointers the NVVM ops take; erased once those are.
    pointerCasts.push_back(intToPtr);
    return keep(done);
  }
  done = Outcome::NotHandled;
  return success();
}
LogicalResult LaneFunctionBuilder::eraseLeftovers() {
  for (LLVM::IntToPtrOp pointer : pointerCasts) {
    if (!pointer.use_empty())
      return pointer.emitOpError("emu: a pointer used other than by the "
                                 "modelled NVVM operations");
    pointer.erase();
  }
  for (Operation *op : buffers) {
    if (!op->use_empty())
      return op->emitOpError("emu: a buffer read other than by DMA is not "
                             "modelled");
    op->erase();
  }
  // gpu.return -> func.return.
  fn.walk([&](gpu::ReturnOp ret) {
    OpBuilder rb(ret);
    func::ReturnOp::create(rb, ret.getLoc());
    ret.erase();
  });
  return success();
}

struct MLAGPUToEmuPass
    : public mla::impl::MLAGPUToEmuPassBase<MLAGPUToEmuPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SmallVector<gpu::GPUFuncOp> kernels;
    module.walk([&](gpu::GPUFuncOp fn) {
      if (fn.isKernel())
        kernels.push_back(fn);
    });
    if (kernels.empty()) {
      module.emitError("emu: no gpu kernel to convert");
      return signalPassFailure();
    }

    // The emu module holds only lane functions: the host code that launches
    // them is the emu runtime's.
    SmallVector<Operation *> hostOps;
    for (Operation &op : module.getBody()->getOperations())
      if (!isa<gpu::GPUModuleOp>(op))
        hostOps.push_back(&op);

    OpBuilder mb(ctx);
    mb.setInsertionPointToEnd(module.getBody());
    for (gpu::GPUFuncOp kernel : kernels) {
      // Inputs: the kernel's arguments, its workgroup buffers, the context.
      Block &entry = kernel.getBody().front();
      SmallVector<Type> inputs(entry.getArgumentTypes());
      inputs.push_back(mb.getI64Type());
      auto fn = func::FuncOp::create(mb, kernel.getLoc(),
                                     (kernel.getName() + "_lane").str(),
                                     mb.getFunctionType(inputs, {}));
      fn->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                  mb.getUnitAttr());
      if (auto launch = kernel->getAttr(MLADialect::kLaunchAttrName))
        fn->setAttr(MLADialect::kLaunchAttrName, launch);
      fn.getBody().takeBody(kernel.getBody());
      Value ctxArg =
          fn.getBody().front().addArgument(mb.getI64Type(), kernel.getLoc());
      if (failed(LaneFunctionBuilder(module, fn, ctxArg).run()))
        return signalPassFailure();
    }
    for (Operation *op : hostOps)
      op->erase();
    module.walk([&](gpu::GPUModuleOp m) { m.erase(); });
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());

    // Host memory has no GPU address spaces.
    AttrTypeReplacer replacer;
    replacer.addReplacement([](gpu::AddressSpaceAttr) -> Attribute {
      return Attribute();
    });
    replacer.addReplacement([&](MemRefType type) -> Type {
      if (!isa_and_nonnull<gpu::AddressSpaceAttr>(type.getMemorySpace()))
        return type;
      return MemRefType::get(type.getShape(), type.getElementType(),
                             type.getLayout());
    });
    replacer.recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true,
                                          /*replaceLocs=*/false,
                                          /*replaceTypes=*/true);
  }
};
} // namespace
