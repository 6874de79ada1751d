//===- MFMA.h - exact models of the gfx950 matrix instructions --*- C++ -*-===//
//
// What one wave's MFMA computes, lane by lane, written from AMD's
// descriptions of the instructions (docs/mfma-layouts.md cites them) and
// independent of the compiler's lowering: the emu backend calls these when a
// wave's 64 lanes reach an MFMA. Operands are the lanes' registers as the
// hardware sees them: a[lane][element] bytes or bf16 bits, c/d[lane][r] f32.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_EMU_MFMA_H
#define MLA_EMU_MFMA_H

#include <array>
#include <cstdint>

namespace mla::emu {

constexpr int kWaveLanes = 64;

/// Element formats of the f8f6f4 instructions (the cbsz / blgp codes).
enum class MatrixFormat { FP8 = 0, BF8 = 1, FP4 = 4 };

using Fp8Operand = std::array<std::array<uint8_t, 32>, kWaveLanes>;
using Bf16Operand = std::array<std::array<uint16_t, 8>, kWaveLanes>;
using Accumulator = std::array<std::array<float, 4>, kWaveLanes>;

/// v_mfma_f32_16x16x128_f8f6f4 with fp8 (E4M3FN) A and B:
/// D(16x16) = A(16x128) · B(128x16) + C. Lane l = 16·kg + i holds row i of A
/// (column i of B) and K indices 16·kg + e for elements e < 16, 64 + 16·kg +
/// (e - 16) for e >= 16; D element r of lane l is D[4·kg + r][i].
Accumulator mfma16x16x128Fp8(const Fp8Operand &a, const Fp8Operand &b,
                             const Accumulator &c);

/// v_mfma_scale_f32_16x16x128_f8f6f4: as above with per-operand formats
/// (FP8 or FP4; FP4 packs K = 32·kg + e in the nibbles of bytes 0..15, even
/// K in the low nibble) and E8M0 block scales: lane m + 16·b supplies the
/// scale of row m of A (column m of B) for K block b (K 32·b .. 32·b + 31).
Accumulator scaledMfma16x16x128(MatrixFormat formatA, MatrixFormat formatB,
                                const Fp8Operand &a, const Fp8Operand &b,
                                const std::array<uint8_t, kWaveLanes> &scaleA,
                                const std::array<uint8_t, kWaveLanes> &scaleB,
                                const Accumulator &c);

/// v_mfma_f32_16x16x32_bf16: lane l = 16·kg + i holds K 8·kg + e (e < 8) of
/// row i of A / column i of B; D as for the other 16x16 shapes.
Accumulator mfma16x16x32Bf16(const Bf16Operand &a, const Bf16Operand &b,
                             const Accumulator &c);

/// NVIDIA's mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16} (f16 set:
/// IEEE halves) with f32 accumulators, on each
/// 32-lane half of the emu's wave (one warp each): lane 4·g + t holds A
/// rows g, g + 8 at K 2t, 2t + 1 (elements 0, 1: row g; 2, 3: row g + 8)
/// and K 2t + 8, 2t + 9 (elements 4..7), B column g at K 2t, 2t + 1
/// (elements 0, 1) and 2t + 8, 2t + 9 (elements 2, 3), and D elements
/// (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1). For the sm_90a
/// kernels, which the emu runs as written.
Accumulator mmaSync16x8x16(const Bf16Operand &a, const Bf16Operand &b,
                           const Accumulator &c, bool f16);

} // namespace mla::emu

#endif // MLA_EMU_MFMA_H
