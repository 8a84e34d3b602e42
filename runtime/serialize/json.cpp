// The strict JSON reader: a recursive-descent parser over a byte view with explicit errors.
#include "runtime/serialize/json.h"

#include <cstdio>
#include <unordered_set>

#include "runtime/error.h"

namespace kiln::json {
namespace {

constexpr int kInvalidUtf8 = 0;
constexpr int kTruncatedUtf8 = -1;

/// The length of the UTF-8 character at text[i] when it is valid (shortest form, no
/// surrogates, at most U+10FFFF; 1 for ASCII), kTruncatedUtf8 when the text ends inside it,
/// kInvalidUtf8 otherwise.
int utf8_length(std::string_view text, size_t i) {
  auto lead = static_cast<unsigned char>(text[i]);
  if (lead < 0x80) return 1;
  int extra = -1; // continuation bytes after the lead; C0, C1 and F5..FF never lead
  if (lead >= 0xc2 && lead <= 0xdf)
    extra = 1;
  else if (lead >= 0xe0 && lead <= 0xef)
    extra = 2;
  else if (lead >= 0xf0 && lead <= 0xf4)
    extra = 3;
  if (extra < 0) return kInvalidUtf8;
  if (i + static_cast<size_t>(extra) >= text.size()) return kTruncatedUtf8;
  unsigned cp = lead & (0x3fu >> extra);
  for (int k = 1; k <= extra; ++k) {
    auto c = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
    if ((c & 0xc0) != 0x80) return kInvalidUtf8;
    cp = (cp << 6) | (c & 0x3f);
  }
  bool overlong = (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000);
  if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return kInvalidUtf8;
  return extra + 1;
}

class Parser {
public:
  Parser(std::string_view text, const std::string& context, int max_depth)
      : s_(text), context_(context), max_depth_(max_depth) {}

  Value document() {
    skip_space();
    Value v = value(0);
    skip_space();
    if (pos_ != s_.size()) fail("trailing characters after the JSON value");
    return v;
  }

private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(detail::str(context_, ": bad JSON at byte ", pos_, ": ", what));
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  void skip_space() {
    while (!at_end() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  void expect_literal(std::string_view lit) {
    if (s_.substr(pos_, lit.size()) != lit) fail("invalid literal");
    pos_ += lit.size();
  }

  Value value(int depth) {
    if (depth > max_depth_) fail(detail::str("nesting deeper than ", max_depth_, " levels"));
    if (at_end()) fail("unexpected end of input, expected a value");
    Value v;
    switch (peek()) {
    case '{': return object(depth);
    case '[': return array(depth);
    case '"':
      v.type = Value::Type::string;
      v.string = string();
      return v;
    case 't':
      expect_literal("true");
      v.type = Value::Type::boolean;
      v.boolean = true;
      return v;
    case 'f':
      expect_literal("false");
      v.type = Value::Type::boolean;
      return v;
    case 'n': expect_literal("null"); return v;
    default:
      if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return number();
      fail(detail::str("unexpected character '", printable(peek()), "'"));
    }
  }

  static std::string printable(char c) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string(1, c);
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", u);
    return buf;
  }

  Value object(int depth) {
    Value v;
    v.type = Value::Type::object;
    std::unordered_set<std::string> seen; // a linear scan would be quadratic in the key count
    ++pos_;                               // '{'
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return v;
    }
    while (true) {
      skip_space();
      if (peek() != '"') fail(at_end() ? "unterminated object" : "expected a string key");
      size_t key_pos = pos_;
      std::string key = string();
      if (!seen.insert(key).second) {
        pos_ = key_pos;
        fail("duplicate key " + quote(key));
      }
      skip_space();
      if (peek() != ':') fail("expected ':' after an object key");
      ++pos_;
      skip_space();
      v.object.push_back({std::move(key), value(depth + 1)});
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
        if (peek() == '}') fail("trailing comma in object");
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return v;
      }
      fail(at_end() ? "unterminated object" : "expected ',' or '}' in object");
    }
  }

  Value array(int depth) {
    Value v;
    v.type = Value::Type::array;
    ++pos_; // '['
    skip_space();
    if (peek() == ']') {
      ++pos_;
      return v;
    }
    while (true) {
      skip_space();
      v.array.push_back(value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
        if (peek() == ']') fail("trailing comma in array");
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return v;
      }
      fail(at_end() ? "unterminated array" : "expected ',' or ']' in array");
    }
  }

  Value number() {
    Value v;
    v.type = Value::Type::number;
    size_t start = pos_;
    bool negative = peek() == '-';
    if (negative) ++pos_;
    if (peek() == '0') {
      ++pos_;
      if (peek() >= '0' && peek() <= '9') fail("leading zero in number");
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9')
        ++pos_;
    } else {
      fail("expected digits in number");
    }
    size_t int_end = pos_;
    bool integral = true;
    if (peek() == '.') {
      integral = false;
      ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) fail("expected digits after the decimal point");
      while (peek() >= '0' && peek() <= '9')
        ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) fail("expected digits in the exponent");
      while (peek() >= '0' && peek() <= '9')
        ++pos_;
    }
    v.number = std::string(s_.substr(start, pos_ - start));
    if (integral) {
      // Accumulate negatively so INT64_MIN parses; overflow leaves is_int64 false.
      int64_t acc = 0;
      bool ok = true;
      for (size_t i = start + (negative ? 1 : 0); i < int_end && ok; ++i) {
        int digit = s_[i] - '0';
        ok = !__builtin_mul_overflow(acc, 10, &acc) && !__builtin_sub_overflow(acc, digit, &acc);
      }
      if (ok && !negative) ok = !__builtin_mul_overflow(acc, -1, &acc);
      v.is_int64 = ok;
      v.int64 = ok ? acc : 0;
    }
    return v;
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail("unterminated \\u escape");
    unsigned cp = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      cp <<= 4;
      if (c >= '0' && c <= '9')
        cp |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        cp |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        cp |= static_cast<unsigned>(c - 'A' + 10);
      else
        fail("invalid hex digit in \\u escape");
    }
    return cp;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  /// Copies one UTF-8 encoded character (validated: shortest form, no surrogates, <= U+10FFFF).
  void utf8_char(std::string& out) {
    const int n = utf8_length(s_, pos_);
    if (n == kTruncatedUtf8) fail("truncated UTF-8 sequence");
    if (n == kInvalidUtf8) fail("invalid UTF-8");
    out.append(s_.substr(pos_, static_cast<size_t>(n)));
    pos_ += static_cast<size_t>(n);
  }

  std::string string() {
    ++pos_; // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail("unterminated string");
      char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (static_cast<unsigned char>(c) >= 0x80) {
        utf8_char(out);
        continue;
      }
      ++pos_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_end()) fail("unterminated string");
      char e = s_[pos_++];
      switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        unsigned cp = hex4();
        if (cp >= 0xdc00 && cp <= 0xdfff) fail("lone low surrogate in \\u escape");
        if (cp >= 0xd800 && cp <= 0xdbff) {
          if (s_.substr(pos_, 2) != "\\u") fail("lone high surrogate in \\u escape");
          pos_ += 2;
          unsigned lo = hex4();
          if (lo < 0xdc00 || lo > 0xdfff) fail("invalid low surrogate in \\u escape");
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        append_utf8(out, cp);
        break;
      }
      default: --pos_; fail(detail::str("invalid escape '\\", printable(e), "' in string"));
      }
    }
  }

  std::string_view s_;
  const std::string& context_;
  int max_depth_;
  size_t pos_ = 0;
};

} // namespace

const char* Value::type_name(Type t) {
  switch (t) {
  case Type::null: return "null";
  case Type::boolean: return "boolean";
  case Type::number: return "number";
  case Type::string: return "string";
  case Type::array: return "array";
  case Type::object: return "object";
  }
  return "?";
}

Value parse(std::string_view text, const std::string& context, int max_depth) {
  return Parser(text, context, max_depth).document();
}

size_t invalid_utf8_at(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const int n = utf8_length(text, i);
    if (n <= 0) return i;
    i += static_cast<size_t>(n);
  }
  return std::string_view::npos;
}

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
        out += buf;
      } else {
        out += c;
      }
    }
  }
  return out + "\"";
}

} // namespace kiln::json
