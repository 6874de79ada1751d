//===- ToGPU.cpp - split-level ops -> gfx950 kernels (L2 -> L3) -----------===//
//
// Distribution: every mla.partial_decode / mla.combine becomes a kernel in a
// `gpu.module` for the target chip, and the host op records which kernel
// runs it (`mla.kernel`) and how (`mla.launch` on the kernel: grid, block,
// LDS bytes, arguments). The host ops stay as the reference semantics; the
// runtime launches the kernels.
//
// The partial kernel: one workgroup per (work item, block of 64 query rows),
// 4 waves; the (token, head) rows of a block of heads_per_workgroup heads go
// in groups of 16 to the waves, token-major, so a workgroup reads each KV
// tile once for up to 64 rows (all heads of a token when H <= 64, all 4
// tokens when H = 16). Waves past the rows repeat the last group and write
// nothing, so control flow stays uniform for the barriers; blocks past them
// return at once. A work item's H/16 row blocks run in consecutive dispatch
// slots of one XCD, sharing its L2, so a cache byte comes from HBM once
// (docs/pipelines.md). KV tiles move global -> LDS by DMA
// (amdgpu.gather_to_lds, 16 bytes per lane; mxfp4's scales in 2-byte units)
// into two stages, the next tile in flight while the current one is used;
// the DMA is the only read of the cache, and each byte serves as key (all
// Dqk columns) and value (the first Dv). Per format (PartialKernel::isBF16 and
// isMXFP4 say how): fp8 and mxfp4 run QK as scaled MFMAs at the MFMA level,
// Q resident in registers in two fp8 parts with per-head power-of-two
// scales (mxfp4 adds K's block scales); fp8 runs PV in fp8 with P as p·448
// in two parts, the lo part scaled by 2^-4 in the MFMA (1/448 folded into
// the final normalization); mxfp4 runs PV in bf16 on V decoded into LDS;
// bf16 runs bf16 throughout. The two tile contractions
// are wave-level `vector.contract`s on tiles read from LDS (2-D vectors are
// wave tiles at this level; 1-D vectors and scalars are per-lane); the
// softmax is per-lane code over the score tile in LDS. mla-lower-to-mfma
// distributes the wave tiles over the lanes in the MFMA layouts.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Target/KnownTargets.h"
#include "mla/Transforms/Passes.h"

#include "InputLevel.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#include <cmath>

namespace mla {
#define GEN_PASS_DEF_MLATOGPUPASS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kWaveSize = 64;
constexpr int64_t kWaves = 4;
constexpr int64_t kThreads = kWaveSize * kWaves;
constexpr int64_t kHeadsPerGroup = 16;
constexpr int64_t kDmaBytes = 16; // per lane and gather_to_lds
constexpr double kFp8Max = 448.0;

/// Small arithmetic vocabulary over index and f32 values.
struct KernelBuilder {
  OpBuilder &b;
  Location loc;

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivUIOp::create(b, loc, x, y); }
  Value rem(Value x, Value y) { return arith::RemUIOp::create(b, loc, x, y); }
  Value minS(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value fadd(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value fmul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value fmax(Value x, Value y) {
    return arith::MaximumFOp::create(b, loc, x, y);
  }
  Value load(Value mem, ValueRange indices) {
    return memref::LoadOp::create(b, loc, mem, indices);
  }
  Value loadIndex(Value mem, ValueRange indices) {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                      load(mem, indices));
  }
  /// Butterfly reduction over the lanes `lane ^ offset` for each offset.
  Value laneReduce(Value v, ArrayRef<int64_t> offsets, bool isMax) {
    Value width = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(64));
    for (int64_t offset : offsets) {
      Value off = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(offset));
      Value other = gpu::ShuffleOp::create(b, loc, v, off, width,
                                           gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      v = isMax ? fmax(v, other) : fadd(v, other);
    }
    return v;
  }
};

MemRefType ldsType(ArrayRef<int64_t> shape, Type elem) {
  auto space = gpu::AddressSpaceAttr::get(elem.getContext(),
                                          gpu::AddressSpace::Workgroup);
  return MemRefType::get(shape, elem, MemRefLayoutAttrInterface(), space);
}

MemRefType globalType(ArrayRef<int64_t> shape, Type elem) {
  auto space =
      gpu::AddressSpaceAttr::get(elem.getContext(), gpu::AddressSpace::Global);
  return MemRefType::get(shape, elem, MemRefLayoutAttrInterface(), space);
}

/// Builds the partial-decode kernel for one op's shapes.
class PartialKernel {
public:
  /// `xcds`: the chiplets the chip deals workgroups to (1 when unknown).
  /// `xcds` and `ldsLimit` (bytes of LDS a workgroup may use) come from the
  /// target.
  PartialKernel(PartialDecodeOp op, int64_t xcds, int64_t ldsLimit,
                StringRef testHazard = "")
      : op(op), xcds(xcds), ldsLimit(ldsLimit), testHazard(testHazard.str()) {
    numHeads = op.getNumHeads();
    headsPerWg = op.getConfig().getHeadsPerWorkgroup();
    qkDim = op.getQKHeadDim();
    vDim = op.getVHeadDim();
    paddedQK = (qkDim + 127) / 128 * 128;
    kTileRows = op.getConfig().getKvTile();
    kStages = op.getConfig().getPipelineStages();
    wavesPerWg = op.getConfig().getWavesPerWorkgroup();
  }

  /// Workgroups (row blocks) per work item: each head block's q_len·hpw
  /// rows for the longest q_len, 64 at a time; blocks past a sequence's rows
  /// return at once.
  int64_t blocksPerItem() const {
    int64_t groups = kMaxQueryTokens * headsPerWg / kHeadsPerGroup;
    return numHeads / headsPerWg * ((groups + kWaves - 1) / kWaves);
  }

  /// Why the kernel cannot be built for this op, if it cannot.
  std::optional<std::string> unsupported() {
    if (wavesPerWg != kWaves)
      return "the partial kernel runs " + std::to_string(kWaves) +
             " waves (16 query rows each); the config asks for "
             "waves_per_workgroup = " + std::to_string(wavesPerWg);
    if (numHeads % headsPerWg != 0 || headsPerWg % kHeadsPerGroup != 0)
      return "heads_per_workgroup = " + std::to_string(headsPerWg) +
             " must be a multiple of 16 dividing H = " +
             std::to_string(numHeads);
    if (isMXFP4() && (kTileRows != 64 || qkDim % 32 != 0))
      return std::string("the mxfp4 kernel needs kv_tile = 64 and Dqk a "
                         "multiple of 32");
    if (qkDim % 64 != 0 || vDim % 16 != 0)
      return std::string("gfx950 kernels need Dqk a multiple of 64 and Dv a "
                         "multiple of 16");
    // A PV MFMA sums 64 (fp8) or 32 (bf16) tile rows.
    int64_t rowMultiple = isBF16() ? 32 : 64;
    if (kTileRows % rowMultiple != 0 ||
        tileBytes() % (isMXFP4() ? kWaveSize * kDmaBytes
                                 : kThreads * kDmaBytes))
      return "kv_tile = " + std::to_string(kTileRows) +
             " must be a multiple of " + std::to_string(rowMultiple) +
             " whose tile bytes split into 16-byte loads of 256 lanes";
    if (kStages < 2)
      return std::string("the partial kernel needs pipeline_stages >= 2");
    if (ldsBytes() > ldsLimit)
      return "the partial kernel needs " + std::to_string(ldsBytes()) +
             " bytes of LDS, more than the target's " +
             std::to_string(ldsLimit);
    return std::nullopt;
  }

  /// LDS bytes of the kernel's workgroup buffers.
  int64_t ldsBytes() const {
    return kStages * tileBytes() +                       // KV tiles
           kWaves * kHeadsPerGroup * kTileRows * 4 +     // scores, f32
           kWaves * 2 * kHeadsPerGroup * kTileRows +     // P: fp8 hi/lo, bf16
           kWaves * kHeadsPerGroup * 4 +                 // per-row factors
           (isMXFP4() ? kVHalfRows * vDim * 2 +          // mxfp4: V in bf16
                            kStages * scaleLdsBytes()    // and the scales
                      : 0);
  }

  gpu::GPUFuncOp build(OpBuilder &moduleBuilder, StringRef name);

private:
  void emitBody(OpBuilder &b, gpu::GPUFuncOp func);
  /// mxfp4: the wave's Q as scaled-MFMA A fragments, two fp8 parts.
  struct ScaledQFragments {
    SmallVector<Value> hi, lo; // one vector<32xf8E4M3FN> per 128-wide K chunk
    Value scaleHi, scaleLo;    // E8M0 2^e and 2^(e-4) of the lane's head
  };
  ScaledQFragments buildScaledQFragments(OpBuilder &b, KernelBuilder &k,
                                         Value q, Value tokenRow,
                                         Value headGroup, Value lane);
  /// fp8: a lane's 32 K bytes of a K tile row for the scaled MFMA, runs
  /// `chunkBase` + 16·kg + j and `chunkBase` + 64 + 16·kg + j (zero past
  /// Dqk).
  Value fp8Fragment(OpBuilder &b, KernelBuilder &k, Value kvLds, Value stage,
                    Value tileRow, int64_t chunkBase, Value laneK);
  void emitScaledQK(OpBuilder &b, KernelBuilder &k,
                    const ScaledQFragments &qFrags, Value kvLds,
                    Value scaleLds, Value sLds, Value wave, Value lane,
                    Value stage);
  Value emitDecodedPV(OpBuilder &b, KernelBuilder &k, Value pLds, Value kvLds,
                      Value scaleLds, Value vLds, Value wave, Value tid,
                      Value stage, Value acc, ArrayAttr pvMaps,
                      ArrayAttr iters);
  /// mxfp4: the E8M0 scale of (tile row, 32-element block) in the LDS copy
  /// of the tile's scales (see scaleLdsBytes).
  Value loadTileScale(KernelBuilder &k, Value scaleLds, Value stage,
                      Value tileRow, Value block);

  mutable PartialDecodeOp op; // its accessors are not const
  /// bf16 caches run bf16 MFMAs on bf16 Q, KV and P; fp8 caches QK as scaled
  /// fp8 MFMAs (Q in two fp8 parts, K as it is) and PV in fp8 with P in two
  /// fp8 parts.
  ///
  /// mxfp4 caches: QK as scaled MFMAs with the packed E2M1 K tile and its
  /// E8M0 block scales fed to the instruction (Q in two fp8 parts); PV in
  /// bf16, V decoded exactly (E2M1·2^e fits bf16) 32 rows at a time into
  /// LDS, P in bf16.
  bool isBF16() const { return op.getKvFormat() == KVFormat::bf16; }
  bool isMXFP4() const { return op.getKvFormat() == KVFormat::mxfp4; }
  /// Bytes of one element of the Q/KV memrefs (mxfp4: one packed byte).
  int64_t elemBytes() const { return isBF16() ? 2 : 1; }
  Type elemType(Builder &b) const {
    return isBF16() ? Type(b.getBF16Type()) : b.getType<Float8E4M3FNType>();
  }
  /// P and the PV MFMAs: fp8 (two parts) for fp8, bf16 otherwise.
  Type pvType(Builder &b) const {
    return isMXFP4() ? Type(b.getBF16Type()) : elemType(b);
  }
  /// A cache row in bytes: bf16 2 per element, fp8 1, mxfp4 packed 1/2.
  int64_t rowBytes() const {
    return isBF16() ? 2 * qkDim : isMXFP4() ? qkDim / 2 : qkDim;
  }
  int64_t tileBytes() const { return kTileRows * rowBytes(); }
  static constexpr int64_t kVHalfRows = 32;
  /// mxfp4: a tile's E8M0 scales move to LDS by DMA in 2-byte units (rows
  /// are 18 bytes, so wider loads would not stay aligned); the DMA widens
  /// each unit to a 4-byte LDS word.
  int64_t scaleUnitsPerRow() const { return qkDim / 64; }
  int64_t scaleUnitsPerTile() const { return kTileRows * scaleUnitsPerRow(); }
  int64_t scaleLdsBytes() const { return 4 * scaleUnitsPerTile(); }
  /// The cache's element type in memory (mxfp4: packed bytes).
  Type kvMemType(Builder &b) const {
    return isMXFP4() ? Type(b.getI8Type()) : elemType(b);
  }
  /// Workgroup memory: KV tiles, scores, P, per-row factors (and the
  /// decoded V half tile for mxfp4).
  SmallVector<Type> ldsTypes(Builder &b) const {
    Type f32 = b.getF32Type();
    SmallVector<Type> types;
    types.append({
        ldsType({kStages, kTileRows, rowBytes() / elemBytes()},
                kvMemType(b)),
        ldsType({kWaves, kHeadsPerGroup, kTileRows}, f32),
        pvType(b).isBF16()
            ? ldsType({kWaves, 1, kHeadsPerGroup, kTileRows}, pvType(b))
            : ldsType({kWaves, 2, kHeadsPerGroup, kTileRows}, pvType(b)),
        ldsType({kWaves, kHeadsPerGroup}, f32)});
    if (isMXFP4()) {
      types.push_back(ldsType({kVHalfRows, vDim}, b.getBF16Type()));
      types.push_back(ldsType({kStages, scaleLdsBytes()},
                              b.getType<Float8E8M0FNUType>()));
    }
    return types;
  }
  SmallVector<StringRef> argNames() const {
    SmallVector<StringRef> names = {arg::kQ, arg::kKV};
    if (!isBF16())
      names.push_back(arg::kKVScale);
    names.append({arg::kQoIndptr, arg::kKVIndptr, arg::kWorkItems,
                  arg::kPartialOut, arg::kPartialLse, arg::kItemIndptr,
                  arg::kOut, arg::kLse});
    return names;
  }

  int64_t xcds, ldsLimit;
  /// Testing only: the synchronization bug to build in (mla-to-gpu
  /// test-hazard), or "".
  std::string testHazard;
  int64_t numHeads, qkDim, vDim, paddedQK;
  int64_t kTileRows, kStages, headsPerWg, wavesPerWg; // from the config
};

/// The size symbol of a kernel argument's leading dynamic dimension, as the
/// runtime names it (docs/artifact.md).
StringRef leadingDimSymbol(std::string_view arg) {
  if (arg == arg::kQ || arg == arg::kOut || arg == arg::kLse)
    return dim::kTokens;
  if (arg == arg::kKV || arg == arg::kKVScale)
    return dim::kKVRows;
  if (arg == arg::kQoIndptr || arg == arg::kKVIndptr || arg == arg::kItemIndptr)
    return dim::kSeqsPlusOne;
  return dim::kWorkItems; // work_items, partial_out, partial_lse
}

/// `mla.launch`: how the runtime launches a kernel and binds its arguments
/// by name; `arg_dims` gives each memref argument's shape with the leading
/// dynamic size as a symbol; `extra` adds kernel-specific entries.
DictionaryAttr launchAttr(Builder &b, ArrayRef<std::string> grid,
                          int64_t ldsBytes, ArrayRef<StringRef> names,
                          TypeRange argTypes,
                          ArrayRef<NamedAttribute> extra = {}) {
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
      b.getNamedAttr("block", b.getI64ArrayAttr({kThreads, 1, 1})),
      b.getNamedAttr("lds_bytes", b.getI64IntegerAttr(ldsBytes)),
      b.getNamedAttr("args", b.getStrArrayAttr(names)),
      b.getNamedAttr("arg_dims", b.getArrayAttr(dims))};
  entries.append(extra.begin(), extra.end());
  return b.getDictionaryAttr(entries);
}

gpu::GPUFuncOp PartialKernel::build(OpBuilder &mb, StringRef name) {
  MLIRContext *ctx = op.getContext();
  Builder b(ctx);
  Type bf16 = b.getBF16Type(), f32 = b.getF32Type(), i32 = b.getI32Type();
  int64_t dyn = ShapedType::kDynamic;
  SmallVector<Type> args = {
      MemRefType::get({dyn, numHeads, qkDim}, bf16),     // q
      globalType({dyn, isMXFP4() ? qkDim / 2 : qkDim}, kvMemType(b))}; // kv
  if (isMXFP4())
    args.push_back(globalType({dyn, qkDim / 32},
                              b.getType<Float8E8M0FNUType>())); // kv_scale
  else if (!isBF16())
    args.push_back(MemRefType::get({1}, f32));           // kv_scale
  args.append({
      MemRefType::get({dyn}, i32),                       // qo_indptr
      MemRefType::get({dyn}, i32),                       // kv_indptr
      MemRefType::get({dyn, 4}, i32),                    // work_items
      MemRefType::get({dyn, kMaxQueryTokens, numHeads, vDim}, f32), // partials
      MemRefType::get({dyn, kMaxQueryTokens, numHeads}, f32),
      MemRefType::get({dyn}, i32),                       // item_indptr
      MemRefType::get({dyn, numHeads, vDim}, b.getBF16Type()), // out
      MemRefType::get({dyn, numHeads}, f32)});           // lse
  auto func = gpu::GPUFuncOp::create(
      mb, op.getLoc(), name, FunctionType::get(ctx, args, {}),
      ldsTypes(b),
      TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({kThreads, 1, 1}));
  // One workgroup per CU fits the LDS budget: one wave per SIMD.
  func->setAttr("rocdl.waves_per_eu", b.getI32IntegerAttr(1));
  func->setAttr("rocdl.flat_work_group_size", b.getStringAttr("256,256"));
  func->setAttr(MLADialect::kLaunchAttrName,
                launchAttr(b,
                           {"roundup(" + std::string(dim::kWorkItems) + "," +
                                std::to_string(xcds) + ")*" +
                                std::to_string(blocksPerItem()),
                            "1", "1"},
                           ldsBytes(), argNames(), args,
                           // How many row blocks of an item are busy, for
                           // the planner.
                           {b.getNamedAttr("rows_per_workgroup",
                                           b.getI64IntegerAttr(
                                               kWaves * kHeadsPerGroup)),
                            b.getNamedAttr("heads_per_block",
                                           b.getI64IntegerAttr(headsPerWg))}));
  OpBuilder bodyBuilder(ctx);
  bodyBuilder.setInsertionPointToStart(&func.getBody().front());
  emitBody(bodyBuilder, func);
  return func;
}

void PartialKernel::emitBody(OpBuilder &b, gpu::GPUFuncOp func) {
  Location loc = op.getLoc();
  KernelBuilder k{b, loc};
  Type f32 = b.getF32Type(), fp8 = b.getType<Float8E4M3FNType>();
  Type elem = elemType(b), pvElem = pvType(b);
  bool bf16 = isBF16(), mx = isMXFP4();
  SmallVector<StringRef> names = argNames();
  auto argument = [&](StringRef name) -> Value {
    auto it = llvm::find(names, name);
    return it == names.end() ? Value()
                             : func.getArgument(it - names.begin());
  };
  Value q = argument(arg::kQ), kv = argument(arg::kKV),
        kvScaleMem = argument(arg::kKVScale),
        qoIndptr = argument(arg::kQoIndptr), kvIndptr = argument(arg::kKVIndptr),
        items = argument(arg::kWorkItems),
        partialOut = argument(arg::kPartialOut),
        partialLse = argument(arg::kPartialLse),
        itemIndptr = argument(arg::kItemIndptr), outMem = argument(arg::kOut),
        lseMem = argument(arg::kLse);
  auto lds = func.getWorkgroupAttributions();
  unsigned next = 0;
  Value kvLds = lds[next++], sLds = lds[next++], pLds = lds[next++],
        rowLds = lds[next++];
  Value vLds = mx ? Value(lds[next++]) : Value();
  Value scaleLds = mx ? Value(lds[next++]) : Value();

  Value c0 = k.idx(0), c1 = k.idx(1);
  // Workgroup -> (work item, row block). The row blocks of a work item read
  // the same KV tiles, so they go to one XCD in consecutive dispatch slots:
  // the hardware deals workgroup ids round-robin to the XCDs (id % xcds),
  // and the grid has roundup(num_work_items, xcds) · blocksPerItem() ids.
  // Running together on one XCD, they share its L2: a tile comes from HBM
  // once and the other blocks' DMAs hit the L2. Ids past the work list
  // return at once.
  Value id = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value xcd = k.rem(id, k.idx(xcds));
  Value dispatchSlot = k.div(id, k.idx(xcds));
  Value rowBlock = k.rem(dispatchSlot, k.idx(blocksPerItem()));
  Value itemIndex = k.add(
      k.mul(k.div(dispatchSlot, k.idx(blocksPerItem())), k.idx(xcds)), xcd);
  Value numItems = memref::DimOp::create(b, loc, items, 0);
  Value itemExists = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                           itemIndex, numItems);
  Value item = k.minS(itemIndex, k.sub(numItems, c1));
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value wave = k.div(tid, k.idx(kWaveSize));
  Value lane = k.rem(tid, k.idx(kWaveSize));

  Value seq = k.loadIndex(items, {item, c0});
  Value begin = k.loadIndex(items, {item, c1});
  Value end = k.loadIndex(items, {item, k.idx(2)});
  Value slot = k.loadIndex(items, {item, k.idx(3)});
  Value qBegin = k.loadIndex(qoIndptr, {seq});
  Value qLen = k.sub(k.loadIndex(qoIndptr, {k.add(seq, c1)}), qBegin);
  Value kvBegin = k.loadIndex(kvIndptr, {seq});
  Value kvLen = k.sub(k.loadIndex(kvIndptr, {k.add(seq, c1)}), kvBegin);
  // The query rows of one block of heads_per_workgroup heads, q_len·hpw of
  // them, in groups of 16 heads (token-major): the workgroup's waves take 4
  // consecutive groups and share every KV tile, so a tile is read once for
  // 64 rows. Workgroups past the rows have nothing to do; waves past them
  // repeat the last group so that every wave reaches the barriers, and
  // write nothing.
  int64_t groupsPerToken = headsPerWg / kHeadsPerGroup;
  Value headBlock = k.rem(rowBlock, k.idx(numHeads / headsPerWg));
  Value numGroups = k.mul(qLen, k.idx(groupsPerToken));
  Value firstGroup = k.mul(k.div(rowBlock, k.idx(numHeads / headsPerWg)),
                           k.idx(kWaves));
  Value blockHasRows = arith::AndIOp::create(
      b, loc, itemExists,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, firstGroup,
                            numGroups));
  auto blockActive = scf::IfOp::create(b, loc, blockHasRows,
                                       /*withElseRegion=*/false);
  b.setInsertionPoint(blockActive.thenBlock()->getTerminator());
  Value group = k.add(firstGroup, wave);
  Value isRealRow =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, group, numGroups);
  Value clampedGroup = k.minS(group, k.sub(numGroups, c1));
  Value token = k.div(clampedGroup, k.idx(groupsPerToken));
  Value headGroup = k.add(k.mul(headBlock, k.idx(groupsPerToken)),
                          k.rem(clampedGroup, k.idx(groupsPerToken)));
  Value tokenRow = k.add(qBegin, token);
  // Token i sees positions < kv_len - (q_len - 1 - i).
  Value visibleEnd = k.add(k.sub(kvLen, k.sub(qLen, c1)), token);

  // Lane roles in the per-lane code: row = lane / 4 (a head of the group),
  // quarter = lane % 4 (a quarter of that row).
  Value row = k.div(lane, k.idx(4));
  Value quarter = k.rem(lane, k.idx(4));
  Value head = k.add(k.mul(headGroup, k.idx(kHeadsPerGroup)), row);

  // log2(e) · sm_scale (· kv_scale for fp8) turns the raw MFMA products into
  // exp2-domain scores (mxfp4: Q's and K's scales are in the MFMAs).
  Value scoreScale = k.f32(op.getEffectiveSmScale() * 1.4426950408889634);
  Value kvScale;
  if (!bf16 && !mx) {
    // fp8: Q's scales are in the MFMAs; K's per-tensor scale joins the
    // score scale.
    kvScale = k.load(kvScaleMem, {c0});
    scoreScale = k.fmul(kvScale, scoreScale);
  }
  // fp8 and mxfp4: Q as A fragments of the scaled MFMAs (two fp8 parts with
  // a per-head power-of-two scale), in registers for the whole KV loop; Q's
  // and K's scales both go into the instructions.
  ScaledQFragments qFrags;
  if (!bf16)
    qFrags = buildScaledQFragments(b, k, q, tokenRow, headGroup, lane);


  // KV tile DMA: kv_tile rows, 16 bytes per lane per gather, the tile's
  // wave-sized pieces dealt round-robin to the waves; mxfp4 adds the tile's
  // E8M0 scales in 2-byte units (18 + 9 pieces, so waves 0-2 take 7 and
  // wave 3 takes 6). Rows past the item clamp to its last row (their scores
  // are masked). The DMA is the kernel's only read of the cache: every cache
  // byte of a work item reaches the workgroup once.
  Type tileElem = kvMemType(b);
  int64_t tileElemBytes = elemBytes();
  int64_t rowElems = rowBytes() / tileElemBytes;
  int64_t wavePieces = tileBytes() / (kWaveSize * kDmaBytes);
  int64_t scalePieces = mx ? scaleUnitsPerTile() / kWaveSize : 0;
  int64_t allPieces = wavePieces + scalePieces;
  int64_t maxGathersPerWave = (allPieces + kWaves - 1) / kWaves;
  // Outstanding gathers a wave may leave for the next tile: the fewest any
  // wave issues (waiting for more than needed is safe).
  int64_t gathersPerWave = allPieces / kWaves;
  int64_t dmaElems = kDmaBytes / tileElemBytes;
  Value lastRow = k.sub(k.add(kvBegin, end), c1);
  auto issueTile = [&](Value tileStart, Value stage) {
    Value firstRow = k.add(kvBegin, tileStart);
    auto gatherData = [&](Value piece) {
      Value waveBase = k.mul(piece, k.idx(kWaveSize * dmaElems));
      Value lin = k.add(waveBase, k.mul(lane, k.idx(dmaElems)));
      Value srcRow =
          k.minS(k.add(firstRow, k.div(lin, k.idx(rowElems))), lastRow);
      Value srcCol = k.rem(lin, k.idx(rowElems));
      Value dstRow = k.div(waveBase, k.idx(rowElems));
      Value dstCol = k.rem(waveBase, k.idx(rowElems));
      amdgpu::GatherToLDSOp::create(
          b, loc, kv, ValueRange{srcRow, srcCol}, kvLds,
          ValueRange{stage, dstRow, dstCol},
          TypeAttr::get(VectorType::get({dmaElems}, tileElem)));
    };
    auto gatherScales = [&](Value piece) {
      Value scalePiece = k.sub(piece, k.idx(wavePieces));
      Value unit = k.add(k.mul(scalePiece, k.idx(kWaveSize)), lane);
      Value srcRow = k.minS(
          k.add(firstRow, k.div(unit, k.idx(scaleUnitsPerRow()))), lastRow);
      Value srcCol = k.mul(k.rem(unit, k.idx(scaleUnitsPerRow())), k.idx(2));
      amdgpu::GatherToLDSOp::create(
          b, loc, kvScaleMem, ValueRange{srcRow, srcCol}, scaleLds,
          ValueRange{stage, k.mul(scalePiece, k.idx(4 * kWaveSize))},
          TypeAttr::get(
              VectorType::get({2}, b.getType<Float8E8M0FNUType>())));
    };
    // A wave-uniform branch on the piece's kind where a round mixes kinds.
    auto inIf = [&](Value cond, function_ref<void()> then,
                    function_ref<void()> otherwise) {
      auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      then();
      b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
      otherwise();
    };
    for (int64_t g = 0; g < maxGathersPerWave; ++g) {
      Value piece = k.add(k.idx(g * kWaves), wave);
      int64_t first = g * kWaves, last = first + kWaves - 1;
      auto lessThan = [&](int64_t bound) {
        return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, piece,
                                     k.idx(bound));
      };
      auto anyPiece = [&] {
        if (last < wavePieces)
          return gatherData(piece);
        if (first >= wavePieces)
          return gatherScales(piece);
        inIf(lessThan(wavePieces), [&] { gatherData(piece); },
             [&] { gatherScales(piece); });
      };
      if (last < allPieces)
        anyPiece();
      else // the last round: only the waves with a piece left
        inIf(lessThan(allPieces), anyPiece, [] {});
    }
  };
  Value hasRows = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                        begin, end);
  scf::IfOp::create(b, loc, hasRows, [&](OpBuilder &ib, Location) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
    issueTile(begin, c0);
    scf::YieldOp::create(b, loc);
  });

  auto accType = VectorType::get({kHeadsPerGroup, vDim}, f32);
  Value zeroAcc = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(accType, b.getF32FloatAttr(0.0)));
  Value negInf = k.f32(-INFINITY);
  auto ctx = b.getContext();
  AffineExpr m, n, kk;
  bindDims(ctx, m, n, kk);
  auto qkMaps = b.getAffineMapArrayAttr(
      {AffineMap::get(3, 0, {m, kk}, ctx), AffineMap::get(3, 0, {n, kk}, ctx),
       AffineMap::get(3, 0, {m, n}, ctx)});
  auto pvMaps = b.getAffineMapArrayAttr(
      {AffineMap::get(3, 0, {m, kk}, ctx), AffineMap::get(3, 0, {kk, n}, ctx),
       AffineMap::get(3, 0, {m, n}, ctx)});
  auto iters = b.getArrayAttr(
      {vector::IteratorTypeAttr::get(ctx, vector::IteratorType::parallel),
       vector::IteratorTypeAttr::get(ctx, vector::IteratorType::parallel),
       vector::IteratorTypeAttr::get(ctx, vector::IteratorType::reduction)});
  Value padElem = arith::ConstantOp::create(b, loc, b.getFloatAttr(elem, 0.0));
  Value padF32 = k.f32(0.0);

  // Testing only: a wait that leaves one load of the tile in flight.
  int64_t shortWait = testHazard == "short-wait" ? 1 : 0;
  // bf16: the wave's Q tile, read once; the MFMA pass loads its fragments
  // here, before the loop, and they stay in registers.
  Value qTileBf16;
  if (bf16)
    qTileBf16 = vector::TransferReadOp::create(
        b, loc, VectorType::get({kHeadsPerGroup, qkDim}, elem), q,
        ValueRange{tokenRow, k.mul(headGroup, k.idx(kHeadsPerGroup)), c0},
        padElem, ArrayRef<bool>{true, true});
  auto tileLoop = scf::ForOp::create(
      b, loc, begin, end, k.idx(kTileRows),
      ValueRange{negInf, k.f32(0.0), zeroAcc},
      [&](OpBuilder &lb, Location, Value tileStart, ValueRange carried) {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(lb.getInsertionBlock());
        Value runMax = carried[0], runSum = carried[1], acc = carried[2];
        Value tileIndex = k.div(k.sub(tileStart, begin), k.idx(kTileRows));
        Value stage = k.rem(tileIndex, k.idx(kStages));
        Value nextStart = k.add(tileStart, k.idx(kTileRows));

        // Put the next tile in flight, then wait for this one: the loads of
        // the next tile may stay outstanding.
        Value hasNext = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                              nextStart, end);
        auto ifNext = scf::IfOp::create(b, loc, hasNext,
                                        [&](OpBuilder &ib, Location) {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
          issueTile(nextStart, k.rem(k.add(tileIndex, c1), k.idx(kStages)));
          amdgpu::MemoryCounterWaitOp::create(
              b, loc, b.getI32IntegerAttr(gathersPerWave + shortWait), nullptr,
              nullptr, nullptr, nullptr);
          scf::YieldOp::create(b, loc);
        }, [&](OpBuilder &ib, Location) {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
          amdgpu::MemoryCounterWaitOp::create(b, loc,
                                              b.getI32IntegerAttr(shortWait),
                                              nullptr, nullptr, nullptr,
                                              nullptr);
          scf::YieldOp::create(b, loc);
        });
        (void)ifNext;
        if (testHazard != "drop-tile-barrier")
          gpu::BarrierOp::create(b, loc);

        // S = Q · Kᵀ on the wave's 16 heads x 64 tile rows.
        if (!bf16) {
          emitScaledQK(b, k, qFrags, kvLds, scaleLds, sLds, wave, lane,
                       stage);
        } else {
          // bf16 caches: bf16 MFMAs on Q (read before the loop) and K as
          // they are.
          auto kTileType = VectorType::get({kTileRows, qkDim}, elem);
          Value kTile = vector::TransferReadOp::create(
              b, loc, kTileType, kvLds, ValueRange{stage, c0, c0}, padElem,
              ArrayRef<bool>{true, true});
          auto sType = VectorType::get({kHeadsPerGroup, kTileRows}, f32);
          Value sZero = arith::ConstantOp::create(
              b, loc, DenseElementsAttr::get(sType, b.getF32FloatAttr(0.0)));
          Value scores = vector::ContractionOp::create(b, loc, qTileBf16, kTile,
                                                       sZero, qkMaps, iters);
          vector::TransferWriteOp::create(b, loc, scores, sLds,
                                          ValueRange{wave, c0, c0},
                                          ArrayRef<bool>{true, true});
        }
        gpu::BarrierOp::create(b, loc);

        // Per-lane online softmax over this lane's quarter of its row.
        int64_t cols = kTileRows / 4;
        auto vt = VectorType::get({cols}, f32);
        Value colStart = k.mul(quarter, k.idx(cols));
        Value s = vector::LoadOp::create(b, loc, vt, sLds,
                                         ValueRange{wave, row, colStart});
        s = arith::MulFOp::create(
            b, loc, s, vector::BroadcastOp::create(b, loc, vt, scoreScale));
        auto idxVec = VectorType::get({cols}, b.getIndexType());
        SmallVector<int64_t> steps(cols);
        for (int64_t j = 0; j < cols; ++j)
          steps[j] = j;
        Value step = arith::ConstantOp::create(
            b, loc, DenseElementsAttr::get(idxVec, ArrayRef<int64_t>(steps)));
        Value pos = arith::AddIOp::create(
            b, loc, step,
            vector::BroadcastOp::create(b, loc, idxVec,
                                        k.add(tileStart, colStart)));
        Value inItem = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::slt, pos,
            vector::BroadcastOp::create(b, loc, idxVec, end));
        Value causal = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::slt, pos,
            vector::BroadcastOp::create(b, loc, idxVec, visibleEnd));
        Value visible = arith::AndIOp::create(b, loc, inItem, causal);
        s = arith::SelectOp::create(
            b, loc, visible, s, vector::BroadcastOp::create(b, loc, vt, negInf));
        Value tileMax = k.laneReduce(
            vector::ReductionOp::create(b, loc,
                                        vector::CombiningKind::MAXIMUMF, s),
            {1, 2}, /*isMax=*/true);
        Value newMax = k.fmax(runMax, tileMax);
        // A row that has seen nothing yet shifts by 0, not by -inf.
        Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                            newMax, negInf);
        Value shift = arith::SelectOp::create(b, loc, empty, k.f32(0.0), newMax);
        Value p = math::Exp2Op::create(
            b, loc,
            arith::SubFOp::create(b, loc, s,
                                  vector::BroadcastOp::create(b, loc, vt, shift)));
        Value tileSum = k.laneReduce(
            vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, p),
            {1, 2}, /*isMax=*/false);
        Value rescale = math::Exp2Op::create(
            b, loc, arith::SubFOp::create(b, loc, runMax, shift));
        Value newSum = k.fadd(k.fmul(runSum, rescale), tileSum);
        if (pvElem.isBF16()) {
          // P in bf16 keeps 8 mantissa bits: one part is enough.
          Value pBf16 = arith::TruncFOp::create(
              b, loc, VectorType::get({cols}, pvElem), p);
          vector::StoreOp::create(b, loc, pBf16, pLds,
                                  ValueRange{wave, c0, row, colStart});
        } else {
          // P in two fp8 parts, p·448 ≈ hi + lo/16: one fp8 part alone keeps 3
          // mantissa bits, which costs ~2e-2 relative error in the output.
          auto p8Type = VectorType::get({cols}, fp8);
          Value scaledP = arith::MulFOp::create(
              b, loc, p, vector::BroadcastOp::create(b, loc, vt, k.f32(kFp8Max)));
          Value pHi = arith::TruncFOp::create(b, loc, p8Type, scaledP);
          Value residual = arith::MulFOp::create(
              b, loc,
              arith::SubFOp::create(b, loc, scaledP,
                                    arith::ExtFOp::create(b, loc, vt, pHi)),
              vector::BroadcastOp::create(b, loc, vt, k.f32(16.0)));
          Value pLo = arith::TruncFOp::create(b, loc, p8Type, residual);
          vector::StoreOp::create(b, loc, pHi, pLds,
                                  ValueRange{wave, c0, row, colStart});
          vector::StoreOp::create(b, loc, pLo, pLds,
                                  ValueRange{wave, c1, row, colStart});
        }
        memref::StoreOp::create(b, loc, rescale, rowLds, ValueRange{wave, row});
        gpu::BarrierOp::create(b, loc);

        // acc = acc * rescale(row) + P · V (V = the first Dv tile columns).
        // Row vector broadcast along the columns: (wave, row) -> (row, *).
        auto rowMap = AffineMap::get(
            2, 0, {b.getAffineDimExpr(1), b.getAffineConstantExpr(0)}, ctx);
        Value rescaleTile = vector::TransferReadOp::create(
            b, loc, accType, rowLds, ValueRange{wave, c0}, padF32, rowMap,
            ArrayRef<bool>{true, true});
        Value scaled = arith::MulFOp::create(b, loc, acc, rescaleTile);
        Value newAcc;
        if (mx) {
          newAcc = emitDecodedPV(b, k, pLds, kvLds, scaleLds, vLds, wave,
                                 tid, stage, scaled, pvMaps, iters);
        } else {
          auto pTileType = VectorType::get({kHeadsPerGroup, kTileRows}, elem);
          auto vTileType = VectorType::get({kTileRows, vDim}, elem);
          auto readP = [&](Value part) {
            return vector::TransferReadOp::create(
                b, loc, pTileType, pLds, ValueRange{wave, part, c0, c0}, padElem,
                ArrayRef<bool>{true, true});
          };
          auto readV = [&] {
            return vector::TransferReadOp::create(
                b, loc, vTileType, kvLds, ValueRange{stage, c0, c0}, padElem,
                ArrayRef<bool>{true, true});
          };
          // Operands are created in a fixed order (C++ leaves argument
          // evaluation order open).
          Value pHiTile = readP(c0);
          Value vTile = readV();
          newAcc = vector::ContractionOp::create(b, loc, pHiTile, vTile,
                                                 scaled, pvMaps, iters);
          if (!bf16) {
            // P's lo part holds 16·(p·448 - hi): it accumulates into the same
            // registers with the LHS scaled by 2^-4 (a scaled MFMA), on the
            // same V (the MFMA pass runs both parts per V fragment).
            Value pLoTile = readP(c1);
            auto lo = vector::ContractionOp::create(b, loc, pLoTile, vTile,
                                                    newAcc, pvMaps, iters);
            lo->setAttr(MLADialect::kLhsExp2AttrName, b.getI64IntegerAttr(-4));
            newAcc = lo;
          }
        }
        // The next iteration's DMA overwrites the stage other waves still
        // read for PV (fp8, bf16). mxfp4's PV reads the stage only while
        // decoding V, before barriers of its own, and the score, P and
        // factor buffers are each wave's own: it needs no barrier here (the
        // emu's hazard checker proves both, test/Integration/emu-hazards.test).
        if (!mx && testHazard != "drop-loop-barrier")
          gpu::BarrierOp::create(b, loc);
        scf::YieldOp::create(b, loc, ValueRange{newMax, newSum, newAcc});
      });

  // out = acc / l (fp8: acc · kv_scale / (448 · l)); lse = (m + log2 l) ·
  // ln 2. A row that
  // saw nothing (l = 0) gives zeros and -inf.
  Value runMax = tileLoop.getResult(0), runSum = tileLoop.getResult(1);
  Value seen = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, runSum,
                                     k.f32(0.0));
  Value factor = arith::SelectOp::create(
      b, loc, seen,
      pvElem.isBF16() ? arith::DivFOp::create(b, loc, k.f32(1.0), runSum)
           : arith::DivFOp::create(b, loc, kvScale,
                                   k.fmul(runSum, k.f32(kFp8Max))),
      k.f32(0.0));
  memref::StoreOp::create(b, loc, factor, rowLds, ValueRange{wave, row});
  gpu::BarrierOp::create(b, loc);
  auto rowMap = AffineMap::get(
      2, 0, {b.getAffineDimExpr(1), b.getAffineConstantExpr(0)}, ctx);
  Value factorTile = vector::TransferReadOp::create(
      b, loc, accType, rowLds, ValueRange{wave, c0}, padF32, rowMap,
      ArrayRef<bool>{true, true});
  Value out = arith::MulFOp::create(b, loc, tileLoop.getResult(2), factorTile);
  Value lse = arith::SelectOp::create(
      b, loc, seen,
      k.fmul(k.fadd(runMax, math::Log2Op::create(b, loc, runSum)),
             k.f32(0.6931471805599453)),
      negInf);

  // A sequence with a single work item is final here: write bf16 output and
  // lse directly (the combine kernel skips it); otherwise write the partials.
  Value seqItems = k.sub(k.loadIndex(itemIndptr, {k.add(seq, c1)}),
                         k.loadIndex(itemIndptr, {seq}));
  Value direct = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       seqItems, c1);
  Value headBase = k.mul(headGroup, k.idx(kHeadsPerGroup));
  Value firstQuarter =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, quarter, c0);
  auto storeLse = [&](Value mem, ValueRange indices) {
    scf::IfOp::create(b, loc, firstQuarter, [&](OpBuilder &jb, Location) {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPoint(jb.getInsertionBlock(), jb.getInsertionPoint());
      memref::StoreOp::create(b, loc, lse, mem, indices);
      scf::YieldOp::create(b, loc);
    });
  };
  scf::IfOp::create(b, loc, isRealRow, [&](OpBuilder &ib, Location) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
    scf::IfOp::create(
        b, loc, direct,
        [&](OpBuilder &db, Location) {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPoint(db.getInsertionBlock(), db.getInsertionPoint());
          Value outBf16 = arith::TruncFOp::create(
              b, loc, VectorType::get({kHeadsPerGroup, vDim}, b.getBF16Type()),
              out);
          vector::TransferWriteOp::create(b, loc, outBf16, outMem,
                                          ValueRange{tokenRow, headBase, c0},
                                          ArrayRef<bool>{true, true});
          storeLse(lseMem, {tokenRow, head});
          scf::YieldOp::create(b, loc);
        },
        [&](OpBuilder &pb, Location) {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPoint(pb.getInsertionBlock(), pb.getInsertionPoint());
          vector::TransferWriteOp::create(b, loc, out, partialOut,
                                          ValueRange{slot, token, headBase, c0},
                                          ArrayRef<bool>{true, true});
          storeLse(partialLse, {slot, token, head});
          scf::YieldOp::create(b, loc);
        });
    scf::YieldOp::create(b, loc);
  });
  b.setInsertionPointAfter(blockActive);
  gpu::ReturnOp::create(b, loc);
}

/// Lane 16·kg + i holds, per 128-wide K chunk, Q[head i][16·kg + e] (e <
/// 16) and Q[head i][64 + 16·kg + e] of the chunk (zero past Dqk) — the A
/// layout of the scaled MFMA — as fp8 in two parts: q·2^-e ≈ hi + lo/16,
/// with 2^e a power of two per head (floor(log2 amax) - 7, so |q·2^-e| <
/// 256) that the instruction's A scale puts back exactly.
PartialKernel::ScaledQFragments
PartialKernel::buildScaledQFragments(OpBuilder &b, KernelBuilder &k, Value q,
                                     Value tokenRow, Value headGroup,
                                     Value lane) {
  Location loc = op.getLoc();
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  Type fp8 = b.getType<Float8E4M3FNType>(), e8m0 = b.getType<Float8E8M0FNUType>();
  Value kg = k.div(lane, k.idx(16)), li = k.rem(lane, k.idx(16));
  Value head = k.add(k.mul(headGroup, k.idx(kHeadsPerGroup)), li);
  Value laneK = k.mul(kg, k.idx(16));
  auto f32x16 = VectorType::get({16}, f32);
  auto f8x16 = VectorType::get({16}, fp8);
  int64_t chunks = paddedQK / 128;
  // The lane's 16-element runs: (chunk, half) -> values (zero past Dqk).
  SmallVector<Value> runs;
  Value zeros = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(f32x16, b.getF32FloatAttr(0.0)));
  Value amax = k.f32(0.0);
  for (int64_t c = 0; c < chunks; ++c)
    for (int64_t half = 0; half < 2; ++half) {
      int64_t base = c * 128 + half * 64;
      if (base >= qkDim) {
        runs.push_back(zeros);
        continue;
      }
      Value raw = vector::LoadOp::create(
          b, loc, VectorType::get({16}, b.getBF16Type()), q,
          ValueRange{tokenRow, head, k.add(k.idx(base), laneK)});
      Value v = arith::ExtFOp::create(b, loc, f32x16, raw);
      runs.push_back(v);
      amax = k.fmax(amax, vector::ReductionOp::create(
                              b, loc, vector::CombiningKind::MAXIMUMF,
                              math::AbsFOp::create(b, loc, v)));
    }
  // The four lanes of head i (i, i + 16, i + 32, i + 48) cover its row.
  amax = k.laneReduce(amax, {16, 32}, /*isMax=*/true);
  // E8M0 byte of 2^e: the exponent field of amax minus 7, within [5, 254]
  // (amax = 0 gives 2^-120: any scale works for zeros).
  Value expBits = arith::ShRUIOp::create(
      b, loc, arith::BitcastOp::create(b, loc, i32, amax),
      arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(23)));
  auto i32c = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v))
        .getResult();
  };
  Value byte = arith::MinSIOp::create(
      b, loc,
      arith::MaxSIOp::create(b, loc,
                             arith::SubIOp::create(b, loc, expBits, i32c(7)),
                             i32c(5)),
      i32c(254));
  auto toE8M0 = [&](Value bits) {
    return arith::BitcastOp::create(
               b, loc, e8m0,
               arith::TruncIOp::create(b, loc, b.getI8Type(), bits))
        .getResult();
  };
  ScaledQFragments frags;
  frags.scaleHi = toE8M0(byte);
  frags.scaleLo = toE8M0(arith::SubIOp::create(b, loc, byte, i32c(4)));
  // 2^-e as f32: exponent field 254 - byte.
  Value inv = arith::BitcastOp::create(
      b, loc, f32,
      arith::ShLIOp::create(b, loc,
                            arith::SubIOp::create(b, loc, i32c(254), byte),
                            i32c(23)));
  Value invVec = vector::BroadcastOp::create(b, loc, f32x16, inv);
  Value sixteen = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(f32x16, b.getF32FloatAttr(16.0)));
  SmallVector<int64_t> concat;
  for (int64_t e = 0; e < 32; ++e)
    concat.push_back(e);
  for (int64_t c = 0; c < chunks; ++c) {
    Value hiRuns[2], loRuns[2];
    for (int64_t half = 0; half < 2; ++half) {
      Value scaled = arith::MulFOp::create(b, loc, runs[2 * c + half], invVec);
      hiRuns[half] = arith::TruncFOp::create(b, loc, f8x16, scaled);
      Value residual = arith::MulFOp::create(
          b, loc,
          arith::SubFOp::create(
              b, loc, scaled,
              arith::ExtFOp::create(b, loc, f32x16, hiRuns[half])),
          sixteen);
      loRuns[half] = arith::TruncFOp::create(b, loc, f8x16, residual);
    }
    frags.hi.push_back(
        vector::ShuffleOp::create(b, loc, hiRuns[0], hiRuns[1], concat));
    frags.lo.push_back(
        vector::ShuffleOp::create(b, loc, loRuns[0], loRuns[1], concat));
  }
  return frags;
}

/// mxfp4 QK at the MFMA level — `vector.contract` has no block-scaled form:
/// per 16 tile rows and 128-wide K chunk two `amdgpu.scaled_mfma 16x16x128`
/// (Q's hi and lo parts) with B = the packed E2M1 K bytes straight from the
/// LDS tile, each lane feeding the E8M0 scale of its own 32-element K block
/// (docs/mfma-layouts.md §2). Past Dqk the A bytes are zero and B reads a
/// clamped, finite block. The scores go to LDS in the C/D layout: lane
/// 16·kg + i holds S[4·kg + r][16·nb + i].
Value PartialKernel::fp8Fragment(OpBuilder &b, KernelBuilder &k, Value kvLds,
                                 Value stage, Value tileRow, int64_t chunkBase,
                                 Value laneK) {
  Location loc = op.getLoc();
  Type fp8 = b.getType<Float8E4M3FNType>();
  auto run16 = VectorType::get({16}, fp8);
  Value zero = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(run16, b.getFloatAttr(fp8, 0.0)));
  Value runs[2];
  for (int64_t half = 0; half < 2; ++half) {
    int64_t base = chunkBase + 64 * half;
    runs[half] = base >= qkDim
                     ? zero
                     : vector::LoadOp::create(
                           b, loc, run16, kvLds,
                           ValueRange{stage, tileRow,
                                      k.add(k.idx(base), laneK)})
                           .getResult();
  }
  SmallVector<int64_t> concat;
  for (int64_t e = 0; e < 32; ++e)
    concat.push_back(e);
  return vector::ShuffleOp::create(b, loc, runs[0], runs[1], concat);
}

void PartialKernel::emitScaledQK(OpBuilder &b, KernelBuilder &k,
                                 const ScaledQFragments &qFrags, Value kvLds,
                                 Value scaleLds, Value sLds, Value wave,
                                 Value lane, Value stage) {
  Location loc = op.getLoc();
  Type fp4 = b.getType<Float4E2M1FNType>();
  Value kg = k.div(lane, k.idx(16)), li = k.rem(lane, k.idx(16));
  Value laneK = k.mul(kg, k.idx(16));
  int64_t chunks = paddedQK / 128, blocks = qkDim / 32;
  auto accType = VectorType::get({4}, b.getF32Type());
  Value accZero = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(accType, b.getF32FloatAttr(0.0)));
  auto i32Attr = [&](int64_t v) { return b.getI32IntegerAttr(v); };
  for (int64_t nb = 0; nb < kTileRows / 16; ++nb) {
    Value tileRow = k.add(k.idx(16 * nb), li);
    Value acc = accZero;
    for (int64_t c = 0; c < chunks; ++c) {
      Value bFrag, scale;
      if (isMXFP4()) {
        // B: 32 E2M1 values (16 bytes) of K 32·kg .. 32·kg + 31 of the
        // chunk, with their block's E8M0 scale.
        Value offset = k.minS(k.add(k.idx(c * 64), laneK),
                              k.idx(rowBytes() - 16));
        Value bytes = vector::LoadOp::create(
            b, loc, VectorType::get({16}, b.getI8Type()), kvLds,
            ValueRange{stage, tileRow, offset});
        bFrag = vector::BitCastOp::create(
            b, loc, VectorType::get({32}, fp4), bytes);
        Value block = k.minS(k.add(k.idx(c * 4), kg), k.idx(blocks - 1));
        scale = loadTileScale(k, scaleLds, stage, tileRow, block);
      } else {
        // fp8: K 16·kg + j and 64 + 16·kg + j of the chunk (j < 16), the
        // layout of the A fragment; zero past Dqk, where Q is zero too. The
        // per-tensor scale applies to the scores later: the B scale is 1.
        bFrag = fp8Fragment(b, k, kvLds, stage, tileRow, c * 128,
                            laneK);
        scale = arith::ConstantOp::create(
            b, loc, b.getType<Float8E8M0FNUType>(),
            b.getFloatAttr(b.getType<Float8E8M0FNUType>(), 1.0));
      }
      // Q = hi + lo/16: two MFMAs, the second with A scale 2^(e-4).
      acc = amdgpu::ScaledMFMAOp::create(
          b, loc, accType, i32Attr(16), i32Attr(16), i32Attr(128),
          qFrags.hi[c], bFrag, acc, qFrags.scaleHi, scale, i32Attr(0),
          i32Attr(0));
      acc = amdgpu::ScaledMFMAOp::create(
          b, loc, accType, i32Attr(16), i32Attr(16), i32Attr(128),
          qFrags.lo[c], bFrag, acc, qFrags.scaleLo, scale, i32Attr(0),
          i32Attr(0));
    }
    for (int64_t r = 0; r < 4; ++r) {
      Value v = vector::ExtractOp::create(b, loc, acc, ArrayRef<int64_t>{r});
      memref::StoreOp::create(
          b, loc, v, sLds,
          ValueRange{wave, k.add(k.mul(kg, k.idx(4)), k.idx(r)), tileRow});
    }
  }
}

Value PartialKernel::loadTileScale(KernelBuilder &k, Value scaleLds,
                                   Value stage, Value tileRow, Value block) {
  // Block b of a row is byte b % 2 of unit b / 2; unit u sits in word u.
  Value unit = k.add(k.mul(tileRow, k.idx(scaleUnitsPerRow())),
                     k.div(block, k.idx(2)));
  Value byte = k.add(k.mul(unit, k.idx(4)), k.rem(block, k.idx(2)));
  return k.load(scaleLds, {stage, byte});
}

/// mxfp4 PV: V's block scales run along the 512 columns, not along the tile
/// rows PV sums over, so they cannot go in the MFMA's scale slot. Each half
/// of the tile (32 rows) is decoded by the workgroup into bf16 in LDS —
/// exact: E2M1 · 2^(e - 127) fits bf16 — and multiplied with P (bf16) by
/// bf16 MFMAs. Cost per 64-row tile: 64 decoded values per thread, two
/// extra barriers, 32 KiB of LDS.
Value PartialKernel::emitDecodedPV(OpBuilder &b, KernelBuilder &k, Value pLds,
                                   Value kvLds, Value scaleLds, Value vLds,
                                   Value wave, Value tid, Value stage,
                                   Value acc, ArrayAttr pvMaps,
                                   ArrayAttr iters) {
  Location loc = op.getLoc();
  Type f32 = b.getF32Type(), i32 = b.getI32Type(), bf16 = b.getBF16Type();
  int64_t perThread = kVHalfRows * vDim / kThreads;
  int64_t threadsPerRow = vDim / perThread;
  Value vRow = k.div(tid, k.idx(threadsPerRow));
  Value vCol = k.mul(k.rem(tid, k.idx(threadsPerRow)), k.idx(perThread));
  auto fp4x8 = VectorType::get({8}, b.getType<Float4E2M1FNType>());
  auto bf16x2 = VectorType::get({2}, bf16);
  auto bf16x8 = VectorType::get({8}, bf16);
  // One block of 32 E2M1 values (16 bytes, low nibble = even element) to
  // bf16 times its E8M0 scale, stored at vLds[row, col..col+31]: the chip's
  // scaled conversion turns byte `idx` of a 32-bit word into elements
  // 2·idx and 2·idx + 1, exactly (v_cvt_scalef32_pk_bf16_fp4; e2m1 · 2^k
  // fits bf16). Each word's 8 values are stored at once, which keeps few
  // of them live.
  auto decodeBlock = [&](Value bytes, Value scale, Value row, Value col) {
    Value words = vector::BitCastOp::create(
        b, loc, VectorType::get({4}, i32), bytes);
    for (int64_t w = 0; w < 4; ++w) {
      Value word = vector::FromElementsOp::create(
          b, loc, VectorType::get({1}, i32),
          ValueRange{vector::ExtractOp::create(b, loc, words,
                                               ArrayRef<int64_t>{w})});
      Value codes = vector::BitCastOp::create(b, loc, fp4x8, word);
      Value values = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(bf16x8, b.getFloatAttr(bf16, 0.0)));
      for (int64_t idx = 0; idx < 4; ++idx) {
        Value pair = amdgpu::ScaledExtPackedOp::create(b, loc, bf16x2, codes,
                                                       scale, idx);
        values = vector::InsertStridedSliceOp::create(
            b, loc, pair, values, ArrayRef<int64_t>{2 * idx},
            ArrayRef<int64_t>{1});
      }
      vector::StoreOp::create(b, loc, values, vLds,
                              ValueRange{row, k.add(col, k.idx(8 * w))});
    }
  };
  Value c0 = k.idx(0);
  auto pHalfType = VectorType::get({kHeadsPerGroup, kVHalfRows}, bf16);
  auto vHalfType = VectorType::get({kVHalfRows, vDim}, bf16);
  Value padBf16 = arith::ConstantOp::create(b, loc, b.getFloatAttr(bf16, 0.0));
  for (int64_t half = 0; half < kTileRows / kVHalfRows; ++half) {
    if (half > 0) // the previous half's MFMAs are done with the buffer
      gpu::BarrierOp::create(b, loc);
    Value tileRow = k.add(k.idx(half * kVHalfRows), vRow);
    for (int64_t blk = 0; blk < perThread / 32; ++blk) {
      Value col = k.add(vCol, k.idx(blk * 32));
      Value bytes = vector::LoadOp::create(
          b, loc, VectorType::get({16}, b.getI8Type()), kvLds,
          ValueRange{stage, tileRow, k.div(col, k.idx(2))});
      // 2^(s - 127) from the E8M0 bits s (s = 0 gives 0, 255 gives inf).
      Value sBits = arith::ExtUIOp::create(
          b, loc, i32,
          arith::BitcastOp::create(
              b, loc, b.getI8Type(),
              loadTileScale(k, scaleLds, stage, tileRow,
                            k.div(col, k.idx(32)))));
      Value scale = arith::BitcastOp::create(
          b, loc, f32,
          arith::ShLIOp::create(
              b, loc, sBits,
              arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(23))));
      decodeBlock(bytes, scale, vRow, col);
      // One block's 32 values at a time: decoding several at once would
      // outgrow the register file.
      amdgpu::SchedBarrierOp::create(b, loc,
                                     amdgpu::sched_barrier_opt_enum::none);
    }
    gpu::BarrierOp::create(b, loc);
    Value pTile = vector::TransferReadOp::create(
        b, loc, pHalfType, pLds,
        ValueRange{wave, c0, c0, k.idx(half * kVHalfRows)}, padBf16,
        ArrayRef<bool>{true, true});
    Value vTile = vector::TransferReadOp::create(
        b, loc, vHalfType, vLds, ValueRange{c0, c0}, padBf16,
        ArrayRef<bool>{true, true});
    acc = vector::ContractionOp::create(b, loc, pTile, vTile, acc, pvMaps,
                                        iters);
  }
  return acc;
}

/// Builds the combine kernel: one workgroup per sequence, 256 threads over
/// its (token, head, column) outputs; sequences with a single work item are
/// left to the partial kernel's direct write.
gpu::GPUFuncOp buildCombineKernel(CombineOp op, OpBuilder &mb, StringRef name) {
  MLIRContext *ctx = op.getContext();
  Builder bb(ctx);
  Location loc = op.getLoc();
  auto partialOutType = op.getPartialOut().getType();
  int64_t numHeads = partialOutType.getDimSize(2);
  int64_t vDim = partialOutType.getDimSize(3);
  Type f32 = bb.getF32Type(), i32 = bb.getI32Type(), bf16 = bb.getBF16Type();
  int64_t dyn = ShapedType::kDynamic;
  SmallVector<Type> args = {
      MemRefType::get({dyn, kMaxQueryTokens, numHeads, vDim}, f32),
      MemRefType::get({dyn, kMaxQueryTokens, numHeads}, f32),
      MemRefType::get({dyn}, i32), MemRefType::get({dyn}, i32),
      MemRefType::get({dyn, numHeads, vDim}, bf16),
      MemRefType::get({dyn, numHeads}, f32)};
  auto func = gpu::GPUFuncOp::create(mb, loc, name,
                                     FunctionType::get(ctx, args, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), bb.getUnitAttr());
  func.setKnownBlockSizeAttr(bb.getDenseI32ArrayAttr({kThreads, 1, 1}));
  func->setAttr("rocdl.flat_work_group_size", bb.getStringAttr("256,256"));
  func->setAttr(MLADialect::kLaunchAttrName,
                launchAttr(bb, {std::string(dim::kSequences), "1", "1"},
                           /*ldsBytes=*/0,
                           {arg::kPartialOut, arg::kPartialLse,
                            arg::kItemIndptr, arg::kQoIndptr, arg::kOut,
                            arg::kLse},
                           args));

  OpBuilder b(ctx);
  b.setInsertionPointToStart(&func.getBody().front());
  KernelBuilder k{b, loc};
  Value po = func.getArgument(0), pl = func.getArgument(1),
        itemIndptr = func.getArgument(2), qoIndptr = func.getArgument(3),
        out = func.getArgument(4), lseOut = func.getArgument(5);
  Value c0 = k.idx(0), c1 = k.idx(1);
  Value seq = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value firstItem = k.loadIndex(itemIndptr, {seq});
  Value lastItem = k.loadIndex(itemIndptr, {k.add(seq, c1)});
  Value qBegin = k.loadIndex(qoIndptr, {seq});
  Value qLen = k.sub(k.loadIndex(qoIndptr, {k.add(seq, c1)}), qBegin);
  Value negInf = k.f32(-INFINITY);
  // A sequence with one work item was written by the partial kernel.
  Value single = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       k.sub(lastItem, firstItem), c1);
  Value total = arith::SelectOp::create(
      b, loc, single, c0, k.mul(qLen, k.idx(numHeads * vDim)));
  // Each thread merges the outputs (token, head, column) it is assigned.
  scf::ForOp::create(
      b, loc, tid, total, k.idx(kThreads), ValueRange{},
      [&](OpBuilder &lb, Location, Value flat, ValueRange) {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(lb.getInsertionBlock());
        Value token = k.div(flat, k.idx(numHeads * vDim));
        Value head = k.rem(k.div(flat, k.idx(vDim)), k.idx(numHeads));
        Value col = k.rem(flat, k.idx(vDim));
        auto maxLoop = scf::ForOp::create(
            b, loc, firstItem, lastItem, c1, ValueRange{negInf},
            [&](OpBuilder &ib, Location, Value j, ValueRange c) {
              OpBuilder::InsertionGuard g2(b);
              b.setInsertionPointToStart(ib.getInsertionBlock());
              scf::YieldOp::create(
                  b, loc, ValueRange{k.fmax(c[0], k.load(pl, {j, token, head}))});
            });
        Value maxLse = maxLoop.getResult(0);
        Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                            maxLse, negInf);
        Value shift = arith::SelectOp::create(b, loc, empty, k.f32(0.0), maxLse);
        auto sumLoop = scf::ForOp::create(
            b, loc, firstItem, lastItem, c1, ValueRange{k.f32(0.0), k.f32(0.0)},
            [&](OpBuilder &ib, Location, Value j, ValueRange c) {
              OpBuilder::InsertionGuard g2(b);
              b.setInsertionPointToStart(ib.getInsertionBlock());
              Value w = math::ExpOp::create(
                  b, loc,
                  arith::SubFOp::create(b, loc, k.load(pl, {j, token, head}),
                                        shift));
              Value o = k.load(po, {j, token, head, col});
              scf::YieldOp::create(
                  b, loc, ValueRange{k.fadd(c[0], w), k.fadd(c[1], k.fmul(w, o))});
            });
        Value weight = sumLoop.getResult(0), merged = sumLoop.getResult(1);
        Value seen = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                           weight, k.f32(0.0));
        Value value = arith::SelectOp::create(
            b, loc, seen, arith::DivFOp::create(b, loc, merged, weight),
            k.f32(0.0));
        Value tokenRow = k.add(qBegin, token);
        memref::StoreOp::create(
            b, loc, arith::TruncFOp::create(b, loc, bf16, value), out,
            ValueRange{tokenRow, head, col});
        Value firstCol = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                               col, c0);
        scf::IfOp::create(b, loc, firstCol, [&](OpBuilder &ib, Location) {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
          Value lse = arith::SelectOp::create(
              b, loc, seen,
              k.fadd(maxLse, math::LogOp::create(b, loc, weight)), negInf);
          memref::StoreOp::create(b, loc, lse, lseOut,
                                  ValueRange{tokenRow, head});
          scf::YieldOp::create(b, loc);
        });
        scf::YieldOp::create(b, loc);
      });
  gpu::ReturnOp::create(b, loc);
  return func;
}

struct MLAToGPUPass : public mla::impl::MLAToGPUPassBase<MLAToGPUPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<PartialDecodeOp> partials;
    SmallVector<CombineOp> combines;
    module.walk([&](PartialDecodeOp op) { partials.push_back(op); });
    module.walk([&](CombineOp op) { combines.push_back(op); });
    if (failed(requireSplitLevel(module, getArgument())))
      return signalPassFailure();
    if (partials.empty() && combines.empty())
      return;

    // The chip comes from the planner op that feeds the work list.
    if (!llvm::is_contained({"", "drop-tile-barrier", "short-wait",
                             "drop-loop-barrier"},
                            StringRef(testHazard))) {
      module.emitError("mla-to-gpu: unknown test-hazard '")
          << testHazard
          << "' (drop-tile-barrier, short-wait or drop-loop-barrier)";
      return signalPassFailure();
    }
    // The chip comes from the planner op that feeds the work list (the
    // default target's when a test builds the op without one).
    const ArchInfo &fallback = *lookupTarget(defaultTargetName())->arch;
    std::string chip = fallback.arch.str();
    struct Facts {
      int64_t xcds, ldsLimit;
    };
    DenseMap<Operation *, Facts> factsOf;
    for (PartialDecodeOp op : partials) {
      int64_t xcds = 1, ldsLimit = fallback.ldsBytesPerCU;
      if (auto plan = op.getWorkItems().getDefiningOp<PlanSplitsOp>()) {
        TargetAttr target = plan.getTarget();
        if (target.getWaveSize() != kWaveSize) {
          op.emitOpError("the gfx950 kernels need a wave64 target; '")
              << target.getName() << "' has wave size "
              << target.getWaveSize();
          return signalPassFailure();
        }
        chip = target.getArch().str();
        xcds = std::max<int64_t>(1, target.getXcds());
        ldsLimit = target.getLdsBytes();
      }
      if (std::optional<std::string> why =
              PartialKernel(op, xcds, ldsLimit).unsupported()) {
        op.emitOpError(*why);
        return signalPassFailure();
      }
      factsOf[op] = {xcds, ldsLimit};
    }

    MLIRContext *ctx = &getContext();
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(ctx));
    OpBuilder mb(ctx);
    mb.setInsertionPointToEnd(module.getBody());
    auto gpuModule = gpu::GPUModuleOp::create(
        mb, module.getLoc(), "mla_kernels",
        mb.getArrayAttr({ROCDL::ROCDLTargetAttr::get(ctx, /*optLevel=*/3,
                                                     "amdgcn-amd-amdhsa",
                                                     chip)}));
    SymbolTable symbols(gpuModule);
    OpBuilder kb(ctx);
    kb.setInsertionPointToStart(gpuModule.getBody());
    auto record = [&](Operation *hostOp, gpu::GPUFuncOp kernel) {
      symbols.insert(kernel);
      hostOp->setAttr(MLADialect::kKernelAttrName,
                      SymbolRefAttr::get(ctx, gpuModule.getName(),
                                         {FlatSymbolRefAttr::get(kernel)}));
    };
    for (PartialDecodeOp op : partials)
      record(op, PartialKernel(op, factsOf[op].xcds, factsOf[op].ldsLimit,
                               testHazard)
                     .build(kb, kernel::kPartial));
    for (CombineOp op : combines)
      record(op, buildCombineKernel(op, kb, kernel::kCombine));
  }
};
} // namespace
