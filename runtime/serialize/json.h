// A small strict JSON reader and string escaper for file headers (safetensors); no dependency.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::json {

/// One JSON value. Objects keep their keys in file order (duplicates are a parse error).
struct Value {
  enum class Type { null, boolean, number, string, array, object };
  Type type = Type::null;
  bool boolean = false;
  /// A number's source text ("24", "-1.5e3"), and whether it is an integer that fits int64.
  std::string number;
  bool is_int64 = false;
  int64_t int64 = 0;
  std::string string;
  std::vector<Value> array;
  struct Member;
  std::vector<Member> object;

  /// "null", "boolean", "number", "string", "array", "object".
  static const char* type_name(Type t);
};

/// One key of an object with its value.
struct Value::Member {
  std::string key;
  Value value;
};

/// Parses one JSON document (RFC 8259): UTF-8 text, whitespace around the value allowed,
/// anything else after it rejected. Nesting deeper than max_depth is rejected. Throws
/// kiln::Error with `context: bad JSON at byte N: problem`.
Value parse(std::string_view text, const std::string& context, int max_depth = 64);

/// The byte offset of the first byte of `text` that is not part of valid UTF-8 (shortest form,
/// no surrogates, at most U+10FFFF: the rules `parse` applies to strings), or npos when all of
/// it is valid.
size_t invalid_utf8_at(std::string_view text);

/// `"text"` with JSON escapes (quotes, backslashes, control characters as \u00XX).
std::string quote(std::string_view text);

} // namespace kiln::json
