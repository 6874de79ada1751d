//===- Status.h - runtime errors that carry a status code -------*- C++ -*-===//
//
// The runtime carries no LLVM (a serving process loads it without a
// compiler), so it has its own small error types: an rt::Error is success or
// one of the C API's mla_status codes with a message; rt::Expected<T> is a
// value or such an error. They read like llvm::Error / llvm::Expected; the
// compiler side converts with mla/Support/StatusError.h.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_STATUS_H
#define MLA_RUNTIME_STATUS_H

#include <optional>
#include <sstream>
#include <string>
#include <utility>

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

namespace rt {

/// Concatenates anything a std::ostream prints: the runtime's messages.
template <typename... Parts> std::string str(const Parts &...parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

/// Success, or a status code with a message. Converts to true on failure.
class [[nodiscard]] Error {
public:
  static Error success() { return Error(); }
  Error(Status status, std::string message)
      : code(status), text(std::move(message)) {}

  explicit operator bool() const { return code != Status::Success; }
  Status status() const { return code; }
  const std::string &message() const { return text; }
  /// The same failure, its message prefixed (no-op on success).
  Error context(const std::string &prefix) && {
    if (code != Status::Success)
      text = prefix + text;
    return std::move(*this);
  }

private:
  Error() = default;
  Status code = Status::Success;
  std::string text;
};

/// A failure with a message built from `parts`.
template <typename... Parts> Error fail(Status status, const Parts &...parts) {
  return Error(status, str(parts...));
}

/// A value or the Error that prevented it. Converts to true on success.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value(std::move(value)) {}
  Expected(Error error) : error(std::move(error)) {
    if (!this->error)
      this->error = fail(Status::Internal, "Expected built from success");
  }

  explicit operator bool() const { return value.has_value(); }
  T &operator*() { return *value; }
  const T &operator*() const { return *value; }
  T *operator->() { return &*value; }
  const T *operator->() const { return &*value; }
  /// The error (success when there is a value).
  Error takeError() { return value ? Error::success() : std::move(error); }

private:
  std::optional<T> value;
  Error error = Error::success();
};

} // namespace rt
} // namespace mla

#endif // MLA_RUNTIME_STATUS_H
