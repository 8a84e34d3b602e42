// The .kir text parser: a line-aware lexer and a recursive-descent parser over it.
#include "ir/parser.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ir/infer.h"
#include "ir/literal.h"
#include "runtime/ops.h"

namespace kiln::ir {

namespace {

/// Constants larger than this are refused before any allocation.
constexpr int64_t kMaxConstantElements = int64_t{1} << 24;

enum class Tok {
  ident,   // [A-Za-z_][A-Za-z0-9_.]*  (also true, false, nan, inf)
  number,  // -?digits(.digits*)?([eE][+-]?digits)? or -inf / -nan
  value,   // %name (text without the %)
  at,      // @name (text without the @)
  string,  // "..." (text unescaped)
  loc,     // a `// at LOCATION` comment (text = LOCATION)
  punct,   // one of ( ) [ ] { } , = :
  newline, // end of a line
  eof,
  bad, // an invalid character or malformed token; text says what
};

struct Token {
  Tok kind;
  std::string text;
  int line;
  int col;
};

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_ident_start(c) || is_digit(c) || c == '.'; }

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
  auto col = [&](size_t at) { return static_cast<int>(at - line_start) + 1; };
  while (i < s.size()) {
    char c = s[i];
    size_t start = i;
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
    } else if (c == '\n') {
      out.push_back({Tok::newline, "", line, col(i)});
      ++i;
      ++line;
      line_start = i;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      size_t end = s.find('\n', i);
      if (end == std::string_view::npos) end = s.size();
      std::string_view body = s.substr(i + 2, end - i - 2);
      if (body.substr(0, 4) == " at ") {
        std::string loc(body.substr(4));
        while (!loc.empty() && (loc.back() == ' ' || loc.back() == '\t' || loc.back() == '\r'))
          loc.pop_back();
        out.push_back({Tok::loc, std::move(loc), line, col(i)});
      }
      i = end;
    } else if (is_ident_start(c)) {
      while (i < s.size() && is_name_char(s[i]))
        ++i;
      out.push_back({Tok::ident, std::string(s.substr(start, i - start)), line, col(start)});
    } else if (is_digit(c) ||
               (c == '-' && i + 1 < s.size() && (is_digit(s[i + 1]) || is_ident_start(s[i + 1])))) {
      if (c == '-') ++i;
      if (is_ident_start(s[i])) {
        size_t w = i;
        while (w < s.size() && is_name_char(s[w]))
          ++w;
        std::string_view word = s.substr(i, w - i);
        if (word != "inf" && word != "nan") {
          out.push_back({Tok::bad, "'-'", line, col(start)});
          return out;
        }
        i = w;
      } else {
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
      }
      out.push_back({Tok::number, std::string(s.substr(start, i - start)), line, col(start)});
    } else if (c == '%' || c == '@') {
      ++i;
      while (i < s.size() && is_name_char(s[i]))
        ++i;
      out.push_back({c == '%' ? Tok::value : Tok::at,
                     std::string(s.substr(start + 1, i - start - 1)), line, col(start)});
    } else if (c == '"') {
      ++i;
      std::string text;
      for (;;) {
        if (i >= s.size() || s[i] == '\n') {
          out.push_back({Tok::bad, "unterminated string", line, col(start)});
          return out;
        }
        char d = s[i];
        if (d == '"') {
          ++i;
          break;
        }
        if (d == '\\') {
          char e = i + 1 < s.size() ? s[i + 1] : '\0';
          auto hex = [](char h) {
            if (is_digit(h)) return h - '0';
            if (h >= 'a' && h <= 'f') return h - 'a' + 10;
            if (h >= 'A' && h <= 'F') return h - 'A' + 10;
            return -1;
          };
          if (e == '"' || e == '\\') {
            text += e;
            i += 2;
          } else if (e == 'n') {
            text += '\n';
            i += 2;
          } else if (e == 't') {
            text += '\t';
            i += 2;
          } else if (e == 'x' && i + 3 < s.size() && hex(s[i + 2]) >= 0 && hex(s[i + 3]) >= 0) {
            text += static_cast<char>(hex(s[i + 2]) * 16 + hex(s[i + 3]));
            i += 4;
          } else {
            out.push_back({Tok::bad, "invalid escape in string", line, col(i)});
            return out;
          }
          continue;
        }
        if (static_cast<unsigned char>(d) < 0x20 && d != '\t') {
          out.push_back(
              {Tok::bad,
               "control character '" + show_byte(static_cast<unsigned char>(d)) + "' in string",
               line, col(i)});
          return out;
        }
        text += d;
        ++i;
      }
      out.push_back({Tok::string, std::move(text), line, col(start)});
    } else if (std::string_view("()[]{},=:").find(c) != std::string_view::npos) {
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
  case Tok::punct: return "'" + clip(t.text) + "'";
  case Tok::value: return "'%" + clip(t.text) + "'";
  case Tok::at: return "'@" + clip(t.text) + "'";
  case Tok::string: return "string " + clip(quote_string(t.text));
  case Tok::loc: return "a location comment";
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

class Parser {
public:
  Parser(std::string_view text, std::string_view filename) : toks_(lex(text)), file_(filename) {}

  ParsedModule module() {
    ParsedModule m;
    skip_newlines();
    if (peek().kind == Tok::eof) fail(peek(), "expected 'graph', got end of file");
    while (peek().kind != Tok::eof) {
      m.graphs.push_back(graph(m));
      skip_newlines();
      if (peek().kind != Tok::eof && !is_ident("graph")) expected("'graph' or end of file");
    }
    return m;
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

  [[noreturn]] void fail(const Token& t, const std::string& msg) const {
    throw ParseError{std::string(file_) + ":" + std::to_string(t.line) + ":" +
                     std::to_string(t.col) + ": error: " + msg};
  }
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
    if (peek().kind == Tok::loc) next(); // a location comment off a node line is ignored
    if (peek().kind == Tok::eof) return;
    if (peek().kind != Tok::newline) expected("end of line");
    next();
  }
  void skip_newlines() {
    while (peek().kind == Tok::newline || peek().kind == Tok::loc)
      next();
  }

  // ---- numbers ----
  int64_t integer(const std::string& what) {
    if (peek().kind != Tok::number) expected(what);
    const Token& t = peek();
    int64_t v = 0;
    if (is_float_literal(t.text)) expected(what);
    if (parse_int(t.text, v) == LiteralStatus::out_of_range)
      fail(t, "integer literal " + t.text + " out of range for i64");
    next();
    return v;
  }
  /// A float literal token (number, nan, inf) or nothing.
  bool at_float_literal() const {
    return peek().kind == Tok::number || is_ident("nan") || is_ident("inf");
  }
  double float_value(const std::string& what) {
    if (!at_float_literal()) expected(what);
    const Token& t = peek();
    double v = 0;
    if (parse_double(t.text, v) != LiteralStatus::ok)
      fail(t, "float literal " + t.text + " out of range for f64");
    next();
    return v;
  }

  // ---- types ----
  int64_t dim(bool allow_symbolic, const char* what) {
    if (allow_symbolic && peek().kind == Tok::ident && peek().text.size() > 1 &&
        peek().text[0] == 's') {
      const Token& t = peek();
      int64_t k = 0;
      if (parse_int(std::string_view(t.text).substr(1), k) != LiteralStatus::ok || k < 0)
        expected(what);
      next();
      return Type::symbol(k);
    }
    if (peek().kind == Tok::number && !allow_symbolic) return integer(what); // strides
    int64_t v = integer(what);
    if (v < 0)
      fail(toks_[pos_ - 1], "expected a size >= 0 or a symbol sK, got " + std::to_string(v));
    return v;
  }

  Type type() {
    if (peek().kind != Tok::ident) expected("a dtype");
    DType dt;
    if (!parse_dtype(peek().text, dt)) fail(peek(), "unknown dtype '" + peek().text + "'");
    const Token& dtype_tok = next();
    Shape sizes, strides;
    bool wrapped = true, has_strides = false;
    if (is_punct('[')) {
      wrapped = false;
      next();
      if (!is_punct(']')) {
        for (;;) {
          sizes.push_back(dim(true, "a size or a symbol sK"));
          if (is_punct(']')) break;
          expect_punct(',');
        }
      }
      next();
      if (is_punct('{')) {
        const Token& open = peek();
        has_strides = true;
        next();
        if (!is_punct('}')) {
          for (;;) {
            strides.push_back(dim(false, "a stride"));
            if (is_punct('}')) break;
            expect_punct(',');
          }
        }
        next();
        if (strides.size() != sizes.size())
          fail(open, std::to_string(strides.size()) + " strides for a rank-" +
                         std::to_string(sizes.size()) + " type");
      }
    }
    // Layouts and element counts are computed in int64 everywhere: refuse sizes whose
    // product overflows it (symbolic sizes do not count).
    int64_t product = 1;
    for (int64_t s : sizes) {
      if (s <= 1) continue;
      if (product > std::numeric_limits<int64_t>::max() / s)
        fail(dtype_tok, "the element count of type " + Type(dt, sizes).str() + " overflows int64");
      product *= s;
    }
    Device dev = Device::cpu();
    if (peek().kind == Tok::at) {
      const Token& t = peek();
      if (t.text == "cpu") {
        next();
      } else if (t.text == "cuda") {
        next();
        int64_t index = 0;
        if (is_punct(':')) {
          next();
          index = integer("a device index");
          if (index < 0 || index > std::numeric_limits<int>::max())
            fail(toks_[pos_ - 1], "device index " + std::to_string(index) + " out of range");
        }
        dev = Device::cuda(static_cast<int>(index));
      } else {
        expected("a device '@cpu' or '@cuda:N'");
      }
    }
    last_type_had_strides_ = has_strides;
    return Type(dt, std::move(sizes), std::move(strides), dev, wrapped);
  }

  // ---- values ----
  Value* use(const std::unordered_map<std::string, Value*>& names) {
    if (peek().kind != Tok::value) expected("a value");
    auto it = names.find(peek().text);
    if (it == names.end()) fail(peek(), "use of undefined value %" + peek().text);
    next();
    return it->second;
  }
  void define(std::unordered_map<std::string, Value*>& names, const Token& t, Value* v) {
    if (!names.emplace(t.text, v).second) fail(t, "value %" + t.text + " defined twice");
  }
  const Token& value_name(const std::unordered_map<std::string, Value*>& names) {
    if (peek().kind != Tok::value || peek().text.empty()) expected("a value name '%N'");
    if (names.count(peek().text)) fail(peek(), "value %" + peek().text + " defined twice");
    return next();
  }

  // ---- constants ----
  /// Reads one element literal of dtype dt into p[i].
  void element(DType dt, void* data, int64_t i) {
    const Token& t = peek();
    std::string what = std::string("a ") + std::string(dtype_name(dt)) + " literal";
    if (dt == DType::bool_) {
      if (!is_ident("true") && !is_ident("false")) expected("'true' or 'false'");
      static_cast<bool*>(data)[i] = t.text == "true";
      next();
      return;
    }
    if (is_floating(dt)) {
      if (!at_float_literal()) expected(what);
      auto range = [&] {
        fail(t, "literal " + t.text + " out of range for " + std::string(dtype_name(dt)));
      };
      if (dt == DType::f64) {
        double v = 0;
        if (parse_double(t.text, v) != LiteralStatus::ok) range();
        static_cast<double*>(data)[i] = v;
      } else {
        float v = 0;
        if (parse_float(t.text, v) != LiteralStatus::ok) range();
        if (dt == DType::f32) {
          static_cast<float*>(data)[i] = v;
        } else if (dt == DType::f16) {
          Half h(v);
          if (std::isfinite(v) && !std::isfinite(static_cast<float>(h))) range();
          static_cast<Half*>(data)[i] = h;
        } else {
          BFloat16 h(v);
          if (std::isfinite(v) && !std::isfinite(static_cast<float>(h))) range();
          static_cast<BFloat16*>(data)[i] = h;
        }
      }
      next();
      return;
    }
    // Integers.
    if (peek().kind != Tok::number && !is_ident("nan") && !is_ident("inf")) expected(what);
    if (is_float_literal(t.text))
      fail(t, "expected an integer literal for " + std::string(dtype_name(dt)) + ", got '" +
                  t.text + "'");
    int64_t v = 0;
    LiteralStatus st = parse_int(t.text, v);
    int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    if (dt == DType::i8) lo = -128, hi = 127;
    if (dt == DType::u8) lo = 0, hi = 255;
    if (dt == DType::i32)
      lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
    if (st != LiteralStatus::ok || v < lo || v > hi)
      fail(t, "literal " + t.text + " out of range for " + std::string(dtype_name(dt)));
    switch (dt) {
    case DType::i8: static_cast<int8_t*>(data)[i] = static_cast<int8_t>(v); break;
    case DType::u8: static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v); break;
    case DType::i32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v); break;
    default: static_cast<int64_t*>(data)[i] = v; break;
    }
    next();
  }

  Tensor constant(const Type& t, const Token& type_tok) {
    if (last_type_had_strides_)
      fail(type_tok, "a constant's type has no strides (constants are contiguous)");
    if (!t.device().is_cpu())
      fail(type_tok, "a constant must be on the CPU, not " + t.device().str());
    if (!t.is_static()) fail(type_tok, "a constant's type has a symbolic size");
    // The product of the non-zero sizes is bounded too, so that the layout of an empty
    // tensor never overflows.
    int64_t numel = 1;
    bool has_zero = false;
    for (int64_t s : t.sizes()) {
      has_zero = has_zero || s == 0;
      if (s > 1 && numel > kMaxConstantElements / s) {
        numel = kMaxConstantElements + 1;
        break;
      }
      numel *= std::max<int64_t>(s, 1);
    }
    if (numel > kMaxConstantElements)
      fail(type_tok, "constant of type " + t.str() + " has more than " +
                         std::to_string(kMaxConstantElements) + " elements");
    if (has_zero) numel = 0;
    Tensor data = empty(t.sizes(), TensorOptions(t.dtype()));
    void* p = numel ? data.raw_data() : nullptr;
    if (is_punct('[')) {
      const Token& open = peek();
      next();
      int64_t n = 0;
      if (!is_punct(']')) {
        for (;;) {
          if (n >= numel)
            fail(peek(), "constant of type " + t.str() + " has more than " + std::to_string(numel) +
                             " elements");
          element(t.dtype(), p, n++);
          if (is_punct(']')) break;
          expect_punct(',');
        }
      }
      next();
      if (n != numel)
        fail(open, "constant of type " + t.str() + " needs " + std::to_string(numel) +
                       " elements, got " + std::to_string(n));
    } else {
      if (numel == 0) {
        // A splat of nothing: read and drop one literal, checked against the dtype.
        Tensor one = empty({}, TensorOptions(t.dtype()));
        element(t.dtype(), one.raw_data(), 0);
      } else {
        element(t.dtype(), p, 0);
        size_t sz = static_cast<size_t>(itemsize(t.dtype()));
        auto* bytes = static_cast<unsigned char*>(p);
        for (int64_t k = 1; k < numel; ++k)
          std::memcpy(bytes + k * sz, bytes, sz);
      }
    }
    return data;
  }

  // ---- attributes ----
  AttrValue attr_value(Op op, const AttrSpec& spec) {
    std::string ctx = "attribute '" + spec.name + "' of " + std::string(op_name(op));
    auto want = [&](const std::string& kind) { expected(kind + " for " + ctx); };
    switch (spec.kind) {
    case AttrKind::int_: {
      if (peek().kind != Tok::number || is_float_literal(peek().text)) want("an int");
      return integer("an int");
    }
    case AttrKind::float_:
      if (!at_float_literal()) want("a float");
      return float_value("a float");
    case AttrKind::bool_:
      if (!is_ident("true") && !is_ident("false")) want("'true' or 'false'");
      return next().text == "true";
    case AttrKind::ints: {
      if (!is_punct('[')) want("a list of ints '[...]'");
      next();
      std::vector<int64_t> v;
      if (!is_punct(']')) {
        for (;;) {
          if (peek().kind != Tok::number || is_float_literal(peek().text)) want("an int");
          v.push_back(integer("an int"));
          if (is_punct(']')) break;
          if (!is_punct(',')) want("',' or ']'");
          next();
        }
      }
      next();
      return v;
    }
    case AttrKind::dtype: {
      if (peek().kind != Tok::ident) want("a dtype");
      DType dt;
      if (!parse_dtype(peek().text, dt))
        fail(peek(), "unknown dtype '" + peek().text + "' for " + ctx);
      next();
      return dt;
    }
    case AttrKind::str:
      if (peek().kind != Tok::string) want("a string");
      return next().text;
    case AttrKind::scalar: {
      if (is_ident("true") || is_ident("false")) return Scalar(next().text == "true");
      if (!at_float_literal()) want("a scalar");
      if (is_float_literal(peek().text)) return Scalar(float_value("a scalar"));
      return Scalar(integer("a scalar"));
    }
    }
    KILN_UNREACHABLE("attribute kind");
  }

  Attrs attrs(Op op, const Token& op_tok) {
    const OpSchema& s = schema(op);
    std::vector<std::optional<AttrValue>> vals(s.attrs.size());
    if (is_punct('{')) {
      next();
      if (!is_punct('}')) {
        for (;;) {
          if (peek().kind != Tok::ident) expected("an attribute name");
          const Token& nt = peek();
          size_t k = 0;
          while (k < s.attrs.size() && s.attrs[k].name != nt.text)
            ++k;
          if (k == s.attrs.size())
            fail(nt, "unknown attribute '" + nt.text + "' for " + std::string(op_name(op)));
          if (vals[k])
            fail(nt, "duplicate attribute '" + nt.text + "' for " + std::string(op_name(op)));
          next();
          expect_punct('=');
          vals[k] = attr_value(op, s.attrs[k]);
          if (is_punct('}')) break;
          if (!is_punct(',')) expected("',' or '}'");
          next();
        }
      }
      next();
    }
    std::vector<AttrValue> out;
    for (size_t k = 0; k < s.attrs.size(); ++k) {
      if (!vals[k])
        fail(op_tok, "missing attribute '" + s.attrs[k].name + "' for " + std::string(op_name(op)));
      out.push_back(std::move(*vals[k]));
    }
    Attrs a(std::move(out));
    if (auto r = check_attrs(op, a); !r) fail(op_tok, r.error().message());
    return a;
  }

  // ---- graphs ----
  std::unique_ptr<Graph> graph(ParsedModule& m) {
    expect_ident("graph");
    if (peek().kind != Tok::at || peek().text.empty() || !is_ident_start(peek().text[0]))
      expected("a graph name '@NAME'");
    auto g = std::make_unique<Graph>(next().text);
    expect_punct('{');
    if (peek().kind == Tok::loc) next();
    if (peek().kind != Tok::newline) expected("end of line");
    std::unordered_map<std::string, Value*> names;
    enum Phase { inputs, nodes, writes } phase = inputs;
    for (;;) {
      skip_newlines();
      if (is_punct('}')) fail(peek(), "graph @" + g->name() + " has no return");
      if (is_ident("return")) {
        next();
        if (peek().kind == Tok::value) {
          for (;;) {
            g->add_output(use(names));
            if (!is_punct(',')) break;
            next();
          }
        }
        expect_end_of_line();
        skip_newlines();
        expect_punct('}');
        if (peek().kind == Tok::loc) next();
        if (peek().kind != Tok::eof && peek().kind != Tok::newline) expected("end of line");
        return g;
      }
      if (is_ident("write")) {
        next();
        Value* target = use(names);
        expect_punct(',');
        Value* source = use(names);
        g->add_write(target, source);
        expect_end_of_line();
        phase = writes;
        continue;
      }
      if (peek().kind != Tok::value) expected("a value, 'write' or 'return'");
      if (phase == writes) expected("'write' or 'return' (nodes come before writes)");
      // `%a : T = input|param|const ...` or `%a : T, %b : T = op(...)`.
      std::vector<const Token*> result_toks;
      std::unordered_set<std::string_view> result_names;
      std::vector<Type> types;
      const Token* type_tok = nullptr;
      for (;;) {
        const Token& nt = value_name(names);
        if (!result_names.insert(nt.text).second) fail(nt, "value %" + nt.text + " defined twice");
        result_toks.push_back(&nt);
        expect_punct(':');
        type_tok = &peek();
        types.push_back(type());
        if (!is_punct(',')) break;
        next();
      }
      expect_punct('=');
      if (peek().kind != Tok::ident) expected("an op name or 'input', 'param', 'const'");
      const Token& op_tok = peek();
      bool is_input = op_tok.text == "input" || op_tok.text == "param" || op_tok.text == "const";
      if (is_input) {
        if (phase != inputs)
          fail(op_tok,
               "input %" + result_toks[0]->text + " after the first node (inputs come first)");
        if (result_toks.size() != 1) fail(*result_toks[1], "an input defines one value");
        next();
        Value* v = nullptr;
        if (op_tok.text == "const") {
          Tensor data = constant(types[0], *type_tok);
          std::string name;
          if (peek().kind == Tok::string) name = next().text;
          v = g->add_constant(data, types[0].wrapped_number(), std::move(name));
        } else {
          std::string name;
          if (peek().kind == Tok::string) name = next().text;
          v = g->add_input(types[0],
                           op_tok.text == "param" ? InputKind::parameter : InputKind::user,
                           std::move(name));
        }
        define(names, *result_toks[0], v);
        expect_end_of_line();
        continue;
      }
      phase = nodes;
      std::optional<Op> op = find_op(op_tok.text);
      if (!op) fail(op_tok, "unknown op '" + op_tok.text + "'");
      next();
      expect_punct('(');
      std::vector<Value*> operands;
      if (!is_punct(')')) {
        for (;;) {
          operands.push_back(use(names));
          if (is_punct(')')) break;
          if (!is_punct(',')) expected("',' or ')'");
          next();
        }
      }
      next();
      if (auto r = check_arity(*op, operands.size()); !r) fail(op_tok, r.error().message());
      Attrs a = attrs(*op, op_tok);
      int nout = schema(*op).num_outputs;
      if (static_cast<int>(types.size()) != nout)
        fail(*result_toks[0], std::string(op_name(*op)) + " has " + std::to_string(nout) +
                                  " result(s), got " + std::to_string(types.size()));
      Node* n = g->create_node(*op, std::move(operands), std::move(a), types);
      m.lines[n] = op_tok.line;
      if (peek().kind == Tok::loc) n->set_location(next().text);
      for (size_t k = 0; k < result_toks.size(); ++k)
        define(names, *result_toks[k], n->output(k));
      expect_end_of_line();
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  std::string_view file_;
  bool last_type_had_strides_ = false;
};

} // namespace

Expected<ParsedModule> parse_module(std::string_view text, std::string_view filename) {
  try {
    Parser p(text, filename);
    return p.module();
  } catch (const ParseError& e) {
    return Error::without_location(e.message);
  } catch (const Error& e) {
    // An error from the runtime (tensor allocation, device names) while building the graph.
    return Error::without_location(std::string(filename) + ": error: " + e.message());
  }
}

Expected<std::unique_ptr<Graph>> parse_graph(std::string_view text, std::string_view filename) {
  auto m = parse_module(text, filename);
  if (!m) return m.error();
  if (m->graphs.size() != 1)
    return Error::without_location(std::string(filename) + ": error: expected one graph, got " +
                                   std::to_string(m->graphs.size()));
  return std::move(m->graphs.front());
}

} // namespace kiln::ir
