//===- Artifact.h - one compiled configuration, in one file -----*- C++ -*-===//
//
// An artifact holds everything the runtime needs to run one compiled
// mla.decode configuration on any backend: the gfx950 code object, the emu
// form of the same kernels, the reference (cpu) form, and the launch
// metadata — kernel names, grid rules, block size, LDS bytes and, for every
// kernel argument, its shape and where its memref descriptor goes in the
// kernarg segment. The container is a POSIX tar archive (`tar tf` lists it)
// whose first member is manifest.json; docs/artifact.md is the format.
// Plain C++: the compiler writes artifacts with the same code the runtime
// reads them with.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_ARTIFACT_H
#define MLA_RUNTIME_ARTIFACT_H

#include "mla/ABI.h"
#include "mla/Runtime/Status.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mla {

/// The artifact format version this runtime writes and reads.
constexpr int64_t kArtifactVersion = artifact::kVersion;

struct ArtifactKernelArg {
  std::string name;              // q, kv, kv_scale, work_items, ...
  std::vector<std::string> dims; // decimal numbers or dim:: symbols
  /// (offset, size) in the kernarg segment of each word of the argument's
  /// memref descriptor: allocated, aligned, offset, sizes..., strides...
  std::vector<std::pair<int64_t, int64_t>> fields;
};

struct ArtifactKernel {
  std::string name;                // the symbol in the code object
  std::array<std::string, 3> grid; // numbers or dim:: symbols
  std::array<int64_t, 3> block = {1, 1, 1};
  int64_t ldsBytes = 0;
  /// Of those, the bytes the launch passes as dynamic shared memory (cuda).
  int64_t dynamicLdsBytes = 0;
  int64_t kernargBytes = 0; // explicit arguments; 0 without a code object
  std::vector<ArtifactKernelArg> args;
  /// The partial kernel's row blocks: a workgroup serves up to
  /// `rowsPerWorkgroup` (token, head) rows of one block of `headsPerBlock`
  /// heads, so a work item of a sequence with q_len tokens keeps
  /// H/headsPerBlock · ceil(q_len·headsPerBlock / rowsPerWorkgroup)
  /// workgroups busy (the planner sizes items by it). 0: not a partial
  /// kernel, one workgroup per item.
  int64_t rowsPerWorkgroup = 0, headsPerBlock = 0;
  /// The kernel waits for the launch's previous kernel (griddepcontrol.wait)
  /// before it reads that kernel's results, so the cuda backend lets it
  /// start while that one finishes (programmatic stream serialization).
  bool waitsForPrevious = false;
};

struct Artifact {
  int64_t version = kArtifactVersion;
  // The target the work list is planned for and the code object is built for.
  std::string chip; // an architecture of the target table
  std::string triple = "amdgcn-amd-amdhsa"; // "nvptx64-nvidia-cuda": PTX
  int64_t computeUnits = 0;
  int64_t xcds = 1; // the chiplets the chip deals workgroups to
  // The decode the artifact computes.
  CacheFormat format = CacheFormat::FP8;
  int64_t numHeads = 0, qkDim = 0, vDim = 0;
  double smScale = 0.0; // 0: the op's default 1/sqrt(qkDim)
  int64_t pageSize = 0; // rows per page of a paged cache; 0: contiguous
  std::string config;   // the #mla.config the kernels were built with
  // Split planning: N work items per sequence (0: the balanced planner).
  int64_t forcedSplits = 0;
  // The reference form's pipeline: "decompose" or "split".
  std::string cpuPipeline = "decompose";
  int64_t cpuKVTile = 0;
  /// The partial kernel, the combine kernel, the plan kernel; empty when the
  /// artifact has neither a code object nor an emu form.
  std::vector<ArtifactKernel> kernels;
  // The forms; an empty string means the form is absent.
  std::string hsaco;     // gfx950 code object (ELF)
  std::string ptx;       // sm_90a kernels (PTX text, JIT-compiled at load)
  std::string emuModule; // lane functions (MLIR text, after mla-gpu-to-emu)
  std::string cpuModule; // the host function around mla.decode (MLIR text)

};

/// The tar archive of `artifact`.
std::string serializeArtifact(const Artifact &artifact);

/// Parses and checks an archive: tar headers and checksums, the manifest's
/// fields, each member's size and CRC-32. Errors carry the status
/// (InvalidArtifact, VersionMismatch).
rt::Expected<Artifact> parseArtifact(std::string_view bytes);

/// Reads `path` (IOError when it cannot) and parses it.
rt::Expected<Artifact> readArtifactFile(const std::string &path);
rt::Error writeArtifactFile(const Artifact &artifact, const std::string &path);

/// The partial kernel's persistent grid (its fixed workgroup count), which
/// the host planner schedules the work for; none without kernels.
std::optional<int64_t> persistentWorkgroups(const Artifact &artifact);

/// The KV tile the kernels were built with (the config's kv_tile), which
/// the host planner must cut items on: a kernel's tiles start at its item's
/// first position, and a paged kernel reads a tile from one page. None
/// without kernels or without a kv_tile in the config.
std::optional<int64_t> kernelKVTile(const Artifact &artifact);

/// The value of a dim or grid entry given the symbols' values.
rt::Expected<int64_t>
resolveDim(std::string_view entry,
           const std::vector<std::pair<std::string_view, int64_t>> &symbols);

} // namespace mla

#endif // MLA_RUNTIME_ARTIFACT_H
