//===- SM90TensorCore.cpp - sm_90a: QK and PV on mma.sync -----------------===//
//
// Both contractions run on `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}`
// from the operands in shared memory (f16 for fp8 caches, bf16 otherwise),
// loaded by ldmatrix.x4. Lane 4 g + t of a warp holds, of
// a 16 x 16 A fragment, rows g and g + 8 at columns 2 t, 2 t + 1 and
// 2 t + 8, 2 t + 9; of a 16 x 8 B fragment (k x n), column g at rows
// 2 t, 2 t + 1 and 2 t + 8, 2 t + 9; of the 16 x 8 accumulator, rows g and
// g + 8 at columns 2 t, 2 t + 1.
//
// QK: A = the block's 16 Q rows, B = Kᵀ: each warp scores a group of tile
// rows (SM90KernelPlan::scoreRowsPerWarp: n-blocks of 8, one Q fragment for
// all) over its share of Dqk's k-steps; the warps of a group add their
// partials through shared memory. PV: A = P (16 x kv_tile),
// B = the tile's first Dv columns: each warp owns Dv n-blocks w, w + 8, ...
// A 32-row block repeats the A side for its second row fragment (rows 16
// to 31 of Q and P): every K and V fragment feeds both.
//
//===----------------------------------------------------------------------===//

#include "SM90Kernels.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mla;

namespace {
/// QK k-steps per loop iteration, at most.
constexpr int64_t kScoreUnroll = 6;

/// Two operand values as an mma fragment register: bf16 pairs as an i32 (the
/// first in the low half), f16 pairs as they are (nvvm.mma.sync's types).
Value packPair(OpBuilder &b, Location loc, Value pair) {
  if (cast<VectorType>(pair.getType()).getElementType().isF16())
    return pair;
  auto asI32 = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, loc, asI32, ArrayRef<int64_t>{0});
}
} // namespace

SmallVector<Value> SM90PartialKernel::loadMatrices(OpBuilder &b, Value mem,
                                                   ValueRange indices,
                                                   int64_t tiles,
                                                   bool transpose) {
  auto type = VectorType::get({tiles, 2}, operandType(b));
  Value m = nvgpu::LdMatrixOp::create(b, loc, type, mem, indices, transpose,
                                      tiles);
  SmallVector<Value> regs;
  for (int64_t i = 0; i < tiles; ++i)
    regs.push_back(packPair(
        b, loc, vector::ExtractOp::create(b, loc, m, ArrayRef<int64_t>{i})));
  return regs;
}

SmallVector<Value> SM90PartialKernel::mma(OpBuilder &b, ArrayRef<Value> a,
                                          ArrayRef<Value> bFrag,
                                          ArrayRef<Value> c) {
  Type f32 = b.getF32Type();
  NVVM::MMATypes operands = format == CacheFormat::FP8 ? NVVM::MMATypes::f16
                                                       : NVVM::MMATypes::bf16;
  auto result = LLVM::LLVMStructType::getLiteral(b.getContext(),
                                                 {f32, f32, f32, f32});
  Value d = NVVM::MmaOp::create(
      b, loc, result, a, bFrag, c, ArrayRef<int64_t>{16, 8, 16},
      std::nullopt, std::nullopt,
      std::array<NVVM::MMATypes, 2>{operands, operands},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, d, i));
  return out;
}

void SM90PartialKernel::emitScoreMma(OpBuilder &b) {
  KernelBuilder k{b, loc};
  Value g = thread.group, t2 = k.mul(thread.pair, k.idx(2));
  int64_t parts = plan.scoreParts();
  Value group = k.rem(thread.warp, k.idx(plan.scoreGroups()));
  Value part = k.div(thread.warp, k.idx(plan.scoreGroups()));
  int64_t blocks = plan.scoreBlocksPerWarp();
  Value firstRow = k.mul(group, k.idx(plan.scoreRowsPerWarp()));
  Value g8 = k.add(g, k.idx(8));
  Value c2 = k.idx(2), matrix = thread.matrix, r8 = thread.matrixRow;
  // ldmatrix.x4: lane 8 i + r names row r of 8 x 8 matrix i. Q's are
  // (rows 0-7 | 8-15) x (columns 0-7 | 8-15) of the k-step: a0..a3; K's
  // two n-blocks' b0, b1 a load (rows of K are columns of Kᵀ).
  Value qRow = thread.stepRow;
  Value qColumn = k.mul(k.div(matrix, c2), k.idx(8));
  // K's row group (of 8 rows) and 8-column chunk.
  Value kRowGroup = k.add(k.div(firstRow, k.idx(8)), k.div(matrix, c2));
  Value kChunk = k.rem(matrix, c2);
  // A k-step's operands: Q's fragment, then K's (fp8: its raw words, one an
  // n-block, converted where they are used).
  auto loadStep = [&](Value step) {
    Value d = k.mul(step, k.idx(16));
    SmallVector<Value> operands;
    for (int64_t f = 0; f < plan.rowFragments(); ++f)
      llvm::append_range(operands, loadMatrices(b, smem.q,
                                                {k.add(qRow, k.idx(16 * f)),
                                                 k.add(d, qColumn)},
                                                4, false));
    if (format == CacheFormat::FP8)
      llvm::append_range(operands, loadFp8KWords(b, firstRow, d, blocks));
    else
      for (int64_t n = 0; n < blocks; n += 2)
        llvm::append_range(
            operands,
            loadMatrices(b, operandTile(),
                         tileIndices(b, k.add(kRowGroup, k.idx(n)), r8,
                                     k.add(k.mul(step, c2), kChunk)),
                         4, false));
    return operands;
  };
  // The n-blocks' accumulators of each row fragment: one Q fragment per
  // k-step feeds its n-blocks, one K fragment every row fragment.
  int64_t fragments = plan.rowFragments();
  auto scoreStep = [&](ArrayRef<Value> operands, ArrayRef<Value> acc) {
    SmallVector<Value> kFrags;
    for (Value v : operands.drop_front(4 * fragments)) {
      if (format != CacheFormat::FP8) {
        kFrags.push_back(v);
        continue;
      }
      std::array<Value, 2> pair = fp8WordToF16(b, loc, v);
      kFrags.append(pair.begin(), pair.end());
    }
    SmallVector<Value> next;
    for (int64_t f = 0; f < fragments; ++f)
      for (int64_t n = 0; n < blocks; ++n)
        llvm::append_range(next, mma(b, operands.slice(4 * f, 4),
                                     {kFrags[2 * n], kFrags[2 * n + 1]},
                                     acc.slice(4 * (f * blocks + n), 4)));
    return next;
  };
  // The warp's k-steps part, part + parts, ...: a loop of `unroll` steps an
  // iteration, so that ptxas overlaps the next steps' shared-memory loads
  // with this step's mmas, while the addresses stay one register and
  // constant offsets (straight-line code has them all hoisted out of the
  // KV loop, a register each). Loading the next step's operands a step
  // ahead, carried by the loop, measured slower: 24 bytes of spills.
  int64_t whole = plan.kSteps() / parts;
  int64_t unroll = kScoreUnroll;
  while (whole % unroll != 0)
    --unroll;
  SmallVector<Value> zeros(4 * blocks * fragments, k.f32(0.0));
  auto loop = scf::ForOp::create(
      b, loc, part, k.add(part, k.idx(whole * parts)),
      k.idx(unroll * parts), zeros,
      [&](OpBuilder &lb, Location, Value first, ValueRange carried) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(lb.getInsertionBlock());
        SmallVector<Value> acc(carried);
        for (int64_t u = 0; u < unroll; ++u)
          acc = scoreStep(loadStep(k.add(first, k.idx(u * parts))), acc);
        scf::YieldOp::create(b, loc, acc);
      });
  // LLVM would unroll the loop's few iterations and hoist their addresses.
  // scf-to-cf and cf-to-llvm carry the attribute to the latch branch, whose
  // inherent loop_annotation it is.
  auto noUnroll = LLVM::LoopUnrollAttr::get(
      b.getContext(), /*disable=*/b.getBoolAttr(true), {}, {}, {}, {}, {}, {});
  auto keep = LLVM::LoopAnnotationAttr::get(
      b.getContext(), {}, {}, {}, noUnroll, {}, {}, {}, {}, {}, {}, {}, {},
      {}, {}, {});
  loop->setAttr("loop_annotation", keep);
  SmallVector<Value> acc(loop.getResults());
  // When parts does not divide Dqk's k-steps, the first warps take one more.
  if (plan.kSteps() % parts != 0) {
    Value step = k.add(part, k.idx(whole * parts));
    auto last = scf::IfOp::create(
        b, loc, k.lessThan(step, k.idx(plan.kSteps())),
        [&](OpBuilder &ib, Location) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
          scf::YieldOp::create(b, loc, scoreStep(loadStep(step), acc));
        },
        [&](OpBuilder &eb, Location) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(eb.getInsertionBlock(), eb.getInsertionPoint());
          scf::YieldOp::create(b, loc, acc);
        });
    acc.assign(last.getResults().begin(), last.getResults().end());
  }
  // Each accumulator pair (columns 2 t, 2 t + 1) in one 8-byte store.
  auto f32x2 = VectorType::get({2}, b.getF32Type());
  for (int64_t f = 0; f < fragments; ++f) {
    for (int64_t n = 0; n < blocks; ++n) {
      Value col = k.add(k.add(firstRow, k.idx(8 * n)), t2);
      int64_t first = 4 * (f * blocks + n);
      for (int64_t half = 0; half < 2; ++half) {
        Value pair = vector::FromElementsOp::create(
            b, loc, f32x2,
            ValueRange{acc[first + 2 * half], acc[first + 2 * half + 1]});
        Value row = k.add(half ? g8 : g, k.idx(16 * f));
        vector::StoreOp::create(b, loc, pair, smem.partialScores,
                                ValueRange{part, row, col},
                                /*nontemporal=*/false, llvm::Align(8));
      }
    }
  }
}

SmallVector<Value> SM90PartialKernel::loadFp8KWords(OpBuilder &b, Value row0,
                                                    Value d, int64_t blocks) {
  KernelBuilder k{b, loc};
  // Lanes 8 i + r name row r of n-block i % blocks (x2: lanes 16..31 are
  // ignored).
  Value row = k.add(row0, k.add(k.mul(k.rem(thread.matrix, k.idx(blocks)),
                                      k.idx(8)),
                                thread.matrixRow));
  return loadStageWords(b, fp8StageIndices(b, row, d), blocks,
                        /*transpose=*/false);
}

Value SM90PartialKernel::stageRow(OpBuilder &b, Value j) {
  if (!plan.rowGroups())
    return j;
  // SM90KernelPlan::stageRowOf.
  KernelBuilder k{b, loc};
  Value g = k.idx(SM90KernelPlan::kGroupRows), c2 = k.idx(2), c4 = k.idx(4);
  Value m = k.div(j, g), e = k.rem(j, g);
  Value group = k.add(k.mul(k.div(m, c4), c4), k.div(e, c2));
  return k.add(k.mul(group, g), k.add(k.mul(k.rem(m, c4), c2), k.rem(e, c2)));
}

SmallVector<Value> SM90PartialKernel::fp8StageIndices(OpBuilder &b, Value row,
                                                      Value byte) {
  KernelBuilder k{b, loc};
  Value physical = stageRow(b, row);
  Value rows = k.idx(plan.stageGroupRows());
  Value inGroup = k.mul(k.rem(physical, rows), k.idx(plan.stageRowOffset()));
  return {computeStage, k.div(physical, rows),
          k.div(k.add(inGroup, byte), k.idx(2))};
}

SmallVector<Value> SM90PartialKernel::loadStageWords(OpBuilder &b,
                                                     ValueRange indices,
                                                     int64_t tiles,
                                                     bool transpose) {
  auto type = VectorType::get({tiles, 2}, b.getI16Type());
  Value m = nvgpu::LdMatrixOp::create(b, loc, type, smem.stages, indices,
                                      transpose, tiles);
  SmallVector<Value> words;
  for (int64_t i = 0; i < tiles; ++i)
    words.push_back(vector::ExtractOp::create(
        b, loc,
        vector::BitCastOp::create(
            b, loc, VectorType::get({1}, b.getI32Type()),
            vector::ExtractOp::create(b, loc, m, ArrayRef<int64_t>{i})),
        ArrayRef<int64_t>{0}));
  return words;
}

SmallVector<std::array<Value, 2>>
SM90PartialKernel::loadFp8VFragments(OpBuilder &b, Value row0, Value group) {
  KernelBuilder k{b, loc};
  // One ldmatrix.x4.trans of the stage's byte pairs: matrix i is rows
  // row0 + 8 (i % 2) .. + 7 at bytes 32 group + 16 (i / 2) .. + 15, and
  // lane 4 g + t receives, transposed, the pairs (bytes 2 g, 2 g + 1) of
  // its rows 2 t and 2 t + 1: V[2t][2g], V[2t][2g+1], V[2t+1][2g],
  // V[2t+1][2g+1] (byte 0 first).
  Value col = k.add(k.mul(group, k.idx(SM90KernelPlan::kGroupColumns)),
                    k.mul(k.div(thread.matrix, k.idx(2)), k.idx(16)));
  SmallVector<Value> m =
      loadStageWords(b, fp8StageIndices(b, k.add(row0, thread.stepRow), col), 4,
                     /*transpose=*/true);
  // prmt takes the even or odd column's bytes of rows 2 t, 2 t + 1 (matrix
  // 0 or 2) and 2 t + 8, 2 t + 9 (matrix 1 or 3): B's k order. Block j of
  // the group holds its columns 16 (j / 2) + 2 n + j % 2.
  SmallVector<std::array<Value, 2>> frags;
  for (int64_t half = 0; half < 2; ++half)
    for (int64_t selector : {0x6420, 0x7531})
      frags.push_back(fp8WordToF16(
          b, loc,
          permute(b, loc, m[2 * half], m[2 * half + 1], k.i32(selector))));
  return frags;
}

SmallVector<SM90PartialKernel::OutputVector>
SM90PartialKernel::outputVectors(OpBuilder &b) {
  KernelBuilder k{b, loc};
  SmallVector<OutputVector> vectors;
  if (format == CacheFormat::FP8) {
    // Block j of a group holds its columns 16 (j / 2) + 2 n + j % 2: the
    // thread's pairs (n = 2 t, 2 t + 1) in blocks 2 h and 2 h + 1 are
    // columns 16 h + 4 t .. + 3.
    Value t4 = k.mul(thread.pair, k.idx(4));
    for (int64_t gi = 0; gi < plan.outputGroupsPerWarp(); ++gi) {
      Value group = k.add(thread.warp, k.idx(plan.warps() * gi));
      Value inDv = k.lessThan(group, k.idx(plan.outputGroups()));
      Value first = k.mul(group, k.idx(SM90KernelPlan::kGroupColumns));
      for (int64_t h = 0; h < 2; ++h) {
        OutputVector v{k.add(first, k.add(k.idx(16 * h), t4)), inDv, {}};
        for (int64_t e = 0; e < 2; ++e)
          for (int64_t j = 2 * h; j < 2 * h + 2; ++j)
            v.accumulators.push_back(4 * (4 * gi + j) + e);
        vectors.push_back(v);
      }
    }
    return vectors;
  }
  // The pair of block j: columns 8 block + 2 t, + 1; in the decoded tile's
  // order (mxfp4) the pair the lanes' trade leaves (tradeWithNeighbour):
  // columns 8 block + 4 (t mod 2) + 2 (t / 2), + 1.
  Value t2 = k.mul(thread.pair, k.idx(2));
  if (plan.decodesTile())
    t2 = k.add(k.mul(k.rem(thread.pair, k.idx(2)), k.idx(4)),
               k.mul(k.div(thread.pair, k.idx(2)), k.idx(2)));
  for (int64_t j = 0; j < plan.outputBlocksPerWarp(); ++j) {
    Value block = k.add(thread.warp, k.idx(plan.warps() * j));
    vectors.push_back({k.add(k.mul(block, k.idx(8)), t2),
                       k.lessThan(block, k.idx(plan.outputBlocks())),
                       {4 * j, 4 * j + 1}});
  }
  return vectors;
}

SmallVector<Value> SM90PartialKernel::emitScores(OpBuilder &b,
                                                 Value tileStart) {
  KernelBuilder k{b, loc};
  // Position tileStart + c is visible while it is before both the item's
  // end and the token's causal end. Positions fit 32 bits (the runtime
  // refuses a sequence past 2^31 - 1, and tiles start at multiples of their
  // power-of-two size): one instruction a compare where 64 bits take three.
  Type i32 = b.getI32Type();
  auto to32 = [&](Value v) {
    return arith::IndexCastOp::create(b, loc, i32, v).getResult();
  };
  Value end = to32(k.minS(item.end, thread.visibleEnd));
  // The thread's columns are consecutive: one vector of each part.
  int64_t width = plan.tileRowsPerLane();
  Value first = k.mul(thread.lane, k.idx(width));
  Value firstPos = to32(k.add(tileStart, first));
  auto type = VectorType::get({width}, b.getF32Type());
  Value sum;
  for (int64_t part = 0; part < plan.scoreParts(); ++part) {
    Value v = vector::LoadOp::create(
        b, loc, type, smem.partialScores,
        ValueRange{k.idx(part), thread.row, first}, /*nontemporal=*/false,
        llvm::Align(4 * width));
    sum = sum ? Value(arith::AddFOp::create(b, loc, sum, v)) : v;
  }
  SmallVector<Value> scores;
  for (int64_t j = 0; j < width; ++j) {
    Value dot = vector::ExtractOp::create(b, loc, sum, ArrayRef<int64_t>{j});
    // Column first + j is tile row stageRow(first + j) (fp8 row groups).
    Value pos =
        plan.rowGroups()
            ? to32(k.add(tileStart, stageRow(b, k.add(first, k.idx(j)))))
            : arith::AddIOp::create(b, loc, firstPos, k.i32(j)).getResult();
    Value visible =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, pos, end);
    scores.push_back(arith::SelectOp::create(
        b, loc, visible, k.fmul(dot, rowScoreScale), negInf));
  }
  return scores;
}

SmallVector<Value> SM90PartialKernel::emitOutputMma(OpBuilder &b,
                                                    ValueRange acc) {
  KernelBuilder k{b, loc};
  // Row fragment f's accumulators follow fragment f - 1's; of each 4, two
  // are row g's, two row g + 8's.
  int64_t perWarp = plan.outputBlocksPerWarp();
  int64_t fragmentAcc = 4 * perWarp, fragments = plan.rowFragments();
  SmallVector<Value> next;
  for (int64_t f = 0; f < fragments; ++f) {
    Value g = k.add(thread.group, k.idx(16 * f));
    Value factorG = k.load(smem.factors, {g});
    Value factorG8 = k.load(smem.factors, {k.add(g, k.idx(8))});
    for (int64_t i = 0; i < fragmentAcc; ++i)
      next.push_back(
          k.fmul(acc[f * fragmentAcc + i], (i % 4) < 2 ? factorG : factorG8));
  }
  // D = A · B + D for accumulator block `block` of every row fragment, A
  // the fragment's (first) operand.
  auto mmaAll = [&](ArrayRef<SmallVector<Value>> a, int64_t block,
                    ArrayRef<Value> bFrag) {
    for (int64_t f = 0; f < fragments; ++f) {
      auto at = next.begin() + f * fragmentAcc + 4 * block;
      SmallVector<Value> d(at, at + 4);
      d = mma(b, a[f], bFrag, d);
      std::copy(d.begin(), d.end(), at);
    }
  };
  Value matrix = thread.matrix, c2 = k.idx(2);
  // P's A fragment: (rows 0-7 | 8-15) x (columns 0-7 | 8-15) of the step;
  // V's matrices the same rows of the step.
  Value stepRow = thread.stepRow;
  for (int64_t kk = 0; kk < tile / 16; ++kk) {
    Value pCol =
        k.add(k.idx(16 * kk), k.mul(k.div(matrix, c2), k.idx(8)));
    // P's parts (fp8: one) of each row fragment, each an mma on the same V
    // fragments: aParts[part][fragment].
    SmallVector<SmallVector<SmallVector<Value>>> aParts(plan.pParts());
    for (int64_t part = 0; part < plan.pParts(); ++part)
      for (int64_t f = 0; f < fragments; ++f)
        aParts[part].push_back(loadMatrices(
            b, smem.p, {k.idx(part), k.add(stepRow, k.idx(16 * f)), pCol}, 4,
            false));
    if (format == CacheFormat::FP8) {
      // Groups past Dv read the last one; their results are not stored.
      for (int64_t gi = 0; gi < plan.outputGroupsPerWarp(); ++gi) {
        Value group = k.minS(k.add(thread.warp, k.idx(plan.warps() * gi)),
                             k.idx(plan.outputGroups() - 1));
        auto frags = loadFp8VFragments(b, k.idx(16 * kk), group);
        for (int64_t j = 0; j < 4; ++j)
          mmaAll(aParts[0], 4 * gi + j, {frags[j][0], frags[j][1]});
      }
      continue;
    }
    // V's B fragments, transposed out of the row-major tile: matrices
    // (rows 0-7 | 8-15) of the step x the 8 columns of an n-block, two
    // n-blocks per load (blocks past Dv read the last one; their results
    // are not stored).
    Value vRowGroup = k.add(k.idx(2 * kk), k.rem(matrix, c2));
    for (int64_t j = 0; j < perWarp; j += 2) {
      int64_t blocks = std::min<int64_t>(2, perWarp - j);
      Value which = blocks == 2 ? k.div(matrix, c2) : c0;
      Value block = k.minS(k.add(thread.warp, k.mul(k.add(k.idx(j), which),
                                                    k.idx(plan.warps()))),
                           k.idx(plan.outputBlocks() - 1));
      SmallVector<Value> vFrags =
          loadMatrices(b, operandTile(),
                       tileIndices(b, vRowGroup, thread.matrixRow, block),
                       2 * blocks, true);
      for (int64_t n = 0; n < blocks; ++n)
        for (ArrayRef<SmallVector<Value>> aPart : aParts)
          mmaAll(aPart, j + n, {vFrags[2 * n], vFrags[2 * n + 1]});
    }
  }
  return next;
}

SM90PartialKernel::OutputRow SM90PartialKernel::outputRow(OpBuilder &b,
                                                          Value row) {
  KernelBuilder k{b, loc};
  Value rowIndex = k.add(item.firstRow, row);
  Value token = k.div(rowIndex, k.idx(numHeads));
  Value head = k.rem(rowIndex, k.idx(numHeads));
  return {k.load(smem.factors, {row}), k.lessThan(rowIndex, item.numRows),
          {k.add(item.qBegin, token), head},
          {item.slot, token, head}};
}

SmallVector<Value> SM90PartialKernel::tradeWithNeighbour(OpBuilder &b,
                                                         ValueRange pair) {
  KernelBuilder k{b, loc};
  // Lane t holds decoded positions 2 t, 2 t + 1 of a group: columns t and
  // t + 4. Lanes 2 u and 2 u + 1 trade one value each (every lane of the
  // warp shuffles): the even keeps columns 2 u, 2 u + 1, the odd 2 u + 4,
  // 2 u + 5.
  Value odd = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                    k.rem(thread.pair, k.idx(2)), c0);
  Value sent = arith::SelectOp::create(b, loc, odd, pair[0], pair[1]);
  Value received = gpu::ShuffleOp::create(b, loc, sent, k.i32(1), k.i32(32),
                                          gpu::ShuffleMode::XOR)
                       .getShuffleResult();
  return {arith::SelectOp::create(b, loc, odd, received, pair[0]),
          arith::SelectOp::create(b, loc, odd, pair[1], received)};
}

void SM90PartialKernel::emitOutputStores(OpBuilder &b, ValueRange acc,
                                         Value direct) {
  KernelBuilder k{b, loc};
  SmallVector<OutputVector> vectors = outputVectors(b);
  // Rows g + 8 rowHalf: fragment rowHalf / 2, its half rowHalf % 2.
  int64_t fragmentAcc = 4 * plan.outputBlocksPerWarp();
  auto accIndex = [&](int64_t rowHalf, int64_t a) {
    return rowHalf / 2 * fragmentAcc + a + 2 * (rowHalf % 2);
  };
  SmallVector<Value> outputs(acc);
  // mxfp4: whole column pairs, traded once for both branches.
  if (plan.decodesTile())
    for (int64_t rowHalf = 0; rowHalf < 2 * plan.rowFragments(); ++rowHalf)
      for (const OutputVector &v : vectors) {
        Value &a0 = outputs[accIndex(rowHalf, v.accumulators[0])];
        Value &a1 = outputs[accIndex(rowHalf, v.accumulators[1])];
        SmallVector<Value> pair = tradeWithNeighbour(b, {a0, a1});
        a0 = pair[0];
        a1 = pair[1];
      }
  // Final rows to out as bf16, else to the item's partials; one vector of
  // consecutive columns a store (one address), one branch for the choice.
  auto stores = [&](bool final) {
    return [&, final](OpBuilder &bb, Location) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(bb.getInsertionBlock(), bb.getInsertionPoint());
      for (int64_t rowHalf = 0; rowHalf < 2 * plan.rowFragments(); ++rowHalf) {
        OutputRow row = outputRow(b, k.add(thread.group, k.idx(8 * rowHalf)));
        for (const OutputVector &v : vectors) {
          SmallVector<Value> values;
          for (int64_t a : v.accumulators)
            values.push_back(k.fmul(outputs[accIndex(rowHalf, a)], row.factor));
          // A vector's first column is a multiple of its width and Dv of
          // 8, so each store is aligned to its size (the runtime requires
          // out and the workspace 16-byte aligned): one wide store, not a
          // store per element.
          int64_t width = values.size();
          auto type = VectorType::get({width}, b.getF32Type());
          Value vec = vector::FromElementsOp::create(b, loc, type, values);
          ifThen(b, loc, arith::AndIOp::create(b, loc, row.isReal, v.inDv),
                 [&] {
                   if (final)
                     vector::StoreOp::create(
                         b, loc,
                         arith::TruncFOp::create(
                             b, loc, type.clone(b.getBF16Type()), vec),
                         args.out, row.outIndices(v.col),
                         /*nontemporal=*/false, llvm::Align(2 * width));
                   else
                     vector::StoreOp::create(
                         b, loc, vec, args.partialOut,
                         row.partialIndices(v.col), /*nontemporal=*/false,
                         llvm::Align(4 * width));
                 });
        }
      }
      scf::YieldOp::create(b, loc);
    };
  };
  scf::IfOp::create(b, loc, direct, stores(true), stores(false));
}
