//===- SM90KernelPlan.cpp - the sm_90a partial kernel's plan -------------===//

#include "mla/Target/SM90KernelPlan.h"

#include <sstream>

using namespace mla;

int64_t SM90KernelPlan::adjacentPairStride() const {
  // Rows 0..7 of an ldmatrix start at 16-byte units p U + e D (pair p,
  // row e of it): they must cover all 8 units of a 128-byte bank period.
  int64_t d = s.qkDim / 16;
  for (int64_t u = 2 * d; u < 2 * d + 8; ++u) {
    unsigned seen = 0;
    for (int64_t p = 0; p < 4; ++p)
      for (int64_t e = 0; e < 2; ++e)
        seen |= 1u << ((p * u + e * d) % 8);
    if (seen == 0xff)
      return 16 * u;
  }
  return 0;
}

std::optional<std::string>
SM90KernelPlan::unsupported(int64_t ldsLimit) const {
  std::ostringstream why;
  if (s.headsPerWorkgroup != s.numHeads)
    why << "the sm_90a kernel serves all " << s.numHeads
        << " heads per row block (heads_per_workgroup = "
        << s.headsPerWorkgroup << ")";
  else if (s.rowsPerWave != kFragmentRows && s.rowsPerWave != 2 * kFragmentRows)
    why << "the sm_90a kernel's blocks serve " << kFragmentRows << " or "
        << 2 * kFragmentRows << " rows (rows_per_wave = " << s.rowsPerWave
        << ")";
  else if (s.warps != warps())
    why << "the sm_90a kernel runs " << warps() << " warps per block of "
        << rows() << " rows (waves_per_workgroup = " << s.warps << ")";
  else if (s.stages < 2 || s.stages > kMaxStages)
    why << "the sm_90a kernel needs 2.." << kMaxStages
        << " pipeline stages (pipeline_stages = " << s.stages << ")";
  else if (s.warpsPerRowGroup != 1)
    why << "the sm_90a kernel does not split a row group between warps "
           "(waves_per_row_group = "
        << s.warpsPerRowGroup << ")";
  else if (s.kvTile != 16 && s.kvTile != 32 && s.kvTile != 64)
    why << "the sm_90a kernel needs kv_tile 16, 32 or 64 (kv_tile = "
        << s.kvTile << ")";
  else if (bulkCopies() && bulkRowsPerWarp() < 2)
    why << "the sm_90a kernel's " << warps()
        << " warps each copy a pair of tile rows at least (kv_tile = "
        << s.kvTile << ")";
  else if (s.qkDim % 16 != 0 || s.vDim % 8 != 0)
    why << "the sm_90a kernel needs Dqk a multiple of 16 and Dv of 8 (Dqk = "
        << s.qkDim << ", Dv = " << s.vDim << ")";
  else if (rowChunks() > threads())
    why << "the sm_90a kernel copies a cache row by at most " << threads()
        << " 16-byte chunks (Dqk = " << s.qkDim << " needs " << rowChunks()
        << ")";
  else if (smBytes() > ldsLimit + kReservedSharedPerBlock)
    why << "the sm_90a kernel needs " << ldsBytes()
        << " bytes of shared memory (q " << qBytes() << ", " << s.stages
        << " stages of " << stageBytes() << ", tile " << tileBytes()
        << ", partial scores " << partialScoreBytes() << ", P " << pBytes()
        << ", mbarriers " << barrierBytes() << " at kv_tile = " << s.kvTile
        << "); " << blocksPerSM()
        << (blocksPerSM() == 1 ? " block per SM leaves it "
                               : " blocks per SM leave a block ")
        << (ldsLimit + kReservedSharedPerBlock) / blocksPerSM() -
               kReservedSharedPerBlock;
  std::string text = why.str();
  if (text.empty())
    return std::nullopt;
  return text;
}
