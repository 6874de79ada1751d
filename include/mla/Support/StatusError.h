//===- StatusError.h - runtime statuses as llvm::Error ----------*- C++ -*-===//
//
// The compiler reports failures as llvm::Error, the runtime as rt::Error
// (mla/Runtime/Status.h, no LLVM). A StatusError is an llvm::Error that
// keeps the runtime's status code, so a failure crossing between the two —
// an artifact the compiler writes, a JIT backend the runtime loads — keeps
// its kind (a missing file is not a corrupt artifact).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_SUPPORT_STATUSERROR_H
#define MLA_SUPPORT_STATUSERROR_H

#include "mla/Runtime/Status.h"

#include "llvm/Support/Error.h"

namespace mla {

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
/// Errors that are not StatusErrors are Status::Internal.
Status takeStatus(llvm::Error err, std::string &message);

/// The same failure as the other kind of error.
llvm::Error toLLVMError(rt::Error err);
rt::Error toRuntimeError(llvm::Error err);

template <typename T> llvm::Expected<T> toLLVMExpected(rt::Expected<T> value) {
  if (!value)
    return toLLVMError(value.takeError());
  return std::move(*value);
}

} // namespace mla

#endif // MLA_SUPPORT_STATUSERROR_H
