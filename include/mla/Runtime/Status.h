//===- Status.h - runtime errors that carry a status code -------*- C++ -*-===//
//
// The runtime reports failures as llvm::Error; the C API needs to tell its
// callers *what kind* of failure happened (a missing file is not a corrupt
// artifact is not a wrong GPU). StatusError carries one of the C API's
// mla_status codes with the message; any other llvm::Error maps to
// Status::Internal.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_STATUS_H
#define MLA_RUNTIME_STATUS_H

#include "llvm/Support/Error.h"

namespace mla {

/// Mirrors mla_status of runtime.h (same values).
enum class Status : int {
  Success = 0,
  InvalidArgument = 1,
  IOError = 2,
  InvalidArtifact = 3,
  VersionMismatch = 4,
  TargetMismatch = 5,
  BackendUnavailable = 6,
  WorkspaceTooSmall = 7,
  SizeMismatch = 8,
  LaunchFailed = 9,
  Internal = 10,
};

class StatusError : public llvm::ErrorInfo<StatusError> {
public:
  static char ID;
  StatusError(Status status, std::string message)
      : status(status), message(std::move(message)) {}
  void log(llvm::raw_ostream &os) const override { os << message; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
  Status status;
  std::string message;
};

inline llvm::Error statusError(Status status, const llvm::Twine &message) {
  return llvm::make_error<StatusError>(status, message.str());
}

/// The status an error stands for, and its message; consumes the error.
Status takeStatus(llvm::Error err, std::string &message);

} // namespace mla

#endif // MLA_RUNTIME_STATUS_H
