// Literals of the .kir text: shortest round-trip float text, number parsing, string escapes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::ir {

/// The shortest text that reads back as exactly `v` (std::to_chars), with ".0" appended when
/// it has neither a '.' nor an exponent: "1.0", "2.5e-08", "-0.0"; NaN is "nan" (any sign or
/// payload), infinities "inf" and "-inf".
std::string format_double(double v);
/// The same in float precision (f32, and f16/bf16 through their float value).
std::string format_float(float v);

/// True when a number's text is floating: it has a '.', an exponent, or is nan/inf/-inf.
bool is_float_literal(std::string_view text);

/// Outcome of reading a number.
enum class LiteralStatus { ok, syntax, out_of_range };
/// Reads a decimal integer ("-3"); the whole text must be consumed.
LiteralStatus parse_int(std::string_view text, int64_t& out);
/// Reads a float literal ("2.5", "-3", "1e-08", "nan", "inf", "-inf"); the whole text must
/// be consumed. The value is rounded to nearest; a finite value beyond the type's largest is
/// out_of_range, one below its smallest subnormal rounds to a signed zero.
LiteralStatus parse_double(std::string_view text, double& out);
LiteralStatus parse_float(std::string_view text, float& out);

/// `s` in double quotes with `\"`, `\\`, `\n`, `\t` and `\xHH` (other bytes below 0x20 and
/// from 0x7f) escaped.
std::string quote_string(std::string_view s);

} // namespace kiln::ir
