// Literals of the .kir text: float formatting with std::to_chars, number parsing, escapes.
#include "ir/literal.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

namespace kiln::ir {

namespace {

template <typename T> std::string format_fp(T v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

/// For a literal from_chars found out of range (body: digits, '.', exponent; no sign): whether
/// it is tiny (it underflows to zero) rather than huge. Its decimal order of magnitude decides:
/// a value out of range is far from 1 on one side or the other.
bool is_tiny(std::string_view body) {
  size_t e = body.find_first_of("eE");
  std::string_view mantissa = body.substr(0, e);
  int64_t exp10 = 0;
  if (e != std::string_view::npos) {
    std::string_view digits = body.substr(e + 1);
    bool negative = !digits.empty() && digits.front() == '-';
    if (!digits.empty() && (digits.front() == '-' || digits.front() == '+'))
      digits.remove_prefix(1);
    for (char c : digits)
      exp10 = std::min<int64_t>(exp10 * 10 + (c - '0'), int64_t{1} << 40);
    if (negative) exp10 = -exp10;
  }
  size_t dot = mantissa.find('.');
  std::string_view whole = mantissa.substr(0, dot);
  std::string_view frac =
      dot == std::string_view::npos ? std::string_view() : mantissa.substr(dot + 1);
  size_t lead = whole.find_first_not_of('0');
  if (lead != std::string_view::npos) return static_cast<int64_t>(whole.size() - lead) + exp10 <= 0;
  size_t zeros = frac.find_first_not_of('0');
  if (zeros == std::string_view::npos) return true;
  return exp10 - static_cast<int64_t>(zeros) <= 0;
}

template <typename T> LiteralStatus parse_fp(std::string_view text, T& out) {
  std::string_view body = text;
  bool negative = false;
  if (!body.empty() && body.front() == '-') {
    negative = true;
    body.remove_prefix(1);
  }
  if (body == "nan") {
    out = std::numeric_limits<T>::quiet_NaN();
    return LiteralStatus::ok;
  }
  if (body == "inf") {
    out = negative ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    return LiteralStatus::ok;
  }
  // from_chars accepts "inf"/"nan"/hex-less forms only; digits must start the body.
  if (body.empty() || !(body.front() >= '0' && body.front() <= '9')) return LiteralStatus::syntax;
  T v{};
  auto r = std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::general);
  if (r.ptr != text.data() + text.size()) return LiteralStatus::syntax;
  if (r.ec == std::errc::result_out_of_range) {
    // Like strtod and PyTorch, a literal too small for the type rounds to a signed zero; only
    // one too large for it is an error.
    if (!is_tiny(body)) return LiteralStatus::out_of_range;
    out = negative ? -T(0) : T(0);
    return LiteralStatus::ok;
  }
  if (r.ec != std::errc()) return LiteralStatus::syntax;
  out = v;
  return LiteralStatus::ok;
}

} // namespace

std::string format_double(double v) { return format_fp(v); }
std::string format_float(float v) { return format_fp(v); }

bool is_float_literal(std::string_view text) {
  if (text.find_first_of(".eE") != std::string_view::npos) return true;
  if (!text.empty() && text.front() == '-') text.remove_prefix(1);
  return text == "nan" || text == "inf";
}

LiteralStatus parse_int(std::string_view text, int64_t& out) {
  std::string_view body = text;
  if (!body.empty() && body.front() == '-') body.remove_prefix(1);
  if (body.empty() || !(body.front() >= '0' && body.front() <= '9')) return LiteralStatus::syntax;
  int64_t v = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec == std::errc::result_out_of_range) return LiteralStatus::out_of_range;
  if (r.ec != std::errc() || r.ptr != text.data() + text.size()) return LiteralStatus::syntax;
  out = v;
  return LiteralStatus::ok;
}

LiteralStatus parse_double(std::string_view text, double& out) { return parse_fp(text, out); }
LiteralStatus parse_float(std::string_view text, float& out) { return parse_fp(text, out); }

std::string quote_string(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string r = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
    case '"': r += "\\\""; break;
    case '\\': r += "\\\\"; break;
    case '\n': r += "\\n"; break;
    case '\t': r += "\\t"; break;
    default:
      if (u < 0x20 || u >= 0x7f) {
        r += "\\x";
        r += kHex[u >> 4];
        r += kHex[u & 15];
      } else {
        r += c;
      }
    }
  }
  r += '"';
  return r;
}

} // namespace kiln::ir
