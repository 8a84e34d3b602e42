// The loop IR's text parser: a line-aware lexer and a recursive-descent parser over it. The
// grammar is in docs/ir.md ("The loop IR", text form).
#include "ir/kernel/parser.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <utility>

#include "ir/literal.h"

namespace kiln::ir::kernel {
namespace {

/// Index expressions nest (a / b) at most this deep: deeper text is refused, not recursed into.
constexpr int kMaxIndexDepth = 32;

enum class Tok {
  ident,    // [A-Za-z_][A-Za-z0-9_.]*  (also nan, inf, reduce.sum, v3, i7)
  number,   // -?digits(.digits)?([eE][+-]?digits)?, or -nan / -inf
  hex,      // 0x followed by hex digits (the text keeps the 0x)
  value,    // %digits (text without the %)
  punct,    // one of [ ] ( ) { } , : = * + - / %
  schedule, // a `// schedule ...` or `schedule ...` line (text: what follows the word)
  newline,  // end of a line
  eof,
  bad, // an invalid character; text says which
};

struct Token {
  Tok kind;
  std::string text;
  int line;
  int col;
};

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex_digit(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool is_name_char(char c) { return is_ident_start(c) || is_digit(c) || c == '.'; }
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back()))
    s.remove_suffix(1);
  return s;
}

/// The text after the word `schedule` when `s` starts with that word, else nullopt.
std::optional<std::string_view> after_schedule_word(std::string_view s) {
  constexpr std::string_view kWord = "schedule";
  if (!s.starts_with(kWord)) return std::nullopt;
  if (s.size() > kWord.size() && !is_blank(s[kWord.size()])) return std::nullopt;
  return trim(s.substr(kWord.size()));
}

/// "%N". Appends rather than `"%" + str`: GCC 12 warns (-Wrestrict, falsely) on literal + string.
std::string value_ref(int id) {
  std::string s = "%";
  s += std::to_string(id);
  return s;
}

std::string show_byte(unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  if (c >= 0x20 && c < 0x7f) return std::string(1, static_cast<char>(c));
  return std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
}

/// Splits the text into tokens; stops after the first bad token.
std::vector<Token> lex(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  int line = 1;
  size_t line_start = 0;
  bool at_line_start = true; // only blanks so far on this line
  auto col = [&](size_t at) { return static_cast<int>(at - line_start) + 1; };
  auto line_end = [&](size_t from) {
    size_t end = s.find('\n', from);
    return end == std::string_view::npos ? s.size() : end;
  };
  while (i < s.size()) {
    const char c = s[i];
    const size_t start = i;
    if (is_blank(c)) {
      ++i;
      continue;
    }
    if (c == '\n') {
      out.push_back({Tok::newline, "", line, col(i)});
      ++i;
      ++line;
      line_start = i;
      at_line_start = true;
      continue;
    }
    const bool first_on_line = at_line_start;
    at_line_start = false;
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      const size_t end = line_end(i);
      if (first_on_line)
        if (auto rest = after_schedule_word(trim(s.substr(i + 2, end - i - 2))))
          out.push_back({Tok::schedule, std::string(*rest), line, col(start)});
      i = end;
    } else if (is_ident_start(c)) {
      while (i < s.size() && is_name_char(s[i]))
        ++i;
      std::string word(s.substr(start, i - start));
      if (first_on_line && word == "schedule" &&
          (i == s.size() || is_blank(s[i]) || s[i] == '\n')) {
        const size_t end = line_end(i);
        out.push_back({Tok::schedule, std::string(trim(s.substr(i, end - i))), line, col(start)});
        i = end;
        continue;
      }
      out.push_back({Tok::ident, std::move(word), line, col(start)});
    } else if (c == '0' && i + 2 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'X') &&
               is_hex_digit(s[i + 2])) {
      i += 2;
      while (i < s.size() && is_hex_digit(s[i]))
        ++i;
      out.push_back({Tok::hex, std::string(s.substr(start, i - start)), line, col(start)});
    } else if (is_digit(c) || (c == '-' && i + 1 < s.size() && is_digit(s[i + 1]))) {
      if (c == '-') ++i;
      while (i < s.size() && is_digit(s[i]))
        ++i;
      if (i < s.size() && s[i] == '.') {
        ++i;
        while (i < s.size() && is_digit(s[i]))
          ++i;
      }
      if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
        if (j < s.size() && is_digit(s[j])) {
          i = j;
          while (i < s.size() && is_digit(s[i]))
            ++i;
        }
      }
      out.push_back({Tok::number, std::string(s.substr(start, i - start)), line, col(start)});
    } else if (c == '-' && (s.substr(i + 1, 3) == "nan" || s.substr(i + 1, 3) == "inf") &&
               (i + 4 >= s.size() || !is_name_char(s[i + 4]))) {
      i += 4;
      out.push_back({Tok::number, std::string(s.substr(start, 4)), line, col(start)});
    } else if (c == '%' && i + 1 < s.size() && is_digit(s[i + 1])) {
      ++i;
      while (i < s.size() && is_digit(s[i]))
        ++i;
      out.push_back(
          {Tok::value, std::string(s.substr(start + 1, i - start - 1)), line, col(start)});
    } else if (std::string_view("[](){},:=*+-/%").find(c) != std::string_view::npos) {
      out.push_back({Tok::punct, std::string(1, c), line, col(start)});
      ++i;
    } else {
      out.push_back(
          {Tok::bad, "'" + show_byte(static_cast<unsigned char>(c)) + "'", line, col(start)});
      return out;
    }
  }
  out.push_back({Tok::eof, "", line, col(i)});
  return out;
}

std::string describe(const Token& t) {
  auto clip = [](const std::string& s) { return s.size() > 40 ? s.substr(0, 40) + "..." : s; };
  switch (t.kind) {
  case Tok::ident:
  case Tok::number:
  case Tok::hex:
  case Tok::punct: return "'" + clip(t.text) + "'";
  case Tok::value: return "'%" + clip(t.text) + "'";
  case Tok::schedule: return "a schedule line";
  case Tok::newline: return "end of line";
  case Tok::eof: return "end of file";
  case Tok::bad: return t.text;
  }
  return "?";
}

/// Thrown inside the parser, turned into an Expected at the top.
struct ParseError {
  std::string message;
};

/// An operand written in the text, checked against the kernel's ids once it is complete.
struct Use {
  int id;
  SourceLoc at;
};

class Parser {
public:
  Parser(std::string_view text, std::string_view file) : toks_(lex(text)), file_(file) {}

  std::vector<ParsedKernel> module() {
    std::vector<ParsedKernel> out;
    skip_newlines();
    if (peek().kind == Tok::eof) expected("'kernel'");
    while (peek().kind != Tok::eof) {
      ParsedKernel pk;
      if (peek().kind == Tok::schedule) {
        pk.schedule = peek().text;
        pk.schedule_at = loc(peek());
        next();
        skip_newlines();
        if (!is_ident("kernel")) expected("'kernel' after the schedule line");
      }
      if (!is_ident("kernel")) expected("'kernel'");
      kernel(pk);
      out.push_back(std::move(pk));
      skip_newlines();
    }
    return out;
  }

private:
  // ---- tokens ----
  const Token& peek() const { return toks_[pos_]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (t.kind != Tok::eof && t.kind != Tok::bad) ++pos_;
    return t;
  }
  bool is_punct(char c) const { return peek().kind == Tok::punct && peek().text[0] == c; }
  bool is_ident(std::string_view w) const { return peek().kind == Tok::ident && peek().text == w; }
  static SourceLoc loc(const Token& t) { return {t.line, t.col}; }

  [[noreturn]] void fail(SourceLoc at, const std::string& msg) const {
    throw ParseError{std::string(file_) + ":" + std::to_string(at.line) + ":" +
                     std::to_string(at.col) + ": error: " + msg};
  }
  [[noreturn]] void fail(const Token& t, const std::string& msg) const { fail(loc(t), msg); }
  [[noreturn]] void expected(const std::string& what) const {
    fail(peek(), "expected " + what + ", got " + describe(peek()));
  }
  void expect_punct(char c) {
    if (!is_punct(c)) expected(std::string("'") + c + "'");
    next();
  }
  void expect_ident(std::string_view w) {
    if (!is_ident(w)) expected("'" + std::string(w) + "'");
    next();
  }
  void expect_end_of_line() {
    if (peek().kind == Tok::eof) return;
    if (peek().kind != Tok::newline) expected("end of line");
    next();
  }
  void skip_newlines() {
    while (peek().kind == Tok::newline)
      next();
  }

  // ---- numbers ----
  /// A decimal integer token (negative allowed), as int64.
  int64_t integer(const std::string& what) {
    const Token& t = peek();
    if (t.kind != Tok::number || is_float_literal(t.text)) expected(what);
    int64_t v = 0;
    if (parse_int(t.text, v) != LiteralStatus::ok)
      fail(t, "integer " + t.text + " out of range for i64");
    next();
    return v;
  }
  /// A non-negative integer that fits an int (ids, variables), from the digits of `text`.
  int small_int(const Token& t, std::string_view digits, const std::string& what) {
    int v = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
      fail(t, what + " " + t.text + " out of range");
    return v;
  }
  DType dtype() {
    if (peek().kind != Tok::ident) expected("a dtype");
    DType dt;
    if (!parse_dtype(peek().text, dt)) fail(peek(), "unknown dtype '" + peek().text + "'");
    next();
    return dt;
  }
  std::vector<int64_t> list() {
    std::vector<int64_t> v;
    expect_punct('[');
    if (!is_punct(']')) {
      for (;;) {
        v.push_back(integer("an integer"));
        if (is_punct(']')) break;
        expect_punct(',');
      }
    }
    next();
    return v;
  }

  // ---- kernel ----
  void kernel(ParsedKernel& pk) {
    Kernel& k = pk.kernel;
    pk.at = loc(peek());
    next(); // kernel
    if (peek().kind != Tok::ident) expected("a kernel name");
    k.name = next().text;
    expect_ident("outer");
    k.outer = list();
    expect_ident("inner");
    k.inner = list();
    expect_end_of_line();
    buffers_.clear();
    defs_.clear();
    uses_.clear();
    skip_newlines();
    while (is_ident("buffer")) {
      buffer(pk);
      skip_newlines();
    }
    while (is_ident("part")) {
      part(pk);
      skip_newlines();
    }
    for (;;) {
      skip_newlines();
      if (peek().kind == Tok::value) {
        k.items.push_back({instr(), -1});
      } else if (is_ident("reduce") || is_ident("map")) {
        loop(pk);
      } else {
        break;
      }
    }
    if (is_ident("buffer")) fail(peek(), "buffers are declared before the first instruction");
    if (peek().kind != Tok::eof && peek().kind != Tok::schedule && !is_ident("kernel") &&
        !(in_part_ && is_punct('}')))
      expected("an instruction, a loop, 'kernel' or end of file");
    finish(pk);
  }

  /// ` part N buffers NAME... {`, a kernel, ` }`: a foreach kernel's part, its buffers named
  /// among the kernel's.
  void part(ParsedKernel& pk) {
    if (in_part_) fail(peek(), "a part inside a part");
    next(); // part
    const Token& number = peek();
    if (integer("a part number") != static_cast<int64_t>(pk.kernel.parts.size()))
      fail(number, "parts are numbered from 0 in order");
    expect_ident("buffers");
    Part p;
    while (peek().kind == Tok::ident) {
      auto it = buffers_.find(peek().text);
      if (it == buffers_.end()) fail(peek(), "unknown buffer '" + peek().text + "'");
      p.buffers.push_back(it->second);
      next();
    }
    expect_punct('{');
    expect_end_of_line();
    skip_newlines();
    if (!is_ident("kernel")) expected("'kernel'");
    auto outer = std::move(buffers_);
    ParsedKernel inner;
    in_part_ = true;
    kernel(inner);
    in_part_ = false;
    buffers_ = std::move(outer);
    defs_.clear();
    uses_.clear();
    skip_newlines();
    expect_punct('}');
    expect_end_of_line();
    p.kernel = std::move(inner.kernel);
    pk.kernel.parts.push_back(std::move(p));
  }

  void buffer(ParsedKernel& pk) {
    pk.buffer_at.push_back(loc(peek()));
    next(); // buffer
    Buffer b;
    if (peek().kind != Tok::ident) expected("a buffer name");
    const Token& name = next();
    b.name = name.text;
    if (!buffers_.emplace(b.name, static_cast<int>(pk.kernel.buffers.size())).second)
      fail(name, "buffer '" + b.name + "' declared twice");
    expect_punct(':');
    b.dtype = dtype();
    if (is_ident("in") || is_ident("out"))
      b.output = next().text == "out";
    else
      expected("'in' or 'out'");
    expect_ident("extent");
    b.extent = integer("an extent");
    expect_end_of_line();
    pk.kernel.buffers.push_back(std::move(b));
  }

  void loop(ParsedKernel& pk) {
    Kernel& k = pk.kernel;
    const int id = static_cast<int>(k.loops.size());
    pk.loop_at.push_back(loc(peek()));
    Loop l;
    l.kind = next().text == "reduce" ? Loop::Kind::reduce : Loop::Kind::map;
    expect_ident("loop");
    expect_punct('{');
    expect_end_of_line();
    k.loops.push_back(std::move(l));
    k.items.push_back({-1, id});
    for (;;) {
      skip_newlines();
      if (is_punct('}')) break;
      if (peek().kind == Tok::value) {
        const int body_id = instr();
        k.loops.back().body.push_back(body_id);
      } else if (is_ident("reduce") || is_ident("map")) {
        fail(peek(), "loops do not nest: close the loop with '}' first");
      } else {
        expected("an instruction or '}'");
      }
    }
    next(); // }
    expect_end_of_line();
  }

  /// Reads one instruction line; returns its id.
  int instr() {
    const Token& id_tok = next();
    const int id = small_int(id_tok, id_tok.text, "instruction id");
    if (defs_.count(id)) fail(id_tok, value_ref(id) + " defined twice");
    expect_punct(':');
    Instr in;
    in.dtype = dtype();
    expect_punct('=');
    if (peek().kind != Tok::ident) expected("an instruction ('load', 'store', 'constant', ...)");
    const Token& kw = next();
    const std::string& w = kw.text;
    if (w == "load" || w == "store") {
      in.kind = w == "load" ? Instr::Kind::load : Instr::Kind::store;
      if (peek().kind != Tok::ident) expected("a buffer name");
      auto it = buffers_.find(peek().text);
      if (it == buffers_.end()) fail(peek(), "unknown buffer '" + peek().text + "'");
      in.buffer = it->second;
      next();
      expect_punct('[');
      in.index = index(0);
      expect_punct(']');
      if (in.kind == Instr::Kind::store) {
        expect_punct(',');
        in.args.push_back(operand());
      }
    } else if (w == "constant") {
      in.kind = Instr::Kind::constant;
      constant(in);
    } else if (w == "cast") {
      in.kind = Instr::Kind::cast;
      in.args.push_back(operand());
    } else if (w.starts_with("reduce.")) {
      in.kind = Instr::Kind::reduce;
      in.op = op_named(kw, w.substr(7));
      in.args.push_back(operand());
      if (is_ident("along")) {
        next();
        in.arg_var = variable();
      }
    } else {
      in.kind = Instr::Kind::op;
      in.op = op_named(kw, w);
      if (peek().kind == Tok::value) {
        for (;;) {
          in.args.push_back(operand());
          if (!is_punct(',')) break;
          next();
        }
      }
    }
    expect_end_of_line();
    defs_.emplace(id, Def{std::move(in), loc(id_tok)});
    return id;
  }

  Op op_named(const Token& t, std::string_view name) {
    std::optional<Op> op = find_op(name);
    if (!op) fail(t, "unknown op '" + std::string(name) + "'");
    return *op;
  }

  int operand() {
    if (peek().kind != Tok::value) expected("a value '%N'");
    const Token& t = next();
    const int id = small_int(t, t.text, "value");
    uses_.push_back({id, loc(t)});
    return id;
  }

  int variable() {
    const Token& t = peek();
    if (t.kind != Tok::ident || t.text.size() < 2 || t.text[0] != 'v' || !is_digit(t.text[1]))
      expected("a loop variable 'vN'");
    next();
    return small_int(t, std::string_view(t.text).substr(1), "loop variable");
  }

  /// `constant DEC [(0xBITS)] [iINT]`: the bits are authoritative (the printer writes all
  /// three); without them the decimal gives the value, rounded to the dtype's precision, and
  /// without the i-form the value converted to i64 as eager code converts (NaN to 0,
  /// saturating) gives ivalue.
  void constant(Instr& in) {
    const Token& dec = peek();
    if (dec.kind != Tok::number && !is_ident("nan") && !is_ident("inf"))
      expected("a number after 'constant'");
    double written = 0;
    if (parse_double(dec.text, written) != LiteralStatus::ok)
      fail(dec, "number " + dec.text + " out of range for f64");
    next();
    if (!is_punct('(')) {
      in.value = decimal_value(dec, written, in.dtype);
    } else {
      next();
      const Token& bits_tok = peek();
      if (bits_tok.kind != Tok::hex) expected("the value's bits '0x...'");
      const std::string_view digits = std::string_view(bits_tok.text).substr(2);
      uint64_t bits = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), bits, 16);
      if (ec != std::errc() || end != digits.data() + digits.size())
        fail(bits_tok, "bits " + bits_tok.text + " do not fit 64 bits");
      next();
      expect_punct(')');
      const double exact = std::bit_cast<double>(bits);
      const bool same = std::isnan(written)
                            ? std::isnan(exact)
                            : written == exact && std::signbit(written) == std::signbit(exact);
      if (!same)
        fail(dec, "constant " + dec.text + " does not match its bits " + bits_tok.text + " (" +
                      format_double(exact) + ")");
      in.value = exact;
    }
    if (peek().kind == Tok::ident && peek().text[0] == 'i') {
      const Token& t = next();
      if (t.text == "i") {
        in.ivalue = integer("an integer after 'i'");
      } else if (parse_int(std::string_view(t.text).substr(1), in.ivalue) != LiteralStatus::ok) {
        fail(t, "expected the integer value 'iN', got '" + t.text + "'");
      }
    } else {
      in.ivalue = to_i64(in.value);
    }
  }

  /// A decimal read in a float dtype's precision as the graph parser reads literals (f32 by
  /// from_chars(float), f16/bf16 through float, rounded to nearest even; a finite decimal
  /// beyond the dtype is an error); other dtypes keep the f64 value.
  double decimal_value(const Token& dec, double written, DType t) const {
    if (t != DType::f32 && t != DType::f16 && t != DType::bf16) return written;
    float f = 0;
    if (parse_float(dec.text, f) != LiteralStatus::ok)
      fail(dec, "number " + dec.text + " out of range for f32");
    const float r = t == DType::f16    ? static_cast<float>(Half(f))
                    : t == DType::bf16 ? static_cast<float>(BFloat16(f))
                                       : f;
    if (std::isfinite(f) && !std::isfinite(r))
      fail(dec, "number " + dec.text + " out of range for " + std::string(dtype_name(t)));
    return r;
  }

  static int64_t to_i64(double v) {
    if (std::isnan(v)) return 0;
    if (v >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
    if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(v);
  }

  // ---- index expressions ----
  /// `[-]elem ((+|-) elem)*` where elem is `INT`, `INT*atom` or `atom`; at most one constant
  /// and each term once (the printer's simplified form).
  Index index(int depth) {
    if (depth > kMaxIndexDepth)
      fail(peek(), "index expression nested more than " + std::to_string(kMaxIndexDepth) + " deep");
    Index r;
    bool have_constant = false, first = true;
    for (;;) {
      int64_t sign = 1;
      const bool negative_number = peek().kind == Tok::number && peek().text[0] == '-';
      if (is_punct('-')) {
        sign = -1;
        next();
      } else if (!first && is_punct('+')) {
        next();
      } else if (!first && !negative_number) {
        break;
      }
      const bool after_operator = sign == -1 || (!first && !negative_number);
      first = false;
      const Token& at = peek();
      if (at.kind == Tok::number) {
        if (after_operator && at.text[0] == '-') expected("a number >= 0 or a term");
        const int64_t c = integer("an integer");
        if (is_punct('*')) {
          next();
          add_term(r, c * sign, atom(depth), at);
        } else {
          if (have_constant) fail(at, "two constants in one index expression");
          have_constant = true;
          r = r + Index::constant(c * sign);
        }
      } else {
        add_term(r, sign, atom(depth), at);
      }
    }
    return r;
  }

  /// Adds coef·term (term: one term of coefficient 1, as atom() gives) to r; a term already
  /// there is an error (and is not summed, which could overflow).
  void add_term(Index& r, int64_t coef, const Index& term, const Token& at) {
    if (coef == 0) fail(at, "a term with coefficient 0");
    for (const auto& [c, t] : r.terms())
      if (t == term.terms().front().second)
        fail(at, "term " + term.str() +
                     " appears twice in one index expression (write it once, with the summed "
                     "coefficient)");
    r = r + term * coef;
  }

  /// `vN` or `(index / D)` or `(index % D)`, D >= 2: one term with coefficient 1.
  Index atom(int depth) {
    if (is_punct('(')) {
      next();
      Index inner = index(depth + 1);
      if (!is_punct('/') && !is_punct('%')) expected("'/' or '%'");
      const bool div = next().text == "/";
      const Token& d_tok = peek();
      const int64_t d = integer("a divisor");
      if (d < 2) fail(d_tok, "a divisor must be at least 2, got " + std::to_string(d));
      expect_punct(')');
      return div ? Index::floordiv(inner, d, {}) : Index::mod(inner, d, {});
    }
    if (peek().kind != Tok::ident) expected("a term ('vN' or '(... / N)' or '(... % N)')");
    return Index::var(variable());
  }

  // ---- the kernel's instructions, in id order ----
  struct Def {
    Instr instr;
    SourceLoc at;
  };

  void finish(ParsedKernel& pk) {
    const int n = static_cast<int>(defs_.size());
    std::vector<std::pair<SourceLoc, int>> beyond; // ids >= n: there is a gap below n
    for (const auto& [id, d] : defs_)
      if (id >= n) beyond.push_back({d.at, id});
    if (!beyond.empty()) {
      auto first = beyond.front();
      for (const auto& b : beyond)
        if (b.first.line < first.first.line) first = b;
      int missing = 0;
      while (defs_.count(missing))
        ++missing;
      fail(first.first,
           "instruction ids of a kernel run from %0 without gaps: " + value_ref(first.second) +
               " is defined but " + value_ref(missing) + " is not");
    }
    for (const Use& u : uses_)
      if (!defs_.count(u.id)) fail(u.at, "use of undefined value " + value_ref(u.id));
    pk.kernel.instrs.resize(static_cast<size_t>(n));
    pk.instr_at.resize(static_cast<size_t>(n));
    for (auto& [id, d] : defs_) {
      pk.kernel.instrs[static_cast<size_t>(id)] = std::move(d.instr);
      pk.instr_at[static_cast<size_t>(id)] = d.at;
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  std::string_view file_;
  // Per kernel: buffer names, instructions by id, operands as written.
  std::unordered_map<std::string, int> buffers_;
  std::unordered_map<int, Def> defs_;
  bool in_part_ = false; // parsing a foreach kernel's part
  std::vector<Use> uses_;
};

} // namespace

Expected<std::vector<ParsedKernel>> parse_kernels(std::string_view text,
                                                  std::string_view file_name) {
  try {
    return Parser(text, file_name).module();
  } catch (const ParseError& e) {
    return Error::without_location(e.message);
  }
}

Expected<Kernel> parse_kernel(std::string_view text, std::string_view file_name) {
  Expected<std::vector<ParsedKernel>> m = parse_kernels(text, file_name);
  if (!m) return m.error();
  if (m->size() != 1)
    return Error::without_location(std::string(file_name) + ": error: expected one kernel, got " +
                                   std::to_string(m->size()));
  return std::move(m->front().kernel);
}

bool is_kernel_text(std::string_view text) {
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.empty()) continue;
    if (line.starts_with("//")) {
      if (after_schedule_word(trim(line.substr(2)))) return true;
      continue;
    }
    auto word = [&](std::string_view w) {
      return line.starts_with(w) && (line.size() == w.size() || is_blank(line[w.size()]));
    };
    return word("kernel") || word("schedule");
  }
  return false;
}

} // namespace kiln::ir::kernel
