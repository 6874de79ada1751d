//===- StatusError.cpp - runtime statuses as llvm::Error ------------------===//

#include "mla/Support/StatusError.h"

using namespace mla;

char StatusError::ID = 0;

Status mla::takeStatus(llvm::Error err, std::string &message) {
  Status status = Status::Success;
  message.clear();
  llvm::handleAllErrors(
      std::move(err),
      [&](const StatusError &e) {
        if (status == Status::Success)
          status = e.status;
        message += (message.empty() ? "" : "; ") + e.message;
      },
      [&](const llvm::ErrorInfoBase &e) {
        if (status == Status::Success)
          status = Status::Internal;
        message += (message.empty() ? "" : "; ") + e.message();
      });
  return status;
}

llvm::Error mla::toLLVMError(rt::Error err) {
  if (!err)
    return llvm::Error::success();
  return statusError(err.status(), err.message());
}

rt::Error mla::toRuntimeError(llvm::Error err) {
  if (!err)
    return rt::Error::success();
  std::string message;
  Status status = takeStatus(std::move(err), message);
  return rt::Error(status, std::move(message));
}
