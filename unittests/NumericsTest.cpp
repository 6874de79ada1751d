// The codecs against values computed by hand from the format definitions:
// exact decodes, round-to-nearest-even ties, saturation, NaN codes.
#include "mla/Runtime/Numerics.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mla;

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3F80);
  EXPECT_EQ(bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(bf16ToFloat(0xC000), -2.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even 1.0.
  EXPECT_EQ(floatToBF16(1.0f + 0x1p-8f), 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: goes up.
  EXPECT_EQ(floatToBF16(1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_EQ(floatToBF16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(NAN))));
  EXPECT_EQ(floatToBF16(INFINITY), 0x7F80);
}

TEST(E4M3, DecodesEveryClassOfCode) {
  EXPECT_EQ(decodeE4M3(0x00), 0.0);
  EXPECT_EQ(decodeE4M3(0x38), 1.0);         // exponent 7 = bias
  EXPECT_EQ(decodeE4M3(0x39), 1.125);
  EXPECT_EQ(decodeE4M3(0x7E), 448.0);       // largest finite
  EXPECT_EQ(decodeE4M3(0xFE), -448.0);
  EXPECT_EQ(decodeE4M3(0x01), 0x1p-9);      // smallest subnormal
  EXPECT_EQ(decodeE4M3(0x07), 7 * 0x1p-9);  // largest subnormal
  EXPECT_EQ(decodeE4M3(0x08), 0x1p-6);      // smallest normal
  EXPECT_EQ(decodeE4M3(0x78), 256.0);       // S.1111.000 is finite in E4M3FN
  EXPECT_TRUE(std::isnan(decodeE4M3(0x7F)));
  EXPECT_TRUE(std::isnan(decodeE4M3(0xFF)));
}

TEST(E4M3, EncodesWithTiesToEvenAndSaturation) {
  for (int code = 0; code < 256; ++code) {
    if (code == 0x7F || code == 0xFF) // the two NaN codes
      continue;
    EXPECT_EQ(encodeE4M3(decodeE4M3(code)), code) << code;
  }
  EXPECT_EQ(encodeE4M3(1.0625), 0x38);  // halfway 1 / 1.125 -> even 1.0
  EXPECT_EQ(encodeE4M3(1.1875), 0x3A);  // halfway 1.125 / 1.25 -> even 1.25
  EXPECT_EQ(encodeE4M3(1.07), 0x39);
  EXPECT_EQ(encodeE4M3(0x1p-10), 0x00); // halfway 0 / 2^-9 -> 0
  EXPECT_EQ(encodeE4M3(3 * 0x1p-10), 0x02); // halfway 2^-9 / 2^-8 -> even
  EXPECT_EQ(encodeE4M3(464.0), 0x7E);   // past 448 saturates, never NaN
  EXPECT_EQ(encodeE4M3(1e9), 0x7E);
  EXPECT_EQ(encodeE4M3(-1e9), 0xFE);
  EXPECT_EQ(encodeE4M3(INFINITY), 0x7E);
  EXPECT_EQ(encodeE4M3(-2.0), 0xC0);
  EXPECT_EQ(encodeE4M3(NAN), 0x7F);
}

TEST(E2M1, DecodesAndEncodes) {
  const double values[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int code = 0; code < 8; ++code) {
    EXPECT_EQ(decodeE2M1(code), values[code]);
    EXPECT_EQ(decodeE2M1(code | 8), -values[code]);
    EXPECT_EQ(encodeE2M1(values[code]), code);
  }
  EXPECT_EQ(encodeE2M1(0.25), 0);  // halfway 0 / 0.5 -> even code 0
  EXPECT_EQ(encodeE2M1(0.75), 2);  // halfway 0.5 / 1 -> even code 2 (1.0)
  EXPECT_EQ(encodeE2M1(1.25), 2);  // halfway 1 / 1.5 -> even code 2
  EXPECT_EQ(encodeE2M1(2.5), 4);   // halfway 2 / 3 -> even code 4 (2.0)
  EXPECT_EQ(encodeE2M1(3.5), 6);   // halfway 3 / 4 -> even code 6 (4.0)
  EXPECT_EQ(encodeE2M1(5.0), 6);   // halfway 4 / 6 -> even code 6 (4.0)
  EXPECT_EQ(encodeE2M1(5.1), 7);
  EXPECT_EQ(encodeE2M1(7.9), 7);   // saturates at 6
  EXPECT_EQ(encodeE2M1(-100.0), 15);
  EXPECT_EQ(encodeE2M1(-0.3), 9);
}

TEST(E8M0, DecodesPowersOfTwo) {
  EXPECT_EQ(decodeE8M0(127), 1.0);
  EXPECT_EQ(decodeE8M0(128), 2.0);
  EXPECT_EQ(decodeE8M0(0), 0x1p-127);
  EXPECT_EQ(decodeE8M0(254), 0x1p127);
  EXPECT_TRUE(std::isnan(decodeE8M0(255)));
}

TEST(E8M0, BlockScaleFollowsOcpMx) {
  // 2^(floor(log2(amax)) - 2): the largest element lands in [4, 8).
  EXPECT_EQ(mxfp4ScaleForBlock(6.0), 127);   // floor(log2 6) = 2
  EXPECT_EQ(mxfp4ScaleForBlock(4.0), 127);
  EXPECT_EQ(mxfp4ScaleForBlock(3.99), 126);
  EXPECT_EQ(mxfp4ScaleForBlock(1.0), 125);
  EXPECT_EQ(mxfp4ScaleForBlock(0.02), 119);  // floor(log2 0.02) = -6
  EXPECT_EQ(mxfp4ScaleForBlock(0.0), 127);   // all-zero block
  EXPECT_EQ(mxfp4ScaleForBlock(0x1p-140), 0); // clamped to 2^-127
}

TEST(FP8, TensorScaleMapsAmaxTo448) {
  EXPECT_EQ(fp8ScaleForTensor(448.0f), 1.0f);
  EXPECT_EQ(fp8ScaleForTensor(0.0f), 1.0f);
  EXPECT_FLOAT_EQ(fp8ScaleForTensor(0.1f), 0.1f / 448.0f);
}
