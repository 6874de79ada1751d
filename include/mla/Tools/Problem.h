//===- Problem.h - the inputs of one decode call ----------------*- C++ -*-===//
//
// A decode problem in the runtime ABI (docs/abi.md): q as bf16 bits, the KV
// cache as raw bytes of its format, the scales and the indptrs. Problems are
// generated the way the public benchmark does, or read from .npy files, and
// are validated before any backend sees them.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_PROBLEM_H
#define MLA_TOOLS_PROBLEM_H

#include "mla/ABI.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mla {

struct DecodeProblem {
  CacheFormat format = CacheFormat::BF16;
  int64_t numTokens = 0; // T
  int64_t numHeads = 16; // H
  int64_t qkDim = 576;   // Dqk
  int64_t vDim = 512;    // Dv
  int64_t numRows = 0;   // N
  double smScale = 0.0;  // 0 means the default 1/sqrt(Dqk)

  std::vector<uint16_t> q;  // [T, H, Dqk] bf16 bits
  std::vector<uint8_t> kv;  // [N, rowBytes()]: bf16 (LE), e4m3, or packed e2m1
  float fp8Scale = 1.0f;    // fp8: per-tensor scale
  std::vector<uint8_t> mxScales; // mxfp4: [N, Dqk/32] E8M0
  std::vector<int32_t> qoIndptr, kvIndptr; // [B+1]; kvIndptr in pages if paged
  /// Paged caches (docs/abi.md): pageSize > 0 rows per page; the cache is
  /// [numRows / pageSize, pageSize, row] (kv and mxScales as above, the
  /// pages one after the other); sequence b owns the pages
  /// kvIndices[kvIndptr[b] .. kvIndptr[b+1]), the last one filled to
  /// kvLastPageLen[b] rows (0 when it has no pages).
  int64_t pageSize = 0;
  std::vector<int32_t> kvIndices, kvLastPageLen;

  int64_t numSeqs() const { return (int64_t)qoIndptr.size() - 1; }
  bool paged() const { return pageSize > 0; }
  int64_t numPages() const { return paged() ? numRows / pageSize : 0; }
  /// Cache positions of sequence b (validated page tables only).
  int64_t kvLength(int64_t b) const;
  /// The cache row holding position `pos` of sequence b.
  int64_t kvRow(int64_t b, int64_t pos) const;
  int64_t rowBytes() const;
  double effectiveSmScale() const;
  /// Dequantized element (row, col) of the cache, exactly.
  double kvValue(int64_t row, int64_t col) const;
};

struct GenerateOptions {
  CacheFormat format = CacheFormat::FP8;
  int64_t batch = 0; // 0: one sequence per listed kv length
  std::vector<int64_t> kvLens = {1024};
  int64_t qLen = 1;
  /// Query tokens of each sequence, one per sequence; when given, instead
  /// of qLen (a batch mixing 1..4 tokens a sequence).
  std::vector<int64_t> qLens;
  int64_t numHeads = 16;
  int64_t qkDim = 576, vDim = 512;
  uint64_t seed = 0;
  /// Multiplies q (0.02 N(0,1)); large values give sharp attention.
  double qScale = 1.0;
  /// Outliers: this many cache rows and as many of the Dqk columns, drawn
  /// at random, are kOutlierFactor times larger (the large activations of
  /// a real cache; fp8's per-tensor and mxfp4's block scales follow them).
  int64_t outliers = 0;
  static constexpr double kOutlierFactor = 30.0;
  /// Rows after the batch's (a cache pool larger than the batch), every
  /// byte 0xFF: NaN codes in bf16 and fp8, NaN block scales in mxfp4.
  int64_t spareRows = 0;
  /// > 0: a paged cache of this many rows per page, the batch's pages in a
  /// shuffled order among spare pages of NaN codes (spareRows rounds up to
  /// whole pages, and at least one spare page is added).
  int64_t pageSize = 0;
};

/// q and kv ~ 0.02 N(0,1) rounded to bf16; fp8 with the per-tensor scale
/// amax/448; mxfp4 with OCP MX block scales. Deterministic in `seed`.
llvm::Expected<DecodeProblem> generateProblem(const GenerateOptions &options);

/// Reads q.npy, kv.npy, kv_scale.npy (fp8, mxfp4), qo_indptr.npy,
/// kv_indptr.npy from `dir` (dtypes in docs/abi.md). `format` may be omitted
/// when the kv dtype and shape tell it.
llvm::Expected<DecodeProblem> loadProblem(const std::string &dir,
                                          std::optional<CacheFormat> format,
                                          int64_t vDim);
llvm::Error saveProblem(const DecodeProblem &problem, const std::string &dir);

/// Checks every invariant the kernels rely on: indptrs start at 0, never
/// decrease, stay within the tokens / rows, 1..4 query tokens per sequence,
/// head counts and widths the op accepts.
llvm::Error validateProblem(const DecodeProblem &problem);

} // namespace mla

#endif // MLA_TOOLS_PROBLEM_H
