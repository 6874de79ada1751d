//===- Json.h - the JSON the artifact manifest needs ------------*- C++ -*-===//
//
// A small JSON reader and writer for manifest.json, in plain C++ so the
// runtime carries no LLVM. The reader takes untrusted bytes: it bounds the
// nesting depth, rejects duplicate keys and trailing bytes, and reports
// the byte offset of the first error.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_SUPPORT_JSON_H
#define MLA_RUNTIME_SUPPORT_JSON_H

#include "mla/Runtime/Status.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mla::json {

class Value;
using Array = std::vector<Value>;
/// Members in the order written; keys are unique.
using Object = std::vector<std::pair<std::string, Value>>;

class Value {
public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Value() = default;
  Value(bool b) : kind(Kind::Bool), boolean(b) {}
  Value(int64_t n) : kind(Kind::Number), number(double(n)), integer(n) {}
  Value(int n) : Value(int64_t(n)) {}
  Value(double d);
  Value(std::string s) : kind(Kind::String), text(std::move(s)) {}
  Value(const char *s) : Value(std::string(s)) {}
  Value(std::string_view s) : Value(std::string(s)) {}
  Value(Array a);
  Value(Object o);

  Kind getKind() const { return kind; }
  /// The number when it is an integer that int64 holds exactly.
  std::optional<int64_t> getAsInteger() const;
  std::optional<double> getAsNumber() const;
  std::optional<bool> getAsBoolean() const {
    return kind == Kind::Bool ? std::optional<bool>(boolean) : std::nullopt;
  }
  const std::string *getAsString() const;
  const Array *getAsArray() const;
  const Object *getAsObject() const;

  /// The member `key` of an object, or null.
  const Value *get(std::string_view key) const;

private:
  friend class Parser;
  friend void write(const Value &, std::string &, int);
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0.0;
  std::optional<int64_t> integer;
  std::string text;
  std::shared_ptr<const Array> array;
  std::shared_ptr<const Object> object;
};

/// Parses one JSON document; errors (InvalidArgument) name the byte offset.
rt::Expected<Value> parse(std::string_view text);

/// The document, indented by two spaces per level, ending in a newline.
std::string print(const Value &value);

} // namespace mla::json

#endif // MLA_RUNTIME_SUPPORT_JSON_H
