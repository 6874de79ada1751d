//===- Reference.h - float64 reference and the error report -----*- C++ -*-===//
//
// The float64 reference of mla.decode, written straight from the semantics in
// docs/dialect.md (not from any lowering), and the comparison every backend's
// output goes through.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_REFERENCE_H
#define MLA_TOOLS_REFERENCE_H

#include "mla/Tools/Problem.h"

#include <algorithm>
#include <vector>

namespace mla {

struct ReferenceResult {
  std::vector<double> out; // [T, H, Dv], not rounded
  std::vector<double> lse; // [T, H], -inf for tokens that see nothing
  /// [T, H, Dv]: sum(p·|v|) / sum(p), the size of the terms an output
  /// averages (empty: unit-scale terms).
  std::vector<double> termScale;
  /// What output i's absolute bound scales by: its terms' size, at least
  /// 1. The public atol is for caches of unit scale; an output averages V
  /// rows with weights P that a kernel rounds (bf16, or fp8 in two
  /// parts), so its error grows with the terms, not with their sum, which
  /// can cancel (docs/numerics.md).
  double absoluteScale(size_t i) const {
    return i < termScale.size() ? std::max(1.0, termScale[i]) : 1.0;
  }
};

ReferenceResult referenceDecode(const DecodeProblem &problem);

/// Elementwise bound |out - ref| <= atol · s + rtol · |ref| (the public
/// tolerance of each format; s = ReferenceResult::absoluteScale, 1 for
/// caches of unit scale) plus a bound on the relative Frobenius error.
struct Tolerance {
  double atol, rtol, maxRelErr;
  /// Where > 0, rel_err may also reach the reference's own bf16 rounding
  /// error (ErrorReport::roundingRelErr) plus this: a bar near the
  /// rounding error, which the exact answer in bf16 can miss on a few
  /// large outputs.
  double overRounding = 0.0;
};
Tolerance defaultTolerance(CacheFormat format);
/// The GPU kernels' fixed bar (run on the emu or a GPU): they round P
/// (fp8: Q too) to the cache's format, rel_err 5e-3 for fp8 and mxfp4, 4e-3
/// for bf16, with the public elementwise bounds.
Tolerance kernelTolerance(CacheFormat format);

struct ErrorReport {
  double relErr = 0.0;    // ||out - ref|| / ||ref|| over finite references
  double roundingRelErr = 0.0; // the same for bf16(ref): the best bf16 output
  double maxAbsErr = 0.0; // over finite references
  int64_t numOutOfTolerance = 0;
  int64_t firstBadIndex = -1;
  double lseMaxAbsErr = 0.0;
  int64_t numLseMismatches = 0;
  bool passed(const Tolerance &tol) const {
    double bar =
        tol.overRounding > 0.0
            ? std::max(tol.maxRelErr, roundingRelErr + tol.overRounding)
            : tol.maxRelErr;
    return numOutOfTolerance == 0 && numLseMismatches == 0 && relErr <= bar;
  }
};

/// `out` holds bf16 bits [T, H, Dv]; `lse` f32 [T, H]. NaN and infinities
/// must match the reference exactly (NaN where it has NaN, same infinity).
ErrorReport compareWithReference(const ReferenceResult &ref,
                                 const std::vector<uint16_t> &out,
                                 const std::vector<float> &lse,
                                 const Tolerance &tol);

} // namespace mla

#endif // MLA_TOOLS_REFERENCE_H
