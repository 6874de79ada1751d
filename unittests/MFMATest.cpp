// The MFMA models against plain matrix products: random operands are laid
// out into lanes by the layouts AMD documents (docs/mfma-layouts.md), and by
// the hand-written MI355X kernel's description of the same instruction.
#include "mla/Emu/MFMA.h"
#include "mla/Runtime/Numerics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mla;
using namespace mla::emu;

namespace {
uint8_t randomFp8(std::mt19937 &rng) {
  uint8_t code;
  do {
    code = rng() & 0xFF;
  } while ((code & 0x7F) == 0x7F); // skip the NaN codes
  return code;
}

Accumulator randomAccumulator(std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  Accumulator c;
  for (auto &lane : c)
    for (float &v : lane)
      v = dist(rng);
  return c;
}

/// D element r of lane l is D[4·(l/16) + r][l % 16].
float dElement(const Accumulator &d, int m, int n) {
  return d[16 * (m / 4) + n][m % 4];
}
float cElement(const Accumulator &c, int m, int n) {
  return c[16 * (m / 4) + n][m % 4];
}
} // namespace

TEST(MFMA, Fp8MatchesMatrixProduct) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 20; ++trial) {
    uint8_t A[16][128], B[128][16];
    for (auto &row : A)
      for (uint8_t &v : row)
        v = randomFp8(rng);
    for (auto &row : B)
      for (uint8_t &v : row)
        v = randomFp8(rng);
    // Layout (docs/mfma-layouts.md §1): A[m][k] in lane m + 16·((k%64)/16),
    // element k%16 + 16·(k/64); B[k][n] the same with n.
    Fp8Operand a, b;
    for (int i = 0; i < 16; ++i)
      for (int k = 0; k < 128; ++k) {
        a[i + 16 * ((k % 64) / 16)][k % 16 + 16 * (k / 64)] = A[i][k];
        b[i + 16 * ((k % 64) / 16)][k % 16 + 16 * (k / 64)] = B[k][i];
      }
    Accumulator c = randomAccumulator(rng);
    Accumulator d = mfma16x16x128Fp8(a, b, c);
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        double want = cElement(c, m, n);
        for (int k = 0; k < 128; ++k)
          want += decodeE4M3(A[m][k]) * decodeE4M3(B[k][n]);
        EXPECT_EQ(dElement(d, m, n), static_cast<float>(want)) << m << "," << n;
      }
  }
}

// The MI355X seed kernel's description of the same instruction: lane =
// 16·kg + mr; A's lane holds row mr and, of each 128-wide K chunk, bytes
// 16·kg..16·kg+15 then 64+16·kg..64+16·kg+15; D element r is row 4·kg + r,
// column mr. One-hot operands make every index visible.
TEST(MFMA, Fp8AgreesWithTheSeedKernelLayout) {
  const uint8_t one = 0x38; // e4m3 1.0
  for (int m0 : {0, 5, 15})
    for (int k0 : {0, 17, 63, 64, 90, 127})
      for (int n0 : {0, 9, 15}) {
        Fp8Operand a{}, b{};
        for (int kg = 0; kg < 4; ++kg)
          for (int mr = 0; mr < 16; ++mr)
            for (int j = 0; j < 16; ++j) {
              int lane = 16 * kg + mr;
              if (mr == m0 && k0 == 16 * kg + j)
                a[lane][j] = one;
              if (mr == m0 && k0 == 64 + 16 * kg + j)
                a[lane][16 + j] = one;
              if (mr == n0 && k0 == 16 * kg + j)
                b[lane][j] = one;
              if (mr == n0 && k0 == 64 + 16 * kg + j)
                b[lane][16 + j] = one;
            }
        Accumulator d = mfma16x16x128Fp8(a, b, Accumulator{});
        for (int lane = 0; lane < 64; ++lane)
          for (int r = 0; r < 4; ++r) {
            bool hit = (4 * (lane / 16) + r == m0) && (lane % 16 == n0);
            EXPECT_EQ(d[lane][r], hit ? 1.0f : 0.0f)
                << "m0=" << m0 << " k0=" << k0 << " n0=" << n0;
          }
      }
}

TEST(MFMA, ScaledFp8TimesFp4AppliesBlockScales) {
  std::mt19937 rng(2);
  for (int trial = 0; trial < 10; ++trial) {
    uint8_t A[16][128], B4[128][16];
    uint8_t sA[16][4], sB[16][4];
    for (auto &row : A)
      for (uint8_t &v : row)
        v = randomFp8(rng);
    for (auto &row : B4)
      for (uint8_t &v : row)
        v = rng() & 0xF;
    for (int i = 0; i < 16; ++i)
      for (int blk = 0; blk < 4; ++blk) {
        sA[i][blk] = 120 + rng() % 15;
        sB[i][blk] = 120 + rng() % 15;
      }
    // fp8 A as in §1; fp4 B: B[k][n] in lane n + 16·(k/32), nibble k%32
    // (byte (k%32)/2, even k low); scales: lane i + 16·b for block b.
    Fp8Operand a{}, b{};
    std::array<uint8_t, 64> scaleA{}, scaleB{};
    for (int i = 0; i < 16; ++i) {
      for (int k = 0; k < 128; ++k) {
        a[i + 16 * ((k % 64) / 16)][k % 16 + 16 * (k / 64)] = A[i][k];
        uint8_t &byte = b[i + 16 * (k / 32)][(k % 32) / 2];
        byte |= (k % 2) ? (B4[k][i] << 4) : B4[k][i];
      }
      for (int blk = 0; blk < 4; ++blk) {
        scaleA[i + 16 * blk] = sA[i][blk];
        scaleB[i + 16 * blk] = sB[i][blk];
      }
    }
    Accumulator c = randomAccumulator(rng);
    Accumulator d = scaledMfma16x16x128(MatrixFormat::FP8, MatrixFormat::FP4, a,
                                        b, scaleA, scaleB, c);
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        double want = cElement(c, m, n);
        for (int blk = 0; blk < 4; ++blk) {
          double partial = 0.0;
          for (int k = 32 * blk; k < 32 * blk + 32; ++k)
            partial += decodeE4M3(A[m][k]) * decodeE2M1(B4[k][n]);
          want += std::ldexp(partial, sA[m][blk] - 127 + sB[n][blk] - 127);
        }
        EXPECT_EQ(dElement(d, m, n), static_cast<float>(want));
      }
  }
}

TEST(MFMA, Bf16MatchesMatrixProduct) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  uint16_t A[16][32], B[32][16];
  for (auto &row : A)
    for (uint16_t &v : row)
      v = floatToBF16(dist(rng));
  for (auto &row : B)
    for (uint16_t &v : row)
      v = floatToBF16(dist(rng));
  // §3: A[m][k] in lane m + 16·(k/8), element k%8; B likewise with n.
  Bf16Operand a, b;
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 32; ++k) {
      a[i + 16 * (k / 8)][k % 8] = A[i][k];
      b[i + 16 * (k / 8)][k % 8] = B[k][i];
    }
  Accumulator c = randomAccumulator(rng);
  Accumulator d = mfma16x16x32Bf16(a, b, c);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      double want = cElement(c, m, n);
      for (int k = 0; k < 32; ++k)
        want += (double)bf16ToFloat(A[m][k]) * bf16ToFloat(B[k][n]);
      EXPECT_EQ(dElement(d, m, n), static_cast<float>(want));
    }
}
