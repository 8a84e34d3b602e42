// The .kir text printer: inputs, nodes, writes and the return line, values numbered in order.
#include "ir/printer.h"

#include <cstring>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>

#include "ir/literal.h"
#include "ir/numbering.h"
#include "runtime/ops/op.h"

namespace kiln::ir {

namespace {

template <typename T> std::string element_text(T v) {
  if constexpr (std::is_same_v<T, bool>)
    return v ? "true" : "false";
  else if constexpr (std::is_same_v<T, double>)
    return format_double(v);
  else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> ||
                     std::is_same_v<T, BFloat16>)
    return format_float(static_cast<float>(v));
  else
    return std::to_string(static_cast<int64_t>(v));
}

// A constant's data: one literal when every element prints the same (always for one element),
// else the flat row-major list. Bitwise-equal data is the fast path; comparing the texts
// otherwise makes NaNs of any payload one splat, so that print -> parse -> print is the
// identity. The list is built in one pass, without a string per element.
void print_constant(std::ostream& os, const Tensor& t) {
  int64_t n = t.numel();
  if (n == 0) {
    os << "[]";
    return;
  }
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data_ptr<T>();
    bool same_bits = true;
    for (int64_t i = 1; i < n && same_bits; ++i)
      same_bits = std::memcmp(&p[i], &p[0], sizeof(T)) == 0;
    std::string first = element_text(p[0]);
    if (same_bits) {
      os << first;
      return;
    }
    std::string list = "[" + first;
    bool same_text = true;
    for (int64_t i = 1; i < n; ++i) {
      std::string e = element_text(p[i]);
      same_text = same_text && e == first;
      list += ", ";
      list += e;
    }
    if (same_text)
      os << first;
    else
      os << list << ']';
  });
}

void print_attr(std::ostream& os, const AttrValue& a) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>)
          os << v;
        else if constexpr (std::is_same_v<T, double>)
          os << format_double(v);
        else if constexpr (std::is_same_v<T, bool>)
          os << (v ? "true" : "false");
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          os << '[';
          for (size_t i = 0; i < v.size(); ++i)
            os << (i ? ", " : "") << v[i];
          os << ']';
        } else if constexpr (std::is_same_v<T, DType>)
          os << dtype_name(v);
        else if constexpr (std::is_same_v<T, std::string>)
          os << quote_string(v);
        else if constexpr (std::is_same_v<T, Scalar>) {
          if (v.is_bool())
            os << (v.to_int() ? "true" : "false");
          else if (v.is_floating())
            os << format_double(v.to_double());
          else
            os << v.to_int();
        }
      },
      a);
}

/// A location as the comment can hold it: line breaks become spaces and trailing blanks are
/// dropped (the parser trims them), so that the printed text reads back the same.
std::string location_text(const std::string& loc) {
  std::string s = loc;
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  return s;
}

} // namespace

void print(std::ostream& os, const Graph& g) {
  ValueNumbering vn(g);
  auto name = [&](const Value* v) {
    std::string s(1, '%');
    s += std::to_string(vn[v]);
    return s;
  };
  os << "graph @" << g.name() << " {\n";
  for (const Value* in : g.inputs()) {
    os << "  " << name(in) << " : " << in->type() << " = " << input_kind_name(in->input_kind());
    if (in->is_constant()) {
      os << ' ';
      print_constant(os, in->constant());
    }
    if (!in->name().empty()) os << ' ' << quote_string(in->name());
    os << '\n';
  }
  for (const Node* n : g.nodes()) {
    os << "  ";
    for (size_t k = 0; k < n->num_outputs(); ++k)
      os << (k ? ", " : "") << name(n->output(k)) << " : " << n->output(k)->type();
    os << " = " << n->name() << '(';
    for (size_t i = 0; i < n->num_inputs(); ++i)
      os << (i ? ", " : "") << name(n->input(i));
    os << ')';
    const OpSchema& s = n->schema();
    if (!s.attrs.empty()) {
      os << " {";
      for (size_t k = 0; k < s.attrs.size(); ++k) {
        os << (k ? ", " : "") << s.attrs[k].name << " = ";
        if (k < n->attrs().size()) print_attr(os, n->attrs()[k]);
      }
      os << '}';
    }
    if (std::string loc = location_text(n->location()); !loc.empty()) os << "  // at " << loc;
    os << '\n';
  }
  for (const InPlaceWrite& w : g.writes())
    os << "  write " << name(w.target) << ", " << name(w.source) << '\n';
  os << "  return";
  for (size_t i = 0; i < g.num_outputs(); ++i)
    os << (i ? ", " : " ") << name(g.output(i));
  os << "\n}\n";
}

std::string print(const Graph& g) {
  std::ostringstream os;
  print(os, g);
  return os.str();
}

} // namespace kiln::ir
