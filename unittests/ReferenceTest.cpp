// The float64 reference on cases small enough to work out by hand.
#include "mla/Runtime/Numerics.h"
#include "mla/Tools/Reference.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mla;

namespace {
/// H = 16, Dqk = 64, Dv = 32, bf16 cache holding exactly representable values.
DecodeProblem handProblem(int64_t kvLen, int64_t qLen) {
  DecodeProblem p;
  p.format = CacheFormat::BF16;
  p.numHeads = 16;
  p.qkDim = 64;
  p.vDim = 32;
  p.numTokens = qLen;
  p.numRows = kvLen;
  p.qoIndptr = {0, (int32_t)qLen};
  p.kvIndptr = {0, (int32_t)kvLen};
  p.q.assign(qLen * 16 * 64, floatToBF16(0.0f));
  p.kv.assign(kvLen * 64 * 2, 0);
  return p;
}
void setKv(DecodeProblem &p, int64_t row, int64_t col, float v) {
  uint16_t bits = floatToBF16(v);
  p.kv[(row * p.qkDim + col) * 2] = bits & 0xFF;
  p.kv[(row * p.qkDim + col) * 2 + 1] = bits >> 8;
}
} // namespace

TEST(Reference, SingleRowReturnsItsValues) {
  DecodeProblem p = handProblem(1, 1);
  for (int64_t d = 0; d < 64; ++d)
    setKv(p, 0, d, 0.25f * (d % 7) - 0.5f);
  for (auto &v : p.q)
    v = floatToBF16(1.0f);
  ReferenceResult r = referenceDecode(p);
  double score = 0.0;
  for (int64_t d = 0; d < 64; ++d)
    score += 0.25 * (d % 7) - 0.5;
  for (int64_t h = 0; h < 16; ++h) {
    for (int64_t e = 0; e < 32; ++e)
      EXPECT_DOUBLE_EQ(r.out[h * 32 + e], 0.25 * (e % 7) - 0.5);
    EXPECT_DOUBLE_EQ(r.lse[h], score / 8.0); // sm_scale = 1/sqrt(64)
  }
}

TEST(Reference, TwoRowsWeighByScores) {
  DecodeProblem p = handProblem(2, 1);
  // Row 0: key e_0, value 1 in column 1; row 1: key 0, value 3 in column 1.
  setKv(p, 0, 0, 8.0f);
  setKv(p, 0, 1, 1.0f);
  setKv(p, 1, 1, 3.0f);
  p.q[0] = floatToBF16(1.0f); // head 0 only: score 8 * 1 / 8 = 1 vs 0
  ReferenceResult r = referenceDecode(p);
  double w0 = std::exp(1.0) / (std::exp(1.0) + 1.0);
  // Column 0 is a value column too: row 0 holds 8 there.
  EXPECT_NEAR(r.out[0], w0 * 8.0, 1e-15);
  EXPECT_NEAR(r.out[1], w0 * 1.0 + (1 - w0) * 3.0, 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(std::exp(1.0) + 1.0), 1e-15);
  // Head 1 has q = 0: uniform weights.
  EXPECT_NEAR(r.out[32 + 1], 2.0, 1e-15);
  EXPECT_NEAR(r.lse[1], std::log(2.0), 1e-15);
}

TEST(Reference, CausalRuleAndEmptyRows) {
  // q_len = 3 over kv_len = 2: token 0 sees nothing, token 1 sees row 0,
  // token 2 sees rows 0 and 1.
  DecodeProblem p = handProblem(2, 3);
  setKv(p, 0, 0, 2.0f);
  setKv(p, 1, 0, 4.0f);
  ReferenceResult r = referenceDecode(p);
  int64_t stride = 16 * 32;
  EXPECT_EQ(r.out[0], 0.0);
  EXPECT_TRUE(std::isinf(r.lse[0]) && r.lse[0] < 0);
  EXPECT_DOUBLE_EQ(r.out[stride], 2.0);
  EXPECT_DOUBLE_EQ(r.lse[16], 0.0);
  EXPECT_DOUBLE_EQ(r.out[2 * stride], 3.0);
  EXPECT_DOUBLE_EQ(r.lse[32], std::log(2.0));
}

TEST(Reference, DequantizesFp8AndMxfp4) {
  DecodeProblem p = handProblem(1, 1);
  p.format = CacheFormat::FP8;
  p.kv.assign(64, 0x38); // 1.0 everywhere
  p.fp8Scale = 0.5f;
  EXPECT_EQ(referenceDecode(p).out[5], 0.5);

  p.format = CacheFormat::MXFP4;
  p.kv.assign(32, 0x7 | (0xA << 4)); // even elements 6.0, odd elements -1.0
  p.mxScales = {126, 128};           // 2^-1 for columns 0..31, 2^1 after
  ReferenceResult r = referenceDecode(p);
  EXPECT_EQ(r.out[0], 3.0);
  EXPECT_EQ(r.out[1], -0.5);
}

TEST(Compare, CountsOutOfToleranceAndNonFinite) {
  ReferenceResult ref;
  ref.out = {1.0, -2.0, NAN};
  ref.lse = {0.5, -INFINITY};
  std::vector<uint16_t> out = {floatToBF16(1.0f), floatToBF16(-2.0f),
                               floatToBF16(NAN)};
  std::vector<float> lse = {0.5f, -INFINITY};
  Tolerance tol{1e-3, 1e-3, 3e-3};
  EXPECT_TRUE(compareWithReference(ref, out, lse, tol).passed(tol));
  out[1] = floatToBF16(-2.1f);
  ErrorReport bad = compareWithReference(ref, out, lse, tol);
  EXPECT_EQ(bad.numOutOfTolerance, 1);
  EXPECT_EQ(bad.firstBadIndex, 1);
  out[1] = floatToBF16(-2.0f);
  out[2] = floatToBF16(0.0f); // reference NaN must stay NaN
  EXPECT_EQ(compareWithReference(ref, out, lse, tol).numOutOfTolerance, 1);
  lse[1] = 0.0f;
  EXPECT_EQ(compareWithReference(ref, out, lse, tol).numLseMismatches, 1);
}

TEST(Compare, RelErrBarAllowsTheReferencesOwnBf16Rounding) {
  // 1 + 2^-8 lies halfway between two bf16 values: the best bf16 output
  // (1.0, ties to even) is 3.9e-3 off, past the 3e-3 bar alone.
  ReferenceResult ref;
  ref.out.assign(8, 1.0 + 1.0 / 256);
  ref.lse = {0.0};
  std::vector<float> lse = {0.0f};
  std::vector<uint16_t> best(8, floatToBF16(1.0f));
  Tolerance tol = defaultTolerance(CacheFormat::FP8);
  ErrorReport report = compareWithReference(ref, best, lse, tol);
  EXPECT_NEAR(report.roundingRelErr, 1.0 / 257, 1e-9);
  EXPECT_DOUBLE_EQ(report.relErr, report.roundingRelErr);
  EXPECT_TRUE(report.passed(tol));
  // One bf16 step further (2^-7 off, 7.8e-3) is past both bars.
  std::vector<uint16_t> worse(8, floatToBF16(1.0f - 1.0f / 256));
  EXPECT_FALSE(compareWithReference(ref, worse, lse, tol).passed(tol));
  // A fixed bar (the kernels' on the emu) does not move.
  tol.maxRelErr = 3e-3;
  tol.overRounding = 0.0;
  EXPECT_FALSE(report.passed(tol));
}

TEST(Reference, AbsoluteBoundScalesWithTheTermsAnOutputAverages) {
  // Column 1 holds +30 and -30 (an outlier column) under equal weights:
  // the output is 0, its terms 30 in size; column 2 holds 0.5 and -0.5.
  DecodeProblem p = handProblem(2, 1);
  setKv(p, 0, 1, 30.0f);
  setKv(p, 1, 1, -30.0f);
  setKv(p, 0, 2, 0.5f);
  setKv(p, 1, 2, -0.5f);
  ReferenceResult ref = referenceDecode(p);
  EXPECT_DOUBLE_EQ(ref.out[1], 0.0);
  EXPECT_DOUBLE_EQ(ref.absoluteScale(1), 30.0);
  EXPECT_DOUBLE_EQ(ref.absoluteScale(2), 1.0); // terms below unit scale
  EXPECT_DOUBLE_EQ(ref.absoluteScale(0), 1.0); // no terms at all
  // A weight rounded to bf16 (p = 0.5 + 2^-9 on row 0) moves column 1 by
  // 30 · 2^-8 = 0.117: within 8e-3 · 30, past the unit bar of 8e-3.
  Tolerance tol = kernelTolerance(CacheFormat::BF16);
  std::vector<uint16_t> out(ref.out.size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = floatToBF16(static_cast<float>(ref.out[i]));
  out[1] = floatToBF16(0.117f);
  std::vector<float> lse(ref.lse.begin(), ref.lse.end());
  EXPECT_EQ(compareWithReference(ref, out, lse, tol).numOutOfTolerance, 0);
  // The same error on column 2, whose terms are of unit scale, fails.
  out[1] = floatToBF16(0.0f);
  out[2] = floatToBF16(0.117f);
  EXPECT_EQ(compareWithReference(ref, out, lse, tol).numOutOfTolerance, 1);
  // Past 8e-3 · 30 on column 1 fails too.
  out[2] = floatToBF16(0.0f);
  out[1] = floatToBF16(0.25f);
  EXPECT_EQ(compareWithReference(ref, out, lse, tol).numOutOfTolerance, 1);
}
