//===- Json.cpp - the JSON the artifact manifest needs --------------------===//

#include "Json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

using namespace mla;
using namespace mla::json;

Value::Value(double d) : kind(Kind::Number), number(d) {
  if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.0e15)
    integer = static_cast<int64_t>(d);
}
Value::Value(Array a)
    : kind(Kind::Array), array(std::make_shared<const Array>(std::move(a))) {}
Value::Value(Object o)
    : kind(Kind::Object), object(std::make_shared<const Object>(std::move(o))) {}

std::optional<int64_t> Value::getAsInteger() const {
  return kind == Kind::Number ? integer : std::nullopt;
}
std::optional<double> Value::getAsNumber() const {
  if (kind != Kind::Number)
    return std::nullopt;
  return number;
}
const std::string *Value::getAsString() const {
  return kind == Kind::String ? &text : nullptr;
}
const Array *Value::getAsArray() const {
  return kind == Kind::Array ? array.get() : nullptr;
}
const Object *Value::getAsObject() const {
  return kind == Kind::Object ? object.get() : nullptr;
}
const Value *Value::get(std::string_view key) const {
  if (kind != Kind::Object)
    return nullptr;
  for (const auto &[k, v] : *object)
    if (k == key)
      return &v;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace mla::json {
class Parser {
public:
  explicit Parser(std::string_view text) : text(text) {}

  rt::Expected<Value> document() {
    Value v;
    if (rt::Error err = value(v, 0))
      return err;
    skipSpace();
    if (pos != text.size())
      return error("trailing bytes after the document");
    return v;
  }

private:
  // Deeper documents are not manifests; the bound keeps the recursion small.
  static constexpr int kMaxDepth = 32;

  rt::Error error(const std::string &what) const {
    return rt::fail(Status::InvalidArgument, "JSON: ", what, " at byte ", pos);
  }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }
  bool consume(std::string_view word) {
    if (text.substr(pos, word.size()) != word)
      return false;
    pos += word.size();
    return true;
  }

  rt::Error value(Value &out, int depth) {
    if (depth > kMaxDepth)
      return error("nesting deeper than " + std::to_string(kMaxDepth));
    skipSpace();
    if (pos >= text.size())
      return error("unexpected end");
    char c = text[pos];
    if (c == '{')
      return objectValue(out, depth);
    if (c == '[')
      return arrayValue(out, depth);
    if (c == '"') {
      std::string s;
      if (rt::Error err = string(s))
        return err;
      out = Value(std::move(s));
      return rt::Error::success();
    }
    if (consume("true")) {
      out = Value(true);
      return rt::Error::success();
    }
    if (consume("false")) {
      out = Value(false);
      return rt::Error::success();
    }
    if (consume("null")) {
      out = Value();
      return rt::Error::success();
    }
    return numberValue(out);
  }

  rt::Error objectValue(Value &out, int depth) {
    ++pos; // {
    Object members;
    skipSpace();
    if (consume("}")) {
      out = Value(std::move(members));
      return rt::Error::success();
    }
    for (;;) {
      skipSpace();
      if (pos >= text.size() || text[pos] != '"')
        return error("expected a string key");
      std::string key;
      if (rt::Error err = string(key))
        return err;
      for (const auto &member : members)
        if (member.first == key)
          return error("duplicate key '" + key + "'");
      skipSpace();
      if (!consume(":"))
        return error("expected ':'");
      Value v;
      if (rt::Error err = value(v, depth + 1))
        return err;
      members.emplace_back(std::move(key), std::move(v));
      skipSpace();
      if (consume("}"))
        break;
      if (!consume(","))
        return error("expected ',' or '}'");
    }
    out = Value(std::move(members));
    return rt::Error::success();
  }

  rt::Error arrayValue(Value &out, int depth) {
    ++pos; // [
    Array elements;
    skipSpace();
    if (consume("]")) {
      out = Value(std::move(elements));
      return rt::Error::success();
    }
    for (;;) {
      Value v;
      if (rt::Error err = value(v, depth + 1))
        return err;
      elements.push_back(std::move(v));
      skipSpace();
      if (consume("]"))
        break;
      if (!consume(","))
        return error("expected ',' or ']'");
    }
    out = Value(std::move(elements));
    return rt::Error::success();
  }

  rt::Error numberValue(Value &out) {
    size_t begin = pos;
    auto digits = [&] {
      size_t start = pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
        ++pos;
      return pos > start;
    };
    if (pos < text.size() && text[pos] == '-')
      ++pos;
    bool leadingZero = pos < text.size() && text[pos] == '0';
    size_t intStart = pos;
    if (!digits())
      return error("unexpected character");
    if (leadingZero && pos - intStart > 1)
      return error("a number with a leading zero");
    bool isInteger = true;
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      isInteger = false;
      if (!digits())
        return error("expected digits after '.'");
    }
    if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
      ++pos;
      isInteger = false;
      if (pos < text.size() && (text[pos] == '+' || text[pos] == '-'))
        ++pos;
      if (!digits())
        return error("expected an exponent");
    }
    const char *first = text.data() + begin, *last = text.data() + pos;
    if (isInteger) {
      int64_t n = 0;
      auto [ptr, ec] = std::from_chars(first, last, n);
      if (ec == std::errc() && ptr == last) {
        out = Value(n);
        return rt::Error::success();
      }
    }
    double d = 0.0;
    auto [ptr, ec] = std::from_chars(first, last, d);
    if (ec != std::errc() || ptr != last || !std::isfinite(d))
      return error("a number out of range");
    out = Value(d);
    if (!isInteger)
      out.integer.reset(); // 1.0 is not an integer field
    return rt::Error::success();
  }

  static void appendUtf8(std::string &s, uint32_t cp) {
    if (cp < 0x80) {
      s += char(cp);
    } else if (cp < 0x800) {
      s += char(0xC0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += char(0xE0 | (cp >> 12));
      s += char(0x80 | ((cp >> 6) & 0x3F));
      s += char(0x80 | (cp & 0x3F));
    } else {
      s += char(0xF0 | (cp >> 18));
      s += char(0x80 | ((cp >> 12) & 0x3F));
      s += char(0x80 | ((cp >> 6) & 0x3F));
      s += char(0x80 | (cp & 0x3F));
    }
  }

  bool hex4(uint32_t &cp) {
    if (text.size() - pos < 4)
      return false;
    cp = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[pos++];
      cp <<= 4;
      if (c >= '0' && c <= '9')
        cp |= c - '0';
      else if (c >= 'a' && c <= 'f')
        cp |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        cp |= c - 'A' + 10;
      else
        return false;
    }
    return true;
  }

  rt::Error string(std::string &out) {
    ++pos; // "
    for (;;) {
      if (pos >= text.size())
        return error("unterminated string");
      char c = text[pos++];
      if (c == '"')
        return rt::Error::success();
      if (static_cast<unsigned char>(c) < 0x20)
        return error("a control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= text.size())
        return error("unterminated string");
      char e = text[pos++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t cp;
        if (!hex4(cp))
          return error("a malformed \\u escape");
        if (cp >= 0xD800 && cp < 0xDC00) {
          uint32_t low;
          if (!consume("\\u") || !hex4(low) || low < 0xDC00 || low >= 0xE000)
            return error("an unpaired surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          return error("an unpaired surrogate");
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        return error("an unknown escape");
      }
    }
  }

  std::string_view text;
  size_t pos = 0;
};
} // namespace mla::json

rt::Expected<Value> mla::json::parse(std::string_view text) {
  return Parser(text).document();
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {
void writeString(const std::string &s, std::string &out) {
  out += '"';
  for (char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\r':
      out += "\\r";
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += c;
      }
    }
  }
  out += '"';
}
} // namespace

namespace mla::json {
void write(const Value &v, std::string &out, int indent) {
  auto newline = [&](int level) {
    out += '\n';
    out.append(2 * level, ' ');
  };
  switch (v.kind) {
  case Value::Kind::Null:
    out += "null";
    return;
  case Value::Kind::Bool:
    out += v.boolean ? "true" : "false";
    return;
  case Value::Kind::Number: {
    char buf[32];
    auto [end, ec] = v.integer ? std::to_chars(buf, buf + sizeof buf, *v.integer)
                               : std::to_chars(buf, buf + sizeof buf, v.number);
    std::string_view text(buf, ec == std::errc() ? end - buf : 0);
    out += text;
    // A number read with a fraction or exponent stays one ("-0", "2" would
    // read back as integers): printing is stable under reading.
    if (!v.integer && text.find_first_of(".eE") == std::string_view::npos)
      out += ".0";
    return;
  }
  case Value::Kind::String:
    writeString(v.text, out);
    return;
  case Value::Kind::Array:
    if (v.array->empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < v.array->size(); ++i) {
      newline(indent + 1);
      write((*v.array)[i], out, indent + 1);
      if (i + 1 < v.array->size())
        out += ',';
    }
    newline(indent);
    out += ']';
    return;
  case Value::Kind::Object:
    if (v.object->empty()) {
      out += "{}";
      return;
    }
    out += '{';
    for (size_t i = 0; i < v.object->size(); ++i) {
      newline(indent + 1);
      writeString((*v.object)[i].first, out);
      out += ": ";
      write((*v.object)[i].second, out, indent + 1);
      if (i + 1 < v.object->size())
        out += ',';
    }
    newline(indent);
    out += '}';
    return;
  }
}
} // namespace mla::json

std::string mla::json::print(const Value &value) {
  std::string out;
  write(value, out, 0);
  out += '\n';
  return out;
}
