//===- PartialKernelPlan.cpp - the gfx950 partial kernel's plan -----------===//

#include "mla/Target/PartialKernelPlan.h"

using namespace mla;

int64_t LdsBuffer::bytes() const {
  int64_t n = elementBytes;
  for (int64_t d : shape)
    n *= d;
  return n;
}

PartialKernelPlan::PartialKernelPlan(const PartialKernelShape &shape)
    : s(shape) {}

FormatStrategy PartialKernelPlan::strategy() const {
  switch (s.format) {
  case CacheFormat::BF16:
    return {QKPath::Bf16Mfma, PEncoding::Bf16TwoParts, PVPath::FromTile, false};
  case CacheFormat::FP8:
    return {QKPath::ScaledMfma, PEncoding::Fp8TwoParts, PVPath::FromTile,
            false};
  case CacheFormat::MXFP4:
    return {QKPath::ScaledMfma, PEncoding::Bf16TwoParts,
            PVPath::DecodedHalfTiles, true};
  }
  return {};
}

int64_t PartialKernelPlan::blocksPerItem() const {
  int64_t groups = kMaxQueryTokens * groupsPerToken();
  return headBlocks() * ((groups + rowGroups() - 1) / rowGroups());
}

int64_t PartialKernelPlan::rowBytes() const {
  return isBF16() ? 2 * s.qkDim : isMXFP4() ? s.qkDim / 2 : s.qkDim;
}

int64_t PartialKernelPlan::scalePieces() const {
  return strategy().blockScales ? scaleUnitsPerTile() / kWaveSize : 0;
}

std::vector<LdsBuffer> PartialKernelPlan::ldsBuffers() const {
  const PEncoding p = strategy().p;
  const int64_t pBytes = p == PEncoding::Bf16TwoParts ? 2 : 1;
  const int64_t pParts = 2; // every PEncoding splits P in two
  std::vector<LdsBuffer> buffers = {
      {"kv_tiles",
       {s.pipelineStages, s.kvTile, rowElements()},
       LdsElement::Cache,
       elementBytes()}};
  // Scaled QK (fp8, mxfp4) leaves the scores in the softmax's lanes.
  if (strategy().qk == QKPath::Bf16Mfma)
    buffers.push_back(
        {"scores", {rowGroups(), rowsPerWave(), s.kvTile}, LdsElement::F32, 4});
  buffers.push_back({"p",
                     {rowGroups(), pParts, rowsPerWave(), s.kvTile},
                     LdsElement::P,
                     pBytes});
  buffers.push_back(
      {"row_factors", {kWaves, rowsPerWave()}, LdsElement::F32, 4});
  if (wavesPerRowGroup() > 1)
    buffers.push_back({"tile_maxima",
                       {rowGroups(), rowsPerWave(), wavesPerRowGroup()},
                       LdsElement::F32,
                       4});
  if (strategy().pv == PVPath::DecodedHalfTiles)
    buffers.push_back(
        {"decoded_v", {kVHalfRows, s.vDim}, LdsElement::BF16, 2});
  if (strategy().blockScales)
    buffers.push_back({"tile_scales", {s.pipelineStages, scaleLdsBytes()},
                       LdsElement::E8M0, 1});
  return buffers;
}

int64_t PartialKernelPlan::ldsBytes() const {
  int64_t total = 0;
  for (const LdsBuffer &buffer : ldsBuffers())
    total += buffer.bytes();
  return total;
}

std::optional<std::string>
PartialKernelPlan::unsupported(int64_t ldsLimit) const {
  auto str = [](int64_t v) { return std::to_string(v); };
  if (s.wavesPerWorkgroup != kWaves)
    return "the partial kernel runs " + str(kWaves) +
           " waves (16 query rows each); the config asks for "
           "waves_per_workgroup = " + str(s.wavesPerWorkgroup);
  int64_t split = wavesPerRowGroup();
  if (split != 1 && split != 2 && split != 4)
    return "waves_per_row_group = " + str(split) + " must be 1, 2 or 4";
  // QK hands each wave whole 16-row MFMA blocks of the tile; PV whole
  // 16-column blocks of Dv, 8-byte aligned for the transposed reads.
  if (kvRowsPerWave() % 16 != 0 || s.vDim % (16 * split) != 0)
    return "waves_per_row_group = " + str(split) +
           " needs kv_tile = " + str(s.kvTile) + " and Dv = " + str(s.vDim) +
           " to split into multiples of 16 rows and columns";
  if (rowsPerWave() != kRowsPerWave && rowsPerWave() != 2 * kRowsPerWave)
    return "rows_per_wave = " + str(rowsPerWave()) + " must be 16 or 32";
  if (s.headsPerWorkgroup <= 0 || s.numHeads % s.headsPerWorkgroup != 0 ||
      s.headsPerWorkgroup % rowsPerWave() != 0)
    return "heads_per_workgroup = " + str(s.headsPerWorkgroup) +
           " must be a multiple of rows_per_wave = " + str(rowsPerWave()) +
           " dividing H = " + str(s.numHeads);
  // Two fragments a wave: its accumulator is 32 rows x Dv / W columns.
  if (fragments() > 1 && split < 2)
    return "rows_per_wave = 32 needs waves_per_row_group >= 2 (given " +
           str(split) + ")";
  if (isMXFP4() && (s.kvTile % 64 != 0 || s.qkDim % 32 != 0))
    return std::string(
        "the mxfp4 kernel needs kv_tile a multiple of 64 and Dqk a "
        "multiple of 32");
  if (s.qkDim % 64 != 0 || s.vDim % 16 != 0)
    return std::string("gfx950 kernels need Dqk a multiple of 64 and Dv a "
                       "multiple of 16");
  // A PV MFMA sums 64 (fp8) or 32 (bf16) tile rows.
  int64_t rowMultiple = isBF16() ? 32 : 64;
  int64_t dmaRound = (isMXFP4() ? kWaveSize : kThreads) * kDmaBytes;
  if (s.kvTile % rowMultiple != 0 || tileBytes() % dmaRound != 0)
    return "kv_tile = " + str(s.kvTile) + " must be a multiple of " +
           str(rowMultiple) +
           " whose tile bytes split into 16-byte loads of 256 lanes";
  if (s.pipelineStages < 2)
    return std::string("the partial kernel needs pipeline_stages >= 2");
  if (ldsBytes() > ldsLimit)
    return "the partial kernel needs " + str(ldsBytes()) +
           " bytes of LDS, more than the target's " + str(ldsLimit);
  return std::nullopt;
}
