// Generation follows the benchmark recipe; validation names each bad input.
#include "mla/Runtime/Numerics.h"
#include "mla/Tools/Problem.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mla;

namespace {
std::string validationError(const DecodeProblem &p) {
  llvm::Error err = validateProblem(p);
  return err ? llvm::toString(std::move(err)) : "";
}
DecodeProblem generated(CacheFormat format, std::vector<int64_t> lens,
                        int64_t qLen = 1) {
  GenerateOptions o;
  o.format = format;
  o.kvLens = std::move(lens);
  o.qLen = qLen;
  auto p = generateProblem(o);
  EXPECT_TRUE(bool(p)) << llvm::toString(p.takeError());
  return std::move(*p);
}
DecodeProblem small() { return generated(CacheFormat::BF16, {5, 0, 3}, 2); }
} // namespace

TEST(Generate, BuildsIndptrsFromLengths) {
  DecodeProblem p = small();
  EXPECT_EQ(p.qoIndptr, (std::vector<int32_t>{0, 2, 4, 6}));
  EXPECT_EQ(p.kvIndptr, (std::vector<int32_t>{0, 5, 5, 8}));
  EXPECT_EQ(p.numTokens, 6);
  EXPECT_EQ(p.numRows, 8);
  EXPECT_EQ(p.q.size(), 6u * 16 * 576);
}

TEST(Generate, TakesOneQueryCountPerSequence) {
  GenerateOptions o;
  o.kvLens = {5, 0, 3};
  o.qLens = {1, 4, 2};
  auto p = generateProblem(o);
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  EXPECT_EQ(p->qoIndptr, (std::vector<int32_t>{0, 1, 5, 7}));
  EXPECT_EQ(p->numTokens, 7);
  o.qLens = {1, 4};
  auto wrong = generateProblem(o);
  ASSERT_FALSE(bool(wrong));
  EXPECT_EQ(llvm::toString(wrong.takeError()),
            "--q-len lists 2 token counts for 3 sequences");
}

TEST(Generate, OutliersScaleRowsAndColumnsAndLeaveTheRest) {
  GenerateOptions o;
  o.format = CacheFormat::BF16;
  o.kvLens = {40};
  auto plain = generateProblem(o);
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  o.outliers = 2;
  auto large = generateProblem(o);
  ASSERT_TRUE(bool(large)) << llvm::toString(large.takeError());
  // Up to 2 rows and 2 columns 30 times larger (900 where they cross, up
  // to bf16's rounding); every other value equal.
  int64_t changed = 0, rows = plain->numRows, cols = plain->qkDim;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double a = plain->kvValue(r, c), b = large->kvValue(r, c);
      if (a == b)
        continue;
      ++changed;
      double ratio = b / a;
      EXPECT_TRUE(std::fabs(ratio - 30.0) < 0.3 || std::fabs(ratio - 900.0) < 9)
          << ratio;
    }
  EXPECT_GE(changed, cols);
  EXPECT_LE(changed, 2 * cols + 2 * rows);
  o.outliers = -1;
  auto bad = generateProblem(o);
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()), "--outliers -1 outside 0..1024");
}

TEST(Generate, Fp8ScaleIsAmaxOver448) {
  DecodeProblem p = generated(CacheFormat::FP8, {64});
  // Some element reaches the top code, none exceeds it.
  double amax = 0.0;
  for (int64_t i = 0; i < p.numRows * p.qkDim; ++i)
    amax = std::max(amax, std::fabs(decodeE4M3(p.kv[i])));
  EXPECT_EQ(amax, 448.0);
}

TEST(Generate, MxScalesPutEachBlockMaxInFourToEight) {
  DecodeProblem p = generated(CacheFormat::MXFP4, {16});
  EXPECT_EQ(p.mxScales.size(), 16u * 18);
  for (int64_t row = 0; row < p.numRows; ++row)
    for (int64_t blk = 0; blk < 18; ++blk) {
      double amax = 0.0, scale = decodeE8M0(p.mxScales[row * 18 + blk]);
      for (int i = 0; i < 32; ++i)
        amax = std::max(amax, std::fabs(p.kvValue(row, blk * 32 + i)) / scale);
      EXPECT_GE(amax, 3.0); // 4..8 before rounding; 3 after a round-down tie
      EXPECT_LE(amax, 6.0);
    }
}

TEST(Generate, IsDeterministicInTheSeed) {
  GenerateOptions o;
  o.kvLens = {8};
  auto a = generateProblem(o), b = generateProblem(o);
  o.seed = 1;
  auto c = generateProblem(o);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->kv, b->kv);
  EXPECT_NE(a->kv, c->kv);
}

TEST(Generate, RejectsMismatchedLengthList) {
  GenerateOptions o;
  o.batch = 4;
  o.kvLens = {1, 2};
  auto p = generateProblem(o);
  ASSERT_FALSE(bool(p));
  EXPECT_EQ(llvm::toString(p.takeError()), "--kv-len lists 2 lengths for --batch 4");
}

TEST(Validate, NamesEachBadInput) {
  EXPECT_EQ(validationError(small()), "");
  DecodeProblem p = small();
  p.qoIndptr[0] = 1;
  EXPECT_EQ(validationError(p), "qo_indptr[0] = 1, must be 0");
  p = small();
  p.kvIndptr[2] = 9;
  EXPECT_EQ(validationError(p), "kv_indptr decreases at sequence 2 (9 -> 8)");
  p = small();
  p.kvIndptr[3] = 9;
  EXPECT_EQ(validationError(p),
            "kv_indptr points past the kv rows: ends at 9, kv holds N = 8 rows");
  p = small();
  p.qoIndptr = {0, 5, 6, 6};
  EXPECT_EQ(validationError(p),
            "sequence 0 has q_len = 5 query tokens; 1..4 are supported");
  p = small();
  p.qoIndptr.pop_back();
  EXPECT_EQ(validationError(p), "qo_indptr has 3 entries but kv_indptr has 4: "
                                "both must be [B+1]");
  p = small();
  p.numHeads = 24;
  EXPECT_EQ(validationError(p),
            "number of heads H = 24 must be a multiple of 16 in 16..128");
}
