//===- Numerics.cpp - the small float formats of the KV cache -------------===//
//
// Decoders follow the bit layouts; encoders pick the nearest representable
// value from the decoded table, ties to the even code, so that the rounding
// rule is visible rather than buried in bit tricks.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/Numerics.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace mla;

float mla::bf16ToFloat(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t mla::floatToBF16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof u);
  if (std::isnan(value))
    return static_cast<uint16_t>((u >> 16) | 0x0040);
  uint32_t roundingBias = 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>((u + roundingBias) >> 16);
}

double mla::decodeE4M3(uint8_t code) {
  int sign = code >> 7, exponent = (code >> 3) & 0xF, mantissa = code & 0x7;
  if (exponent == 0xF && mantissa == 0x7)
    return std::numeric_limits<double>::quiet_NaN();
  double magnitude = exponent == 0
                         ? std::ldexp(mantissa, -9) // 2^(1-7) * m/8
                         : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}

double mla::decodeE2M1(uint8_t code) {
  int sign = (code >> 3) & 1, exponent = (code >> 1) & 0x3, mantissa = code & 1;
  double magnitude = exponent == 0 ? 0.5 * mantissa
                                   : std::ldexp(1.0 + mantissa / 2.0, exponent - 1);
  return sign ? -magnitude : magnitude;
}

double mla::decodeE8M0(uint8_t code) {
  if (code == 0xFF)
    return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, static_cast<int>(code) - 127);
}

namespace {
/// Nearest of the non-negative codes 0..maxCode (increasing in value) to
/// |value|, ties to the even code, saturating at maxCode.
template <typename Decode>
uint8_t nearestMagnitudeCode(double magnitude, uint8_t maxCode, Decode decode) {
  if (magnitude >= decode(maxCode))
    return maxCode;
  // Binary search for the largest code whose value is <= magnitude.
  uint8_t lo = 0, hiBound = maxCode;
  while (hiBound - lo > 1) {
    uint8_t mid = static_cast<uint8_t>((lo + hiBound) / 2);
    if (decode(mid) <= magnitude)
      lo = mid;
    else
      hiBound = mid;
  }
  if (decode(lo) == magnitude)
    return lo;
  uint8_t hi = lo + 1;
  double dLo = magnitude - decode(lo), dHi = decode(hi) - magnitude;
  if (dLo < dHi)
    return lo;
  if (dHi < dLo)
    return hi;
  return (lo & 1) == 0 ? lo : hi;
}
} // namespace

uint8_t mla::encodeE4M3(double value) {
  if (std::isnan(value))
    return 0x7F;
  uint8_t code = nearestMagnitudeCode(std::fabs(value), 0x7E, decodeE4M3);
  return std::signbit(value) ? (code | 0x80) : code;
}

uint8_t mla::encodeE2M1(double value) {
  if (std::isnan(value))
    return 0;
  uint8_t code = nearestMagnitudeCode(std::fabs(value), 0x7, decodeE2M1);
  return std::signbit(value) ? (code | 0x8) : code;
}

uint8_t mla::mxfp4ScaleForBlock(double amax) {
  if (!(amax > 0.0) || std::isinf(amax))
    return 127;
  int exponent;
  std::frexp(amax, &exponent); // amax = f * 2^exponent, f in [0.5, 1)
  int shared = (exponent - 1) - 2;
  if (shared < -127)
    shared = -127;
  if (shared > 127)
    shared = 127;
  return static_cast<uint8_t>(shared + 127);
}

float mla::fp8ScaleForTensor(float amax) {
  return amax > 0.0f ? amax / 448.0f : 1.0f;
}
