// MLIR output: the emitter (module, function, constants, value names, external calls) and
// the shared linalg.generic helpers; the per-op lowerings are in ir/mlir_ops.cpp.
#include "ir/mlir.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "ir/mlir_emitter.h"

namespace kiln::ir::mlir {

std::string elem(DType t) {
  switch (t) {
  case DType::f32: return "f32";
  case DType::f64: return "f64";
  case DType::f16: return "f16";
  case DType::bf16: return "bf16";
  case DType::i8:
  case DType::u8: return "i8";
  case DType::i32: return "i32";
  case DType::i64: return "i64";
  case DType::bool_: return "i1";
  }
  return "?";
}

std::string tensor_type(const Shape& sizes, DType t) {
  std::string s = "tensor<";
  for (int64_t d : sizes)
    s += detail::str(d, "x");
  return s + elem(t) + ">";
}

std::string tensor_type(const Type& t) { return tensor_type(t.sizes(), t.dtype()); }

std::string float_literal(double d, DType t) {
  if (d != d || d == 1.0 / 0.0 || d == -1.0 / 0.0) {
    bool nan = d != d, neg = d < 0;
    switch (t) {
    case DType::f64:
      return nan ? "0x7FF8000000000000" : neg ? "0xFFF0000000000000" : "0x7FF0000000000000";
    case DType::f16: return nan ? "0x7E00" : neg ? "0xFC00" : "0x7C00";
    case DType::bf16: return nan ? "0x7FC0" : neg ? "0xFF80" : "0x7F80";
    default: return nan ? "0x7FC00000" : neg ? "0xFF800000" : "0x7F800000";
    }
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, res.ptr);
  size_t e = s.find('e');
  if (s.find('.') == std::string::npos) s.insert(e == std::string::npos ? s.size() : e, ".0");
  return s;
}

std::string constant_op(const std::string& literal, DType t) {
  if (literal == "true" || literal == "false") return "arith.constant " + literal;
  return "arith.constant " + literal + " : " + elem(t);
}

std::string Emitter::fresh() { return detail::str("%t", next_temp_++); }

void Emitter::line(const std::string& text) { body_ << "    " << text << "\n"; }

std::string Emitter::name(const Value* v) const { return names_.at(static_cast<size_t>(num_[v])); }

void Emitter::bind(const Value* v, std::string mlir_name) {
  names_.at(static_cast<size_t>(num_[v])) = std::move(mlir_name);
}

std::string Emitter::empty(const Shape& sizes, DType t) {
  std::string r = fresh();
  line(r + " = tensor.empty() : " + tensor_type(sizes, t));
  return r;
}

std::string Emitter::filled(const Shape& sizes, DType t, const std::string& scalar_literal) {
  std::string c = fresh();
  line(c + " = " + constant_op(scalar_literal, t));
  std::string e = empty(sizes, t);
  std::string r = fresh();
  line(r + " = linalg.fill ins(" + c + " : " + elem(t) + ") outs(" + e + " : " +
       tensor_type(sizes, t) + ") -> " + tensor_type(sizes, t));
  return r;
}

std::string Emitter::scalar_literal(double value, DType t) {
  if (t == DType::bool_) return value != 0 ? "true" : "false";
  if (is_floating(t)) return float_literal(value, t);
  return std::to_string(static_cast<int64_t>(value));
}

std::string Emitter::broadcast_map(const Shape& in, const Shape& out, size_t loops) {
  std::string m = "affine_map<(";
  for (size_t i = 0; i < loops; ++i)
    m += detail::str(i ? ", " : "", "d", i);
  m += ") -> (";
  size_t off = out.size() - in.size();
  for (size_t j = 0; j < in.size(); ++j) {
    if (j) m += ", ";
    if (in[j] == 1 && out[off + j] != 1)
      m += "0";
    else
      m += detail::str("d", off + j);
  }
  return m + ")>";
}

std::string Emitter::generic(std::span<const Operand> ins, const Shape& out_sizes, DType out_t,
                             const BodyFn& body, const std::string& init) {
  size_t loops = out_sizes.size();
  std::string maps, itypes, names, types;
  for (const Operand& in : ins) {
    maps += (in.map.empty() ? broadcast_map(in.sizes, out_sizes, loops) : in.map) + ", ";
    names += (names.empty() ? "" : ", ") + in.name;
    types += (types.empty() ? "" : ", ") + tensor_type(in.sizes, in.dtype);
  }
  maps += broadcast_map(out_sizes, out_sizes, loops);
  for (size_t i = 0; i < loops; ++i)
    itypes += i ? ", \"parallel\"" : "\"parallel\"";
  std::string out = init.empty() ? empty(out_sizes, out_t) : init;
  std::string r = fresh();
  std::string tt = tensor_type(out_sizes, out_t);
  std::string head =
      r + " = linalg.generic {indexing_maps = [" + maps + "], iterator_types = [" + itypes + "]} ";
  if (!ins.empty()) head += "ins(" + names + " : " + types + ") ";
  line(head + "outs(" + out + " : " + tt + ") {");
  std::string args;
  std::vector<std::string> elems;
  for (size_t i = 0; i < ins.size(); ++i) {
    std::string a = detail::str("%in", next_temp_++);
    elems.push_back(a);
    args += a + ": " + elem(ins[i].dtype) + ", ";
  }
  std::string outarg = detail::str("%out", next_temp_++);
  elems.push_back(outarg);
  line("^bb0(" + args + outarg + ": " + elem(out_t) + "):");
  std::string y = body(elems);
  line("  linalg.yield " + y + " : " + elem(out_t));
  line("} -> " + tt);
  return r;
}

std::string Emitter::op(const std::string& text, const std::string& type) {
  std::string r = fresh();
  // `true` and `false` are typed i1 literals: arith.constant takes no type after them.
  bool typed = text != "arith.constant true" && text != "arith.constant false";
  line("  " + r + " = " + text + (typed ? " : " + type : ""));
  return r;
}

std::string Emitter::convert(const std::string& v, DType from, DType to) {
  if (from == to) return v;
  std::string f = elem(from), t = elem(to);
  if (f == t) return v; // i8 and u8 share a signless type
  if (to == DType::bool_) {
    if (is_floating(from)) {
      std::string z = op("arith.constant " + float_literal(0.0, from), f);
      std::string r = fresh();
      line("  " + r + " = arith.cmpf une, " + v + ", " + z + " : " + f);
      return r;
    }
    std::string z = op("arith.constant 0", f);
    std::string r = fresh();
    line("  " + r + " = arith.cmpi ne, " + v + ", " + z + " : " + f);
    return r;
  }
  if (from == DType::bool_)
    return op((is_floating(to) ? "arith.uitofp " : "arith.extui ") + v, "i1 to " + t);
  if (is_floating(from) && is_floating(to)) {
    int64_t a = itemsize(from), b = itemsize(to);
    if (a == b) { // f16 <-> bf16 through f32
      std::string w = op("arith.extf " + v, f + " to f32");
      return op("arith.truncf " + w, "f32 to " + t);
    }
    return op((a < b ? "arith.extf " : "arith.truncf ") + v, f + " to " + t);
  }
  if (is_floating(from))
    return op((to == DType::u8 ? "arith.fptoui " : "arith.fptosi ") + v, f + " to " + t);
  if (is_floating(to))
    return op((from == DType::u8 ? "arith.uitofp " : "arith.sitofp ") + v, f + " to " + t);
  int64_t a = itemsize(from), b = itemsize(to);
  if (a < b) return op((from == DType::u8 ? "arith.extui " : "arith.extsi ") + v, f + " to " + t);
  return op("arith.trunci " + v, f + " to " + t);
}

std::string Emitter::external(const Node& n, std::span<const std::string> operands,
                              std::span<const Type> operand_types) {
  std::string sig = "(";
  for (size_t i = 0; i < operand_types.size(); ++i)
    sig += (i ? ", " : "") + tensor_type(operand_types[i]);
  sig += ") -> ";
  std::string results;
  for (size_t k = 0; k < n.num_outputs(); ++k)
    results += (k ? ", " : "") + tensor_type(n.output(k)->type());
  sig += n.num_outputs() == 1 ? results : "(" + results + ")";
  std::string base = "kiln." + std::string(n.name());
  std::string callee;
  int same_op = 0;
  for (const auto& [sym, s] : decls_) {
    if (s == sig && sym.rfind(base, 0) == 0 &&
        (sym.size() == base.size() || sym[base.size()] == '.'))
      callee = sym;
    if (sym.rfind(base, 0) == 0 && (sym.size() == base.size() || sym[base.size()] == '.'))
      ++same_op;
  }
  if (callee.empty()) {
    callee = same_op == 0 ? base : detail::str(base, ".", same_op);
    decls_.emplace_back(callee, sig);
  }
  std::string args;
  for (size_t i = 0; i < operands.size(); ++i)
    args += (i ? ", " : "") + operands[i];
  std::string attrs;
  const auto& specs = n.schema().attrs;
  for (size_t k = 0; k < specs.size(); ++k) {
    std::string v = attr_mlir(n.attrs()[k]);
    attrs += detail::str(k ? ", " : "", "kiln_", specs[k].name, " = ", v);
  }
  std::string r = fresh();
  line(r + " = func.call @" + callee + "(" + args + ")" +
       (attrs.empty() ? "" : " {" + attrs + "}") + " : " + sig);
  return r;
}

std::string Emitter::attr_mlir(const AttrValue& a) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return detail::str(x, " : i64");
        } else if constexpr (std::is_same_v<T, double>) {
          return float_literal(x, DType::f64) + " : f64";
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          std::string s = "array<i64";
          for (size_t i = 0; i < x.size(); ++i)
            s += detail::str(i ? ", " : ": ", x[i]);
          return s + ">";
        } else if constexpr (std::is_same_v<T, DType>) {
          return std::string("\"") + std::string(dtype_name(x)) + "\"";
        } else if constexpr (std::is_same_v<T, std::string>) {
          std::string s = "\"";
          for (char c : x) {
            if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) {
              char buf[8];
              std::snprintf(buf, sizeof buf, "\\%02X", static_cast<unsigned char>(c));
              s += buf;
            } else {
              s += c;
            }
          }
          return s + "\"";
        } else {
          if (x.is_bool()) return x.to_int() ? "true" : "false";
          if (x.is_floating()) return float_literal(x.to_double(), DType::f64) + " : f64";
          return detail::str(x.to_int(), " : i64");
        }
      },
      a);
}

namespace {

/// Reads element i of a contiguous CPU tensor as a literal of its dtype.
std::string element_literal(const Tensor& t, int64_t i) {
  const char* p = static_cast<const char*>(t.raw_data()) + i * t.itemsize();
  auto rd = [&](auto x) {
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  switch (t.dtype()) {
  case DType::f32: return float_literal(rd(float{}), DType::f32);
  case DType::f64: return float_literal(rd(double{}), DType::f64);
  case DType::f16: return float_literal(static_cast<float>(rd(Half{})), DType::f16);
  case DType::bf16: return float_literal(static_cast<float>(rd(BFloat16{})), DType::bf16);
  case DType::i8: return std::to_string(rd(int8_t{}));
  case DType::u8: return std::to_string(static_cast<int8_t>(rd(uint8_t{})));
  case DType::i32: return std::to_string(rd(int32_t{}));
  case DType::i64: return std::to_string(rd(int64_t{}));
  case DType::bool_: return rd(uint8_t{}) ? "true" : "false";
  }
  return "0";
}

void nested(std::string& out, const Tensor& t, size_t dim, int64_t& next) {
  if (dim == t.sizes().size()) {
    out += element_literal(t, next++);
    return;
  }
  out += "[";
  for (int64_t i = 0; i < t.sizes()[dim]; ++i) {
    if (i) out += ", ";
    nested(out, t, dim + 1, next);
  }
  out += "]";
}

bool bare_id(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$'))
      return false;
  return true;
}

} // namespace

std::string Emitter::constant(const Value& v) {
  Tensor t = v.constant().is_contiguous() ? v.constant() : v.constant().contiguous();
  int64_t n = t.numel();
  bool splat = n > 0;
  for (int64_t i = 1; i < n && splat; ++i)
    splat = std::memcmp(static_cast<const char*>(t.raw_data()),
                        static_cast<const char*>(t.raw_data()) + i * t.itemsize(),
                        static_cast<size_t>(t.itemsize())) == 0;
  std::string lit;
  if (splat) {
    lit = element_literal(t, 0);
  } else {
    int64_t next = 0;
    nested(lit, t, 0, next);
  }
  return "arith.constant dense<" + lit + "> : " + tensor_type(v.type());
}

Emitter::Emitter(const Graph& g) : g_(g), num_(g), names_(static_cast<size_t>(num_.size())) {}

std::string Emitter::run() {
  auto check_type = [&](const Type& t, const std::string& what) {
    if (!t.is_static())
      throw Error::without_location(detail::str("mlir output: ", what, " has type ", t.str(),
                                                "; symbolic sizes cannot be written as MLIR"));
    if (!t.device().is_cpu())
      throw Error::without_location(detail::str("mlir output: ", what, " has type ", t.str(),
                                                "; only cpu graphs can be written as MLIR"));
  };
  for (const Value* v : g_.inputs())
    check_type(v->type(), detail::str("input %", num_[v]));
  for (const Node* n : g_.nodes())
    for (size_t k = 0; k < n->num_outputs(); ++k)
      check_type(n->output(k)->type(), detail::str("%", num_[n->output(k)]));

  std::string args;
  for (const Value* v : g_.inputs()) {
    std::string nm = detail::str("%v", num_[v]);
    bind(v, nm);
    if (v->is_constant()) {
      line(nm + " = " + constant(*v));
    } else {
      args += (args.empty() ? "" : ", ") + nm + ": " + tensor_type(v->type());
    }
  }
  for (const Node* n : g_.nodes()) {
    // The kiln value the following lines compute, as `kiln opt` prints it.
    std::string results;
    for (size_t k = 0; k < n->num_outputs(); ++k)
      results += detail::str(k ? ", %" : "%", num_[n->output(k)]);
    std::string loc = n->location();
    std::replace_if(
        loc.begin(), loc.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    line("// " + results + " = " + std::string(n->name()) +
         (loc.empty() ? "" : "  (at " + loc + ")"));
    lower(*n);
  }

  std::string rets, ret_types;
  auto add_ret = [&](const Value* v) {
    rets += (rets.empty() ? "" : ", ") + name(v);
    ret_types += (ret_types.empty() ? "" : ", ") + tensor_type(v->type());
  };
  for (const Value* v : g_.outputs())
    add_ret(v);
  for (const InPlaceWrite& w : g_.writes())
    add_ret(w.source);

  std::ostringstream os;
  os << "module {\n";
  for (const auto& [sym, sig] : decls_) {
    // "(A, B) -> R" as a function type for a declaration.
    os << "  func.func private @" << sym << sig << "\n";
  }
  std::string fname = bare_id(g_.name()) ? g_.name() : "\"" + g_.name() + "\"";
  os << "  func.func @" << fname << "(" << args << ")";
  if (!ret_types.empty()) os << " -> (" << ret_types << ")";
  os << " {\n" << body_.str();
  os << "    return" << (rets.empty() ? "" : " " + rets + " : " + ret_types) << "\n";
  os << "  }\n}\n";
  return os.str();
}

} // namespace kiln::ir::mlir

namespace kiln::ir {

std::string to_mlir(const Graph& g) { return mlir::Emitter(g).run(); }

} // namespace kiln::ir
