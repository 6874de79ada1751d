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

#include <vector>

namespace mla {

struct ReferenceResult {
  std::vector<double> out; // [T, H, Dv], not rounded
  std::vector<double> lse; // [T, H], -inf for tokens that see nothing
};

ReferenceResult referenceDecode(const DecodeProblem &problem);

/// Elementwise bound |out - ref| <= atol + rtol * |ref| (the public
/// tolerance of each format) plus a bound on the relative Frobenius error.
struct Tolerance {
  double atol, rtol, maxRelErr;
};
Tolerance defaultTolerance(CacheFormat format);

struct ErrorReport {
  double relErr = 0.0;    // ||out - ref|| / ||ref|| over finite references
  double maxAbsErr = 0.0; // over finite references
  int64_t numOutOfTolerance = 0;
  int64_t firstBadIndex = -1;
  double lseMaxAbsErr = 0.0;
  int64_t numLseMismatches = 0;
  bool passed(const Tolerance &tol) const {
    return numOutOfTolerance == 0 && numLseMismatches == 0 &&
           relErr <= tol.maxRelErr;
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
