//===- PartialKernelPlan.h - the gfx950 partial kernel's plan ---*- C++ -*-===//
//
// One object says how the gfx950 partial-decode kernel is laid out for a
// decode's shapes and config: how each cache format computes (the format
// strategy), how query rows map to waves and workgroups, how a KV tile
// moves to LDS, and every LDS buffer. The config verifier checks a config
// against the target with it, and mla-to-gpu builds the kernel from it, so
// the two cannot disagree about what fits.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_PARTIALKERNELPLAN_H
#define MLA_TARGET_PARTIALKERNELPLAN_H

#include "mla/ABI.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mla {

/// How QK runs: bf16 MFMAs on bf16 Q and K, or scaled fp8 MFMAs with Q in
/// two fp8 parts and K as the cache holds it (fp8, or E2M1 with its E8M0
/// block scales in the instruction).
enum class QKPath { Bf16Mfma, ScaledMfma };
/// How P reaches the PV MFMAs: bf16 in two parts (p ≈ hi + lo) or fp8 in
/// two parts (p·448 ≈ hi + lo/16). One bf16 part alone keeps 8 significant
/// bits: where one cache row dominates the output (an outlier row at flat
/// attention, p ≈ 1) its weight's rounding, up to 2^-9, moves the whole
/// output by as much, which with the output's own bf16 rounding breaks the
/// 4e-3 bar (docs/performance.md, 2026-12-05).
enum class PEncoding { Bf16TwoParts, Fp8TwoParts };
/// How V reaches the PV MFMAs: straight from the KV tile; or, for mxfp4,
/// whose block scales run along the output columns, not along the rows PV
/// sums over: decoded by the workgroup into a bf16 half tile in LDS
/// (DecodedHalfTiles). (Moving V's block scales onto P instead, per
/// 32-column block, costs each block P's two parts: more VALU than the
/// shared decode, docs/performance.md.)
enum class PVPath { FromTile, DecodedHalfTiles };

struct FormatStrategy {
  QKPath qk;
  PEncoding p;
  PVPath pv;
  /// The cache carries E8M0 block scales that move to LDS with the tile.
  bool blockScales;
};

/// What an LDS buffer holds, for the element type the kernel gives it.
enum class LdsElement { Cache, F32, P, BF16, E8M0 };

struct LdsBuffer {
  const char *role; // "kv_tiles", "scores", ...
  std::vector<int64_t> shape;
  LdsElement element;
  int64_t elementBytes;
  int64_t bytes() const;
};

/// The decode's shapes and config the plan is made for.
struct PartialKernelShape {
  CacheFormat format;
  int64_t numHeads, qkDim, vDim;
  int64_t kvTile, pipelineStages, headsPerWorkgroup, wavesPerWorkgroup;
  /// Waves that share one group of 16 query rows (config
  /// waves_per_row_group).
  int64_t wavesPerRowGroup = 1;
  /// Query rows of a row group (config rows_per_wave): 16, or 32 in two
  /// 16-row MFMA blocks (fragments) a wave.
  int64_t rowsPerWave = 16;
};

class PartialKernelPlan {
public:
  static constexpr int64_t kWaveSize = 64;
  /// Waves per workgroup, 16 query rows (heads) each.
  static constexpr int64_t kWaves = 4;
  static constexpr int64_t kThreads = kWaveSize * kWaves;
  /// Query rows of one MFMA block (a fragment); a wave holds
  /// fragments() of them.
  static constexpr int64_t kRowsPerWave = 16;
  /// Bytes per lane and LDS DMA (gather_to_lds).
  static constexpr int64_t kDmaBytes = 16;
  /// mxfp4: V rows decoded into bf16 at a time.
  static constexpr int64_t kVHalfRows = 32;

  explicit PartialKernelPlan(const PartialKernelShape &shape);

  const PartialKernelShape &shape() const { return s; }
  FormatStrategy strategy() const;
  bool isBF16() const { return s.format == CacheFormat::BF16; }
  bool isMXFP4() const { return s.format == CacheFormat::MXFP4; }

  /// Why the kernel cannot be built for these shapes and this config within
  /// `ldsLimit` bytes of LDS, if it cannot.
  std::optional<std::string> unsupported(int64_t ldsLimit) const;

  // Wave mapping: the (token, head) rows of a block of heads_per_workgroup
  // heads, token-major, in groups of rowsPerWave() heads; a workgroup takes
  // rowGroups() consecutive groups, wavesPerRowGroup() waves each. The
  // waves of a group split the tile's KV rows for QK (kvRowsPerWave() each)
  // and the Dv columns for PV (vColumnsPerWave() each); each computes all
  // of the group's rows, as fragments() MFMA blocks of 16 that share every
  // K and V fragment it reads.
  int64_t wavesPerRowGroup() const { return s.wavesPerRowGroup; }
  int64_t rowsPerWave() const { return s.rowsPerWave; }
  int64_t fragments() const { return rowsPerWave() / kRowsPerWave; }
  int64_t rowGroups() const { return kWaves / wavesPerRowGroup(); }
  int64_t kvRowsPerWave() const { return s.kvTile / wavesPerRowGroup(); }
  int64_t vColumnsPerWave() const { return s.vDim / wavesPerRowGroup(); }
  int64_t rowsPerWorkgroup() const { return rowGroups() * rowsPerWave(); }
  /// A wave's accumulator in column chunks: with two fragments, chunks of
  /// kAccChunkColumns, PV running both fragments' MFMAs on a chunk's V
  /// fragments before the next chunk's are read (so that the V reads they
  /// share stay live one chunk long: register pressure).
  static constexpr int64_t kAccChunkColumns = 64;
  int64_t accChunks() const {
    return fragments() > 1 && vColumnsPerWave() % kAccChunkColumns == 0
               ? vColumnsPerWave() / kAccChunkColumns
               : 1;
  }
  int64_t accChunkColumns() const { return vColumnsPerWave() / accChunks(); }
  int64_t groupsPerToken() const { return s.headsPerWorkgroup / rowsPerWave(); }
  int64_t headBlocks() const { return s.numHeads / s.headsPerWorkgroup; }
  /// Workgroups (row blocks) per work item, for the longest q_len.
  int64_t blocksPerItem() const;

  // Rows and tiles.
  /// Dqk rounded up to the scaled MFMA's K of 128.
  int64_t paddedQK() const { return (s.qkDim + 127) / 128 * 128; }
  /// Bytes of one element of the Q/KV tiles (mxfp4: a packed byte).
  int64_t elementBytes() const { return isBF16() ? 2 : 1; }
  /// A cache row: bf16 2 bytes per element, fp8 1, mxfp4 1/2.
  int64_t rowBytes() const;
  int64_t rowElements() const { return rowBytes() / elementBytes(); }
  int64_t tileBytes() const { return s.kvTile * rowBytes(); }
  /// mxfp4: a tile's E8M0 scales move by DMA in 2-byte units (rows are
  /// Dqk/32 bytes, so wider loads would not stay aligned); the DMA widens
  /// each unit to a 4-byte LDS word.
  int64_t scaleUnitsPerRow() const { return s.qkDim / 64; }
  int64_t scaleUnitsPerTile() const { return s.kvTile * scaleUnitsPerRow(); }
  int64_t scaleLdsBytes() const { return 4 * scaleUnitsPerTile(); }

  // The tile DMA: wave-sized pieces (64 lanes x 16 bytes of data, or 64
  // scale units) dealt round-robin to the waves.
  int64_t dataPieces() const { return tileBytes() / (kWaveSize * kDmaBytes); }
  int64_t scalePieces() const;
  int64_t allPieces() const { return dataPieces() + scalePieces(); }
  int64_t maxGathersPerWave() const { return (allPieces() + kWaves - 1) / kWaves; }
  /// The fewest gathers any wave issues per tile: how many a wave may leave
  /// outstanding for the next tile.
  int64_t minGathersPerWave() const { return allPieces() / kWaves; }

  /// Workgroup memory, in the order of the kernel's attributions: the KV
  /// tiles, scores (bf16 only), P, row factors; with W > 1 each wave's tile
  /// maxima of its rows (the waves of a group exchange them, not their scores);
  /// the mxfp4 buffers.
  std::vector<LdsBuffer> ldsBuffers() const;
  int64_t ldsBytes() const;

private:
  PartialKernelShape s;
};

} // namespace mla

#endif // MLA_TARGET_PARTIALKERNELPLAN_H
