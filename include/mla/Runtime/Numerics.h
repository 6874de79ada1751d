//===- Numerics.h - the small float formats of the KV cache ------*- C++ -*-===//
//
// Bit-exact decoders and round-to-nearest-even encoders for bf16, fp8 e4m3
// (OCP E4M3FN), E2M1 and E8M0. Written directly from the format definitions
// (not through APFloat or the MLIR lowering) so that the float64 reference
// that uses them is independent of the compiler it checks.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_NUMERICS_H
#define MLA_RUNTIME_NUMERICS_H

#include <cstdint>

namespace mla {

/// bf16 bits -> float (exact).
float bf16ToFloat(uint16_t bits);
/// float -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN.
uint16_t floatToBF16(float value);

/// E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities,
/// S.1111.111 is NaN, largest finite 448.
double decodeE4M3(uint8_t code);
/// Round to nearest even, saturating to +-448; NaN -> 0x7F.
uint8_t encodeE4M3(double value);

/// E2M1: 1 sign, 2 exponent (bias 1), 1 mantissa bit (low 4 bits of `code`):
/// values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
double decodeE2M1(uint8_t code);
/// Round to nearest even, saturating to +-6; NaN -> +0 (E2M1 has no NaN).
uint8_t encodeE2M1(double value);

/// E8M0: an unsigned power of two 2^(code - 127); 0xFF is NaN.
double decodeE8M0(uint8_t code);
/// The OCP MX shared scale of a block whose largest magnitude is `amax`:
/// 2^(floor(log2(amax)) - 2) for E2M1 elements (emax = 2), clamped to the
/// E8M0 range; a block of zeros gets 2^0.
uint8_t mxfp4ScaleForBlock(double amax);

/// The fp8 per-tensor scale of a tensor whose largest magnitude is `amax`:
/// amax / 448, and 1 for an all-zero tensor.
float fp8ScaleForTensor(float amax);

} // namespace mla

#endif // MLA_RUNTIME_NUMERICS_H
