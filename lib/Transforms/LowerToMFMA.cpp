//===- LowerToMFMA.cpp - wave tiles -> lanes and MFMAs (L3 -> L4) ---------===//
//
// The MFMA pass. At L3 a 2-D f32 vector of 16 rows is a wave tile: one
// value for the whole wave. Here every wave tile is distributed over the 64
// lanes in the C/D layout of the 16x16 MFMAs (docs/mfma-layouts.md): lane
// l = 16·kg + i holds, for each 16-column block nb, rows 4·kg + r (r < 4) of
// column 16·nb + i, as elements 4·nb + r of a 1-D vector. Each tile
// `vector.contract` whose operands are fp8 (bf16) tiles read from memory
// becomes `amdgpu.mfma 16x16x128` (16x16x32) per 16-column block and K
// chunk, with the A and B fragments loaded lane by lane in the
// instruction's layout (an fp8 K remainder of 64 zero-fills the upper half
// of both fragments). Reads,
// writes and elementwise ops on wave tiles follow the same layout. Math on
// f32 becomes the AMDGPU exp2/log instructions (no device library needed).
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Transforms/Passes.h"

#include "InputLevel.h"

#include "mlir/Conversion/ArithToAMDGPU/ArithToAMDGPU.h"
#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/AMDGPU/Utils/Chipset.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>

namespace mla {
#define GEN_PASS_DEF_MLALOWERTOMFMAPASS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kRows = 16, kBlock = 16, kChunk = 128;

/// A wave tile: 16 rows of f32 (or bf16, for a rounded output), a multiple
/// of 16 columns.
bool isWaveTile(Type type) {
  auto vt = dyn_cast<VectorType>(type);
  return vt && vt.getRank() == 2 && vt.getDimSize(0) == kRows &&
         vt.getDimSize(1) % kBlock == 0 &&
         (vt.getElementType().isF32() || vt.getElementType().isBF16());
}

/// Per-lane form of a wave tile: 4 values per 16-column block.
VectorType laneType(VectorType tile) {
  return VectorType::get({tile.getDimSize(1) / kBlock * 4},
                         tile.getElementType());
}

class WaveTileConverter : public TypeConverter {
public:
  WaveTileConverter() {
    addConversion([](Type type) { return type; });
    addConversion([](VectorType type) -> Type {
      return isWaveTile(type) ? laneType(type) : type;
    });
    auto cast = [](OpBuilder &b, Type type, ValueRange inputs,
                   Location loc) -> Value {
      return UnrealizedConversionCastOp::create(b, loc, type, inputs)
          .getResult(0);
    };
    addSourceMaterialization(cast);
    addTargetMaterialization(cast);
  }
};

/// The lane's coordinates: kg = lane / 16, i = lane % 16.
struct Lane {
  Value kg, i;
  static Lane get(OpBuilder &b, Location loc) {
    Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    Value lane = arith::RemUIOp::create(
        b, loc, tid, arith::ConstantIndexOp::create(b, loc, 64));
    Value c16 = arith::ConstantIndexOp::create(b, loc, 16);
    return {arith::DivUIOp::create(b, loc, lane, c16),
            arith::RemUIOp::create(b, loc, lane, c16)};
  }
};

Value cst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}
Value addi(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AddIOp::create(b, loc, x, y);
}

/// Memref indices of element (row, col) of a tile read or written at
/// `indices` with `map` (results: memref dims or the constant 0 of a
/// broadcast); `row`/`col` land on the dims the two vector dims map to.
SmallVector<Value> elementIndices(OpBuilder &b, Location loc,
                                  ValueRange indices, AffineMap map, Value row,
                                  Value col) {
  SmallVector<Value> result(indices.begin(), indices.end());
  Value offsets[2] = {row, col};
  for (unsigned d = 0; d < 2; ++d)
    if (auto dim = dyn_cast<AffineDimExpr>(map.getResult(d)))
      result[dim.getPosition()] =
          addi(b, loc, result[dim.getPosition()], offsets[d]);
  return result;
}

/// Whether index `v` is a multiple of `m`: a constant, or sums and products
/// of such (a wave's first column of a split tile is part · columns).
bool isMultipleOf(Value v, int64_t m) {
  if (std::optional<int64_t> c = getConstantIntValue(v))
    return *c % m == 0;
  if (auto mul = v.getDefiningOp<arith::MulIOp>())
    return isMultipleOf(mul.getLhs(), m) || isMultipleOf(mul.getRhs(), m);
  if (auto add = v.getDefiningOp<arith::AddIOp>())
    return isMultipleOf(add.getLhs(), m) && isMultipleOf(add.getRhs(), m);
  return false;
}

/// Whether the K runs of a (k, n) tile read from `read` can come from
/// transposed LDS loads (ds_read_b64_tr_b8 / _b16): a workgroup buffer of 8-
/// or 16-bit elements, row-major, in which every lane's 8 bytes start
/// 8-byte aligned (static strides and offset, a column index that is a
/// multiple of 8 bytes).
bool canTransposeLoad(vector::TransferReadOp read) {
  auto type = dyn_cast<MemRefType>(read.getBase().getType());
  auto space = type ? dyn_cast_or_null<gpu::AddressSpaceAttr>(
                          type.getMemorySpace())
                    : nullptr;
  if (!space || space.getValue() != gpu::AddressSpace::Workgroup)
    return false;
  int64_t bits = type.getElementTypeBitWidth();
  if (bits != 8 && bits != 16)
    return false;
  int64_t bytes = bits / 8, offset;
  SmallVector<int64_t> strides;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      strides.back() != 1 || ShapedType::isDynamic(offset) ||
      offset * bytes % 8 != 0)
    return false;
  for (int64_t stride : strides)
    if (ShapedType::isDynamic(stride) || stride * bytes % 8 != 0)
      if (stride != 1)
        return false;
  return isMultipleOf(read.getIndices().back(), 8 / bytes);
}

/// Two fp8 A fragments of K = 64 (elements 0..15 hold their K, 16..31 the
/// zero padding) as one of K = 128: `lo` in `hi`'s padding, with the
/// lane's E8M0 scale for its K block (lane 16·b + i: block b; blocks 2 and
/// 3 hold lo, scaled by `loScale`).
struct PackedParts {
  Value a, scaleA;
};
PackedParts packParts(OpBuilder &b, Location loc, const Lane &lane, Value hi,
                      Value lo, Value loScale, Value one) {
  Value loRun = vector::ExtractStridedSliceOp::create(
      b, loc, lo, ArrayRef<int64_t>{0}, ArrayRef<int64_t>{16},
      ArrayRef<int64_t>{1});
  Value a = vector::InsertStridedSliceOp::create(
      b, loc, loRun, hi, ArrayRef<int64_t>{16}, ArrayRef<int64_t>{1});
  Value inLo = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                     lane.kg, cst(b, loc, 2));
  return {a, arith::SelectOp::create(b, loc, inLo, loScale, one)};
}

/// A contraction operand: a tile read from memory, or such a read widened
/// with arith.extf (fp8 -> bf16): fragments are loaded and widened per lane.
vector::TransferReadOp readOf(Value v, arith::ExtFOp &ext) {
  ext = v.getDefiningOp<arith::ExtFOp>();
  return (ext ? ext.getIn() : v).getDefiningOp<vector::TransferReadOp>();
}

/// A contraction of one chain (below) and its A operand.
struct ChainPart {
  vector::ContractionOp op;
  vector::TransferReadOp lhsRead;
  arith::ExtFOp lhsExt;
  Value scaleA; // mla.lhs_exp2: the scaled MFMA's E8M0 scale for A
  SmallVector<Value> aFrags;
};

/// A chain of contractions on the same B, each accumulating into the next
/// (fp8 P in two parts): `op` and the contractions that follow it.
SmallVector<ChainPart> collectChain(vector::ContractionOp op,
                                    vector::TransferReadOp lhsRead,
                                    arith::ExtFOp lhsExt) {
  SmallVector<ChainPart> parts = {{op, lhsRead, lhsExt, Value(), {}}};
  for (Operation *cur = op; cur->hasOneUse();) {
    auto next = dyn_cast<vector::ContractionOp>(*cur->user_begin());
    arith::ExtFOp ext;
    auto read = next ? readOf(next.getLhs(), ext) : nullptr;
    if (!read || next.getAcc() != cur->getResult(0) ||
        next.getRhs() != op.getRhs() ||
        next.getIndexingMapsArray() != op.getIndexingMapsArray() ||
        next.getLhsType() != op.getLhsType() ||
        !read.getPermutationMap().isMinorIdentity())
      break;
    parts.push_back({next, read, ext, Value(), {}});
    cur = next;
  }
  return parts;
}

/// The lane values fragments are loaded with: the lane's first K of a run,
/// its A row, and a zero fragment around K remainders.
struct FragmentLane {
  Value laneK, rowA, zero;
};

/// Loads the A and B fragments of a contraction lane by lane, in the
/// layout of its MFMA: fp8 16x16x128, 32 K per lane in two runs of 16 (K
/// 16·kg + j and 64 + 16·kg + j); bf16 16x16x32, one run of 8 (K 8·kg + j).
class FragmentLoader {
public:
  FragmentLoader(OpBuilder &b, Location loc, Type elem, int64_t depth,
                 vector::TransferReadOp rhsRead, bool rhsIsNK,
                 bool corruptLayout)
      : b(b), loc(loc), elem(elem), isBF16(elem.isBF16()),
        chunkK(isBF16 ? 32 : kChunk), runK(isBF16 ? 8 : 16), depth(depth),
        rhsRead(rhsRead), rhsIsNK(rhsIsNK),
        transposeB(!rhsIsNK && canTransposeLoad(rhsRead)),
        corruptLayout(corruptLayout), lane(Lane::get(b, loc)),
        at(fragmentLane(lane)) {}

  int64_t chunkSize() const { return chunkK; }
  int64_t chunks() const { return (depth + chunkK - 1) / chunkK; }
  const Lane &laneIds() const { return lane; }
  Value zeroFragment() const { return at.zero; }

  /// The A fragments of `read`, one per K chunk. An A tile read outside
  /// the contraction's loop (Q, the same in every iteration) has them
  /// loaded once, right after the read: they stay in registers for the
  /// whole loop.
  SmallVector<Value> aFragments(vector::TransferReadOp read,
                                Operation *contraction) {
    Region *readRegion = read->getParentRegion();
    bool hoist = readRegion != contraction->getParentRegion() &&
                 readRegion->isProperAncestor(contraction->getParentRegion());
    OpBuilder::InsertionGuard guard(b);
    FragmentLane here = at;
    if (hoist) {
      b.setInsertionPointAfter(read);
      here = fragmentLane(Lane::get(b, loc));
    }
    SmallVector<Value> frags;
    for (int64_t c = 0; c < chunks(); ++c)
      frags.push_back(fragment(
          [&](int64_t kb) { return loadA(read, kb, here); }, c, here.zero));
    return frags;
  }

  /// B's fragment for column block `nb` and K chunk `chunk`.
  Value bFragment(int64_t nb, int64_t chunk) {
    return fragment([&](int64_t kb) { return loadB(nb, kb); }, chunk, at.zero);
  }

  /// B's run for column block `nb` at K `kBase` (one run: a K of 64 is one
  /// run of an fp8 lane).
  Value loadB(int64_t nb, int64_t kBase) {
    Value col = addi(b, loc, lane.i, cst(b, loc, nb * kBlock));
    Value kStart = addi(b, loc, at.laneK, cst(b, loc, kBase));
    if (rhsIsNK) {
      SmallVector<Value> idx =
          elementIndices(b, loc, rhsRead.getIndices(),
                         rhsRead.getPermutationMap(), col, kStart);
      return widen(vector::LoadOp::create(b, loc, memType(rhsRead, runK),
                                          rhsRead.getBase(), idx));
    }
    return transposeB ? loadTransposedB(nb, kStart)
                      : loadGatheredB(col, kStart);
  }

private:
  FragmentLane fragmentLane(const Lane &l) {
    Value laneK =
        arith::MulIOp::create(b, loc, l.kg, cst(b, loc, isBF16 ? runK : 16));
    Value row =
        corruptLayout
            ? arith::XOrIOp::create(b, loc, l.i, cst(b, loc, 1)).getResult()
            : l.i;
    auto frag32 = VectorType::get({isBF16 ? runK : 32}, elem);
    Value zero = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(frag32, b.getFloatAttr(elem, 0.0)));
    return {laneK, row, zero};
  }

  /// Widens a fragment loaded from a narrower tile (exact: fp8 fits bf16).
  Value widen(Value fragment) {
    auto vt = cast<VectorType>(fragment.getType());
    if (vt.getElementType() == elem)
      return fragment;
    Value f32s = arith::ExtFOp::create(
        b, loc, VectorType::get(vt.getShape(), b.getF32Type()), fragment);
    return arith::TruncFOp::create(b, loc, VectorType::get(vt.getShape(), elem),
                                   f32s);
  }

  static VectorType memType(vector::TransferReadOp read, int64_t n) {
    return VectorType::get({n}, read.getVectorType().getElementType());
  }

  /// A: row i, the K run 16·kg.. of the chunk half at `kBase`.
  Value loadA(vector::TransferReadOp read, int64_t kBase,
              const FragmentLane &l) {
    SmallVector<Value> idx =
        elementIndices(b, loc, read.getIndices(), read.getPermutationMap(),
                       l.rowA, addi(b, loc, l.laneK, cst(b, loc, kBase)));
    return widen(vector::LoadOp::create(b, loc, memType(read, runK),
                                        read.getBase(), idx));
  }

  /// (k, n) from LDS: the K run is a column of the tile, and transposed
  /// loads give 16 lanes their columns at once: load t brings lane i rows
  /// kStart + t·e + 0..e-1 of column 16·nb + i (e = 64 / element bits),
  /// lane i naming row kStart + t·e + i / (16/e) at column 16·nb + e·(i
  /// mod 16/e) — docs/mfma-layouts.md.
  Value loadTransposedB(int64_t nb, Value kStart) {
    Type memElem = rhsRead.getVectorType().getElementType();
    int64_t perLoad = 64 / memElem.getIntOrFloatBitWidth();
    Value lanesPerRow = cst(b, loc, kBlock / perLoad);
    Value rowOfLane = arith::DivUIOp::create(b, loc, lane.i, lanesPerRow);
    Value colOfLane = arith::MulIOp::create(
        b, loc, arith::RemUIOp::create(b, loc, lane.i, lanesPerRow),
        cst(b, loc, perLoad));
    Value run = vector::BroadcastOp::create(
        b, loc, memType(rhsRead, runK),
        arith::ConstantOp::create(b, loc, b.getFloatAttr(memElem, 0.0)));
    for (int64_t t = 0; t < runK / perLoad; ++t) {
      Value row = addi(b, loc, kStart,
                       addi(b, loc, rowOfLane, cst(b, loc, t * perLoad)));
      Value column = addi(b, loc, colOfLane, cst(b, loc, nb * kBlock));
      SmallVector<Value> idx =
          elementIndices(b, loc, rhsRead.getIndices(),
                         rhsRead.getPermutationMap(), row, column);
      Value part = amdgpu::TransposeLoadOp::create(
          b, loc, memType(rhsRead, perLoad), rhsRead.getBase(), idx);
      run = vector::InsertStridedSliceOp::create(b, loc, part, run,
                                                 ArrayRef<int64_t>{t * perLoad},
                                                 ArrayRef<int64_t>{1});
    }
    return widen(run);
  }

  /// (k, n) elsewhere: the K run element by element.
  Value loadGatheredB(Value col, Value kStart) {
    SmallVector<Value> elems;
    for (int64_t j = 0; j < runK; ++j) {
      SmallVector<Value> idx = elementIndices(
          b, loc, rhsRead.getIndices(), rhsRead.getPermutationMap(),
          addi(b, loc, kStart, cst(b, loc, j)), col);
      elems.push_back(memref::LoadOp::create(b, loc, rhsRead.getBase(), idx));
    }
    return widen(
        vector::FromElementsOp::create(b, loc, memType(rhsRead, runK), elems));
  }

  /// The fragment of K chunk `chunk`. fp8: elements 0..15 hold K 16·kg + j
  /// of the chunk, 16..31 hold 64 + 16·kg + j; past K the fragment stays
  /// zero on both sides.
  Value fragment(llvm::function_ref<Value(int64_t)> load, int64_t chunk,
                 Value zero) {
    if (isBF16)
      return load(chunk * chunkK);
    Value frag = vector::InsertStridedSliceOp::create(
        b, loc, load(chunk * kChunk), zero, ArrayRef<int64_t>{0},
        ArrayRef<int64_t>{1});
    if (chunk * kChunk + 64 < depth)
      frag = vector::InsertStridedSliceOp::create(
          b, loc, load(chunk * kChunk + 64), frag, ArrayRef<int64_t>{16},
          ArrayRef<int64_t>{1});
    return frag;
  }

  OpBuilder &b;
  Location loc;
  Type elem;
  bool isBF16;
  int64_t chunkK, runK, depth;
  vector::TransferReadOp rhsRead;
  bool rhsIsNK, transposeB, corruptLayout;
  Lane lane;
  FragmentLane at;
};

/// vector.contract of two fp8 or bf16 tiles read from memory into a wave
/// tile.
struct ContractToMFMA : public OpConversionPattern<vector::ContractionOp> {
  ContractToMFMA(const TypeConverter &converter, MLIRContext *ctx,
                 bool corruptLayout)
      : OpConversionPattern(converter, ctx), corruptLayout(corruptLayout) {}
  bool corruptLayout;

  LogicalResult
  matchAndRewrite(vector::ContractionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    arith::ExtFOp lhsExt, rhsExt;
    auto lhsRead = readOf(op.getLhs(), lhsExt);
    auto rhsRead = readOf(op.getRhs(), rhsExt);
    Type elem;
    bool rhsIsNK = false;
    if (failed(checkContraction(op, lhsRead, rhsRead, rewriter, elem, rhsIsNK)))
      return failure();
    bool isBF16 = elem.isBF16();
    int64_t depth = op.getLhsType().getDimSize(1);
    FragmentLoader loader(rewriter, loc, elem, depth, rhsRead, rhsIsNK,
                          corruptLayout);

    // A chain runs its MFMAs B fragment by B fragment: a fragment is
    // loaded once and dies at once.
    SmallVector<ChainPart> parts = collectChain(op, lhsRead, lhsExt);
    Type e8m0 = rewriter.getType<Float8E8M0FNUType>();
    Value scaleB;
    for (ChainPart &part : parts) {
      if (auto exp2 = part.op->getAttrOfType<IntegerAttr>(
              MLADialect::kLhsExp2AttrName)) {
        if (isBF16)
          return rewriter.notifyMatchFailure(
              op, "mla.lhs_exp2 needs fp8 operands (the scaled MFMA)");
        part.scaleA = arith::ConstantOp::create(
            rewriter, loc, e8m0,
            rewriter.getFloatAttr(e8m0, std::ldexp(1.0, exp2.getInt())));
        scaleB = arith::ConstantOp::create(rewriter, loc, e8m0,
                                           rewriter.getFloatAttr(e8m0, 1.0));
      }
      part.aFrags = loader.aFragments(part.lhsRead, op);
    }

    // Two parts of K = 64 (fp8 P's hi and lo on the 64-row tile) share one
    // MFMA: hi fills K 0..63, lo the K 64..127 that would be zero padding,
    // against B's fragment twice. Block scales go by K block (lanes 0..31
    // supply blocks 0 and 1, lanes 32..63 blocks 2 and 3): 1 for hi, lo's
    // 2^exp2 for lo.
    std::optional<PackedParts> packed;
    if (!isBF16 && depth == 64 && parts.size() == 2 && !parts[0].scaleA &&
        parts[1].scaleA)
      packed = packParts(rewriter, loc, loader.laneIds(), parts[0].aFrags[0],
                         parts[1].aFrags[0], parts[1].scaleA, scaleB);
    int64_t numCols = cast<VectorType>(op.getResultType()).getDimSize(1);
    Value acc = adaptor.getAcc();
    for (int64_t nb = 0; nb < numCols / kBlock; ++nb) {
      Value block = vector::ExtractStridedSliceOp::create(
          rewriter, loc, acc, ArrayRef<int64_t>{nb * 4}, ArrayRef<int64_t>{4},
          ArrayRef<int64_t>{1});
      block = packed
                  ? emitPackedMfma(rewriter, loc, loader, nb, *packed, scaleB,
                                   block)
                  : emitMfmas(rewriter, loc, loader, nb, parts, scaleB, block);
      acc = vector::InsertStridedSliceOp::create(
          rewriter, loc, block, acc, ArrayRef<int64_t>{nb * 4},
          ArrayRef<int64_t>{1});
    }
    // The chain's last result is the sum; the others fed only the next.
    for (ChainPart &part : llvm::reverse(parts))
      rewriter.replaceOp(part.op, acc);
    eraseOperands(rewriter, parts, rhsRead, rhsExt);
    return success();
  }

private:
  /// Whether `op` is a contraction of fp8 or bf16 tiles read from memory
  /// into a wave tile that the MFMAs can run; `elem` is the MFMA's element
  /// type (a bf16 x fp8 contraction runs as bf16 MFMAs, the fp8 side
  /// widened), `rhsIsNK` says how B is laid out.
  static LogicalResult checkContraction(vector::ContractionOp op,
                                        vector::TransferReadOp lhsRead,
                                        vector::TransferReadOp rhsRead,
                                        ConversionPatternRewriter &rewriter,
                                        Type &elem, bool &rhsIsNK) {
    if (!lhsRead || !rhsRead || !isWaveTile(op.getResultType()))
      return rewriter.notifyMatchFailure(
          op, "expects fp8 or bf16 tiles read from memory into a wave tile");
    Type fp8 = rewriter.getType<Float8E4M3FNType>();
    Type lhsElem = op.getLhsType().getElementType();
    Type rhsElem = op.getRhsType().getElementType();
    auto supported = [&](Type t) { return t == fp8 || t.isBF16(); };
    if (!supported(lhsElem) || !supported(rhsElem))
      return rewriter.notifyMatchFailure(op,
                                         "expects f8E4M3FN or bf16 operands");
    elem = lhsElem == rhsElem ? lhsElem : rewriter.getBF16Type();
    if (!lhsRead.getPermutationMap().isMinorIdentity() ||
        !rhsRead.getPermutationMap().isMinorIdentity())
      return rewriter.notifyMatchFailure(op, "expects minor-identity reads");
    // Maps: lhs (m, k); rhs (n, k) or (k, n); acc (m, n).
    MLIRContext *ctx = op.getContext();
    AffineExpr m, n, k;
    bindDims(ctx, m, n, k);
    auto maps = op.getIndexingMapsArray();
    if (maps[0] != AffineMap::get(3, 0, {m, k}, ctx) ||
        maps[2] != AffineMap::get(3, 0, {m, n}, ctx))
      return rewriter.notifyMatchFailure(op, "unsupported lhs/acc maps");
    rhsIsNK = maps[1] == AffineMap::get(3, 0, {n, k}, ctx);
    if (!rhsIsNK && maps[1] != AffineMap::get(3, 0, {k, n}, ctx))
      return rewriter.notifyMatchFailure(op, "unsupported rhs map");
    int64_t depth = op.getLhsType().getDimSize(1);
    if (depth % (elem.isBF16() ? 32 : 64) != 0)
      return rewriter.notifyMatchFailure(
          op, elem.isBF16() ? "K must be a multiple of 32"
                            : "K must be a multiple of 64");
    return success();
  }

  static IntegerAttr i32Attr(OpBuilder &b, int64_t v) {
    return b.getI32IntegerAttr(v);
  }

  /// The packed parts' one scaled MFMA on column block `nb`: B's K = 64
  /// run twice.
  static Value emitPackedMfma(OpBuilder &b, Location loc,
                              FragmentLoader &loader, int64_t nb,
                              const PackedParts &packed, Value scaleB,
                              Value block) {
    Value b64 = loader.loadB(nb, 0);
    Value zero = loader.zeroFragment();
    Value bFrag = vector::InsertStridedSliceOp::create(
        b, loc, b64,
        vector::InsertStridedSliceOp::create(
            b, loc, b64, zero, ArrayRef<int64_t>{0}, ArrayRef<int64_t>{1}),
        ArrayRef<int64_t>{16}, ArrayRef<int64_t>{1});
    return amdgpu::ScaledMFMAOp::create(
        b, loc, block.getType(), i32Attr(b, 16), i32Attr(b, 16),
        i32Attr(b, loader.chunkSize()), packed.a, bFrag, block, packed.scaleA,
        scaleB, i32Attr(b, 0), i32Attr(b, 0));
  }

  /// The chain's MFMAs on column block `nb`, K chunk by K chunk.
  static Value emitMfmas(OpBuilder &b, Location loc, FragmentLoader &loader,
                         int64_t nb, ArrayRef<ChainPart> parts, Value scaleB,
                         Value block) {
    for (int64_t c = 0; c < loader.chunks(); ++c) {
      Value bFrag = loader.bFragment(nb, c);
      for (const ChainPart &part : parts) {
        if (part.scaleA) {
          block = amdgpu::ScaledMFMAOp::create(
              b, loc, block.getType(), i32Attr(b, 16), i32Attr(b, 16),
              i32Attr(b, loader.chunkSize()), part.aFrags[c], bFrag, block,
              part.scaleA, scaleB, i32Attr(b, 0), i32Attr(b, 0));
          continue;
        }
        block = amdgpu::MFMAOp::create(
            b, loc, block.getType(), /*m=*/16, /*n=*/16,
            /*k=*/loader.chunkSize(), /*blocks=*/1, part.aFrags[c], bFrag,
            block, /*cbsz=*/0, /*abid=*/0, amdgpu::MFMAPermB::none,
            /*reducePrecision=*/false, /*negateA=*/false,
            /*negateB=*/false, /*negateC=*/false);
      }
    }
    return block;
  }

  /// The operand reads and widenings the MFMAs replaced.
  static void eraseOperands(ConversionPatternRewriter &rewriter,
                            ArrayRef<ChainPart> parts,
                            vector::TransferReadOp rhsRead,
                            arith::ExtFOp rhsExt) {
    for (const ChainPart &part : parts) {
      if (part.lhsExt && part.lhsExt->use_empty())
        rewriter.eraseOp(part.lhsExt);
      if (part.lhsRead->use_empty() || part.lhsRead->hasOneUse())
        rewriter.eraseOp(part.lhsRead);
    }
    if (rhsExt && rhsExt->use_empty())
      rewriter.eraseOp(rhsExt);
    if (parts.size() == 1 && (rhsRead->use_empty() || rhsRead->hasOneUse()))
      rewriter.eraseOp(rhsRead);
  }
};

/// A wave tile read from memory: lane element 4·nb + r is tile element
/// (4·kg + r, 16·nb + i); a broadcast dimension reads once per row.
struct ReadTile : public OpConversionPattern<vector::TransferReadOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(vector::TransferReadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isWaveTile(op.getVectorType()))
      return failure();
    Location loc = op.getLoc();
    Lane lane = Lane::get(rewriter, loc);
    AffineMap map = op.getPermutationMap();
    bool broadcastCols = !isa<AffineDimExpr>(map.getResult(1));
    int64_t blocks = op.getVectorType().getDimSize(1) / kBlock;
    Value rowBase = arith::MulIOp::create(rewriter, loc, lane.kg,
                                          cst(rewriter, loc, 4));
    SmallVector<Value> elements;
    SmallVector<Value> rowValues;
    for (int64_t nb = 0; nb < blocks; ++nb)
      for (int64_t r = 0; r < 4; ++r) {
        if (broadcastCols && nb > 0) {
          elements.push_back(rowValues[r]);
          continue;
        }
        Value row = addi(rewriter, loc, rowBase, cst(rewriter, loc, r));
        Value col = addi(rewriter, loc, lane.i, cst(rewriter, loc, nb * kBlock));
        SmallVector<Value> idx =
            elementIndices(rewriter, loc, adaptor.getIndices(), map, row, col);
        Value v = memref::LoadOp::create(rewriter, loc, adaptor.getBase(), idx);
        rowValues.push_back(v);
        elements.push_back(v);
      }
    rewriter.replaceOp(op, vector::FromElementsOp::create(
                               rewriter, loc, laneType(op.getVectorType()),
                               elements));
    return success();
  }
};

/// A wave tile written to memory, element by element in the lane layout.
struct WriteTile : public OpConversionPattern<vector::TransferWriteOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(vector::TransferWriteOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isWaveTile(op.getVectorType()))
      return failure();
    if (!op.getPermutationMap().isMinorIdentity())
      return rewriter.notifyMatchFailure(op, "expects a minor-identity write");
    Location loc = op.getLoc();
    Lane lane = Lane::get(rewriter, loc);
    Value rowBase = arith::MulIOp::create(rewriter, loc, lane.kg,
                                          cst(rewriter, loc, 4));
    int64_t blocks = op.getVectorType().getDimSize(1) / kBlock;
    for (int64_t nb = 0; nb < blocks; ++nb)
      for (int64_t r = 0; r < 4; ++r) {
        Value row = addi(rewriter, loc, rowBase, cst(rewriter, loc, r));
        Value col = addi(rewriter, loc, lane.i, cst(rewriter, loc, nb * kBlock));
        SmallVector<Value> idx = elementIndices(
            rewriter, loc, adaptor.getIndices(), op.getPermutationMap(), row,
            col);
        Value v = vector::ExtractOp::create(rewriter, loc,
                                            adaptor.getValueToStore(),
                                            ArrayRef<int64_t>{nb * 4 + r});
        memref::StoreOp::create(rewriter, loc, v, adaptor.getBase(), idx);
      }
    rewriter.eraseOp(op);
    return success();
  }
};

/// Constants and elementwise arith ops on wave tiles act lane by lane.
struct ElementwiseOnTiles : public ConversionPattern {
  ElementwiseOnTiles(const TypeConverter &converter, MLIRContext *ctx)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}

  LogicalResult
  matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isa<arith::ArithDialect>(op->getDialect()) ||
        getTypeConverter()->isLegal(op))
      return failure();
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
      if (!dense || !dense.isSplat())
        return rewriter.notifyMatchFailure(op, "only splat tile constants");
      auto type = laneType(cast<VectorType>(constant.getType()));
      rewriter.replaceOpWithNewOp<arith::ConstantOp>(
          op, DenseElementsAttr::get(type, dense.getSplatValue<Attribute>()));
      return success();
    }
    if (!op->hasTrait<OpTrait::Elementwise>())
      return rewriter.notifyMatchFailure(op, "not elementwise");
    SmallVector<Type> resultTypes;
    if (failed(getTypeConverter()->convertTypes(op->getResultTypes(),
                                                resultTypes)))
      return failure();
    OperationState state(op->getLoc(), op->getName(), operands, resultTypes,
                         op->getAttrs());
    rewriter.replaceOp(op, rewriter.create(state)->getResults());
    return success();
  }
};

/// f32 math as the AMDGPU instructions, element by element: exp2 and log2
/// directly (v_exp_f32, v_log_f32), exp and log through them.
template <typename MathOp>
struct MathToAMDGCN : public OpConversionPattern<MathOp> {
  using OpConversionPattern<MathOp>::OpConversionPattern;
  using OpAdaptor = typename MathOp::Adaptor;

  LogicalResult
  matchAndRewrite(MathOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type f32 = rewriter.getF32Type();
    if (getElementTypeOrSelf(op.getType()) != f32)
      return rewriter.notifyMatchFailure(op, "f32 only");
    constexpr bool isExp = std::is_same_v<MathOp, math::Exp2Op> ||
                           std::is_same_v<MathOp, math::ExpOp>;
    StringRef intrinsic = isExp ? "llvm.amdgcn.exp2" : "llvm.amdgcn.log";
    auto scalar = [&](Value x) -> Value {
      if constexpr (std::is_same_v<MathOp, math::ExpOp>)
        x = arith::MulFOp::create(
            rewriter, loc, x,
            arith::ConstantOp::create(rewriter, loc,
                                      rewriter.getF32FloatAttr(1.4426950408889634)));
      Value y = LLVM::CallIntrinsicOp::create(
                    rewriter, loc, f32, rewriter.getStringAttr(intrinsic),
                    ValueRange{x})
                    .getResult(0);
      if constexpr (std::is_same_v<MathOp, math::LogOp>)
        y = arith::MulFOp::create(
            rewriter, loc, y,
            arith::ConstantOp::create(rewriter, loc,
                                      rewriter.getF32FloatAttr(0.6931471805599453)));
      return y;
    };
    Value input = adaptor.getOperand();
    auto vt = dyn_cast<VectorType>(input.getType());
    if (!vt) {
      rewriter.replaceOp(op, scalar(input));
      return success();
    }
    if (vt.getRank() != 1)
      return rewriter.notifyMatchFailure(op, "1-D vectors only");
    SmallVector<Value> elements;
    for (int64_t e = 0; e < vt.getDimSize(0); ++e)
      elements.push_back(scalar(vector::ExtractOp::create(
          rewriter, loc, input, ArrayRef<int64_t>{e})));
    rewriter.replaceOp(op,
                       vector::FromElementsOp::create(rewriter, loc, vt, elements));
    return success();
  }
};

struct MLALowerToMFMAPass
    : public mla::impl::MLALowerToMFMAPassBase<MLALowerToMFMAPass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(requireKernelLevel(getOperation(), getArgument())))
      return signalPassFailure();
    MLIRContext *ctx = &getContext();
    WaveTileConverter converter;
    ConversionTarget target(*ctx);
    target.addLegalDialect<amdgpu::AMDGPUDialect, arith::ArithDialect,
                           gpu::GPUDialect, LLVM::LLVMDialect,
                           memref::MemRefDialect, vector::VectorDialect>();
    target.addIllegalOp<vector::ContractionOp, math::Exp2Op, math::Log2Op,
                        math::ExpOp, math::LogOp>();
    target.markUnknownOpDynamicallyLegal(
        [&](Operation *op) { return converter.isLegal(op); });
    target.addDynamicallyLegalDialect<arith::ArithDialect,
                                      vector::VectorDialect>(
        [&](Operation *op) { return converter.isLegal(op); });
    target.addDynamicallyLegalOp<vector::TransferWriteOp>(
        [](vector::TransferWriteOp op) {
          return !isWaveTile(op.getVectorType());
        });
    // A bf16 tile read only as an MFMA operand stays as it is: the
    // contraction loads its fragments and erases it.
    target.addDynamicallyLegalOp<vector::TransferReadOp>(
        [&](vector::TransferReadOp op) {
          return converter.isLegal(op.getOperation()) ||
                 (!op->use_empty() &&
                  llvm::all_of(op->getUsers(), [](Operation *user) {
                    return isa<vector::ContractionOp>(user);
                  }));
        });
    RewritePatternSet patterns(ctx);
    patterns.add<ContractToMFMA>(converter, ctx, testCorruptLayout);
    patterns.add<ReadTile, WriteTile>(converter, ctx);
    patterns.add<ElementwiseOnTiles>(converter, ctx);
    patterns.add<MathToAMDGCN<math::Exp2Op>, MathToAMDGCN<math::Log2Op>,
                 MathToAMDGCN<math::ExpOp>, MathToAMDGCN<math::LogOp>>(
        converter, ctx);
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                         target);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();

    // Fragments are assembled with strided slices; the ROCDL conversion
    // only lowers shuffles. fp8 conversions (the fragments' widening among
    // them) become the chip's packed instructions, whose slices go too.
    RewritePatternSet slicePatterns(ctx);
    vector::populateVectorInsertExtractStridedSliceTransforms(slicePatterns);
    if (!chipset.empty()) {
      FailureOr<amdgpu::Chipset> chip = amdgpu::Chipset::parse(chipset);
      if (failed(chip)) {
        getOperation()->emitError("unknown chipset '") << chipset << "'";
        return signalPassFailure();
      }
      arith::populateArithToAMDGPUConversionPatterns(
          slicePatterns, /*convertFP8Arithmetic=*/true,
          /*saturateFP8Truncf=*/false, /*allowPackedF16Rtz=*/false,
          /*supportsScaledExtTrunc=*/*chip == amdgpu::Chipset(9, 5, 0), *chip);
    }
    if (failed(applyPatternsGreedily(getOperation(), std::move(slicePatterns))))
      signalPassFailure();
  }
};
} // namespace
