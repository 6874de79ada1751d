//===- ABI.h - the facts the compiler and the runtime share -----*- C++ -*-===//
//
// The compiler writes artifacts and kernels; the runtime reads the one and
// launches the other. Everything both sides must agree on — the cache
// formats' names, the query-token bound of the partial buffers, the kernel
// argument names, the size symbols of the launch metadata and the artifact
// container's names and version — is defined here once. Plain C++17: the
// runtime that includes it carries no LLVM or MLIR (docs/runtime.md).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_ABI_H
#define MLA_ABI_H

#include <cstdint>
#include <optional>
#include <string_view>

namespace mla {

/// The KV cache formats (docs/abi.md).
enum class CacheFormat { BF16, FP8, MXFP4 };

/// "bf16", "fp8", "mxfp4": the names in manifests, tools and the op.
inline const char *formatName(CacheFormat format) {
  switch (format) {
  case CacheFormat::BF16:
    return "bf16";
  case CacheFormat::FP8:
    return "fp8";
  case CacheFormat::MXFP4:
    return "mxfp4";
  }
  return "?";
}

inline std::optional<CacheFormat> parseFormat(std::string_view name) {
  for (CacheFormat f : {CacheFormat::BF16, CacheFormat::FP8, CacheFormat::MXFP4})
    if (name == formatName(f))
      return f;
  return std::nullopt;
}

/// Bytes of one cache row of Dqk elements, scales included (mxfp4: the
/// packed E2M1 codes and one E8M0 byte per 32).
inline int64_t cacheBytesPerRow(CacheFormat format, int64_t qkDim) {
  switch (format) {
  case CacheFormat::BF16:
    return 2 * qkDim;
  case CacheFormat::FP8:
    return qkDim;
  case CacheFormat::MXFP4:
    return qkDim / 2 + qkDim / 32;
  }
  return 0;
}

/// Most query tokens one sequence may have (the partial results' 2nd dim).
constexpr int64_t kMaxQueryTokens = 4;

/// Most work items of one sequence: the combine kernel's fan-in.
constexpr int64_t kMaxSplitsPerSeq = 64;

/// The kernel arguments, by the names the launch metadata binds them with.
namespace arg {
constexpr std::string_view kQ = "q";
constexpr std::string_view kKV = "kv";
constexpr std::string_view kKVScale = "kv_scale";
constexpr std::string_view kKVIndices = "kv_indices";           // paged
constexpr std::string_view kKVLastPageLen = "kv_last_page_len"; // paged
constexpr std::string_view kQoIndptr = "qo_indptr";
constexpr std::string_view kKVIndptr = "kv_indptr";
constexpr std::string_view kWorkItems = "work_items";
constexpr std::string_view kItemIndptr = "item_indptr";
// The persistent grid's schedule (docs/split-planning.md).
constexpr std::string_view kWorkUnits = "work_units";
constexpr std::string_view kWorkgroupUnits = "workgroup_unit_indptr";
// Device plans: the plan kernel's verdict on the batch (docs/runtime.md).
constexpr std::string_view kPlanStatus = "plan_status";
constexpr std::string_view kOut = "out";
constexpr std::string_view kLse = "lse";
constexpr std::string_view kPartialOut = "partial_out";
constexpr std::string_view kPartialLse = "partial_lse";
} // namespace arg

/// The kernels an artifact describes, in this order; a launch with a device
/// plan runs the plan kernel first, then the partial and combine kernels.
namespace kernel {
constexpr std::string_view kPartial = "mla_partial_decode";
constexpr std::string_view kCombine = "mla_combine";
constexpr std::string_view kPlan = "mla_plan";
} // namespace kernel

/// The plan kernel's status word: 0 when the batch was planned, else the
/// OR of these; the work list is then empty and the step writes nothing.
namespace plan_status {
constexpr int32_t kBadIndptr = 1;      // not starting at 0, decreasing, q_len > 4
constexpr int32_t kTooManyTokens = 2;  // qo_indptr[B] beyond the q/out buffers
constexpr int32_t kTooManyKVRows = 4;  // kv_indptr[B] beyond the cache/page table
constexpr int32_t kWorkListFull = 8;   // more items or units than the buffers hold
} // namespace plan_status

/// Limits a manifest must respect (its sizes are checked before use): the
/// op's head counts and widths, and the hardware's launch limits.
namespace limits {
constexpr int64_t kMaxHeads = 1024, kMaxHeadDim = 4096;
constexpr int64_t kMaxComputeUnits = 1 << 16;
constexpr int64_t kMaxWorkgroupSize = 1024;
constexpr int64_t kMaxKernargBytes = 4096;
constexpr int64_t kMaxLdsBytes = 1 << 20;
constexpr int64_t kMaxKVTile = 1 << 16; // the kernels' kv_tile
} // namespace limits

/// Size symbols a kernel argument's dims and a kernel's grid may use; the
/// runtime substitutes them from the plan at launch.
namespace dim {
constexpr std::string_view kTokens = "num_tokens";
constexpr std::string_view kKVRows = "num_kv_rows";
constexpr std::string_view kKVIndices = "num_kv_indices"; // kv_indptr[B], paged
constexpr std::string_view kSeqsPlusOne = "num_seqs+1";
constexpr std::string_view kSequences = "num_sequences";
constexpr std::string_view kWorkItems = "num_work_items";
constexpr std::string_view kWorkUnits = "num_work_units";
// The column slices of the combine's grid (mla::combineSlices).
constexpr std::string_view kCombineSlices = "combine_slices";
} // namespace dim

/// The artifact container (docs/artifact.md).
namespace artifact {
/// The format version this release writes and reads.
constexpr int64_t kVersion = 2; // 2: persistent grid, plan kernel
constexpr std::string_view kFormatName = "mla-decode-artifact";
constexpr std::string_view kManifest = "manifest.json";
constexpr std::string_view kHsaco = "kernels.hsaco";
constexpr std::string_view kPtx = "kernels.ptx";
constexpr std::string_view kEmuModule = "kernels.emu.mlir";
constexpr std::string_view kCpuModule = "decode.cpu.mlir";
} // namespace artifact

} // namespace mla

#endif // MLA_ABI_H
