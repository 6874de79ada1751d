//===- MFMA.cpp - exact models of the gfx950 matrix instructions ----------===//
//
// Each model rebuilds the A and B matrices from the lanes with the
// instruction's layout, multiplies them exactly (every product of two 8-bit
// or bf16 values is exact in double, and so are sums of 128 of them), adds C
// and rounds once to f32.
//
//===----------------------------------------------------------------------===//

#include "mla/Emu/MFMA.h"

#include "mla/Runtime/Numerics.h"

#include <cmath>
#include <cstring>

using namespace mla;
using namespace mla::emu;

namespace {
double decodeHalf(uint16_t half) {
  int sign = half >> 15, exponent = (half >> 10) & 0x1F, mantissa = half & 0x3FF;
  double magnitude;
  if (exponent == 0x1F)
    magnitude = mantissa ? NAN : INFINITY;
  else if (exponent == 0)
    magnitude = std::ldexp(mantissa, -24);
  else
    magnitude = std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
  return sign ? -magnitude : magnitude;
}

double decodeE5M2(uint8_t code) {
  // bf8 (E5M2): the upper half of an IEEE half.
  return decodeHalf(static_cast<uint16_t>(code) << 8);
}

double decodeElement(MatrixFormat format, const std::array<uint8_t, 32> &lane,
                     int element) {
  switch (format) {
  case MatrixFormat::FP8:
    return decodeE4M3(lane[element]);
  case MatrixFormat::BF8:
    return decodeE5M2(lane[element]);
  case MatrixFormat::FP4: {
    uint8_t byte = lane[element / 2];
    return decodeE2M1(element % 2 ? byte >> 4 : byte & 0xF);
  }
  }
  return NAN;
}

/// Lane and element holding K index k of row (A) / column (B) `index`.
void locate(MatrixFormat format, int index, int k, int &lane, int &element) {
  if (format == MatrixFormat::FP4) {
    lane = index + 16 * (k / 32);
    element = k % 32;
    return;
  }
  lane = index + 16 * ((k % 64) / 16);
  element = k % 16 + 16 * (k / 64);
}

Accumulator multiply(const double (&a)[16][128], const double (&b)[128][16],
                     const double (&scale)[16][16][4], const Accumulator &c) {
  Accumulator d;
  for (int lane = 0; lane < kWaveLanes; ++lane) {
    int kg = lane / 16, n = lane % 16;
    for (int r = 0; r < 4; ++r) {
      int m = 4 * kg + r;
      double sum = c[lane][r];
      for (int block = 0; block < 4; ++block) {
        double partial = 0.0;
        for (int k = 32 * block; k < 32 * block + 32; ++k)
          partial += a[m][k] * b[k][n];
        sum += scale[m][n][block] * partial;
      }
      d[lane][r] = static_cast<float>(sum);
    }
  }
  return d;
}
} // namespace

Accumulator mla::emu::scaledMfma16x16x128(
    MatrixFormat formatA, MatrixFormat formatB, const Fp8Operand &a,
    const Fp8Operand &b, const std::array<uint8_t, kWaveLanes> &scaleA,
    const std::array<uint8_t, kWaveLanes> &scaleB, const Accumulator &c) {
  double matA[16][128], matB[128][16], scale[16][16][4];
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 128; ++k) {
      int lane, element;
      locate(formatA, i, k, lane, element);
      matA[i][k] = decodeElement(formatA, a[lane], element);
      locate(formatB, i, k, lane, element);
      matB[k][i] = decodeElement(formatB, b[lane], element);
    }
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n)
      for (int block = 0; block < 4; ++block)
        scale[m][n][block] = decodeE8M0(scaleA[m + 16 * block]) *
                             decodeE8M0(scaleB[n + 16 * block]);
  return multiply(matA, matB, scale, c);
}

Accumulator mla::emu::mfma16x16x128Fp8(const Fp8Operand &a,
                                       const Fp8Operand &b,
                                       const Accumulator &c) {
  std::array<uint8_t, kWaveLanes> one;
  one.fill(127); // E8M0 2^0: the unscaled instruction
  return scaledMfma16x16x128(MatrixFormat::FP8, MatrixFormat::FP8, a, b, one,
                             one, c);
}

Accumulator mla::emu::mfma16x16x32Bf16(const Bf16Operand &a,
                                       const Bf16Operand &b,
                                       const Accumulator &c) {
  Accumulator d;
  for (int lane = 0; lane < kWaveLanes; ++lane) {
    int kg = lane / 16, n = lane % 16;
    for (int r = 0; r < 4; ++r) {
      int m = 4 * kg + r;
      double sum = c[lane][r];
      for (int k = 0; k < 32; ++k) {
        // A[m][k] in lane m + 16·(k/8), element k%8; B[k][n] likewise.
        double x = bf16ToFloat(a[m + 16 * (k / 8)][k % 8]);
        double y = bf16ToFloat(b[n + 16 * (k / 8)][k % 8]);
        sum += x * y;
      }
      d[lane][r] = static_cast<float>(sum);
    }
  }
  return d;
}

Accumulator mla::emu::mmaSync16x8x16(const Bf16Operand &a,
                                      const Bf16Operand &b,
                                      const Accumulator &c, bool f16) {
  auto value = [&](uint16_t bits) {
    return f16 ? decodeHalf(bits) : static_cast<double>(bf16ToFloat(bits));
  };
  Accumulator d;
  for (int warp = 0; warp < kWaveLanes / 32; ++warp) {
    int base = 32 * warp;
    // The warp's A (16 x 16) and B (16 x 8) from its lanes' registers.
    double A[16][16], B[16][8];
    for (int lane = 0; lane < 32; ++lane) {
      int g = lane / 4, t = lane % 4;
      const auto &ra = a[base + lane];
      const auto &rb = b[base + lane];
      for (int e = 0; e < 2; ++e) {
        A[g][2 * t + e] = value(ra[e]);
        A[g + 8][2 * t + e] = value(ra[2 + e]);
        A[g][2 * t + 8 + e] = value(ra[4 + e]);
        A[g + 8][2 * t + 8 + e] = value(ra[6 + e]);
        B[2 * t + e][g] = value(rb[e]);
        B[2 * t + 8 + e][g] = value(rb[2 + e]);
      }
    }
    for (int lane = 0; lane < 32; ++lane) {
      int g = lane / 4, t = lane % 4;
      const int rows[4] = {g, g, g + 8, g + 8};
      const int cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
      for (int r = 0; r < 4; ++r) {
        double sum = c[base + lane][r];
        for (int k = 0; k < 16; ++k)
          sum += A[rows[r]][k] * B[k][cols[r]];
        d[base + lane][r] = static_cast<float>(sum);
      }
    }
  }
  return d;
}
