// Graphviz output: inputs as ellipses, ops as boxes, an edge per operand, outputs and writes.
#include "ir/dot.h"

#include <sstream>

#include "ir/literal.h"
#include "ir/numbering.h"

namespace kiln::ir {
namespace {

/// Escapes text for a double-quoted Graphviz label (plain shapes, not records: only `"` and
/// `\\` need it; names and strings arrive already quoted by quote_string, so no control
/// characters remain but a newline, kept as a line break of the label).
std::string escape(std::string_view s) {
  std::string r;
  for (char c : s) {
    switch (c) {
    case '"': r += "\\\""; break;
    case '\\': r += "\\\\"; break;
    case '\n': r += "\\n"; break;
    default: r += c;
    }
  }
  return r;
}

std::string attr_text(const AttrValue& a) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(x);
        } else if constexpr (std::is_same_v<T, double>) {
          return format_double(x);
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          std::string s = "[";
          for (size_t i = 0; i < x.size(); ++i)
            s += detail::str(i ? ", " : "", x[i]);
          return s + "]";
        } else if constexpr (std::is_same_v<T, DType>) {
          return std::string(dtype_name(x));
        } else if constexpr (std::is_same_v<T, std::string>) {
          return quote_string(x);
        } else {
          if (x.is_bool()) return x.to_int() ? "true" : "false";
          if (x.is_floating()) return format_double(x.to_double());
          return std::to_string(x.to_int());
        }
      },
      a);
}

} // namespace

std::string to_dot(const Graph& g) {
  ValueNumbering num(g);
  std::ostringstream os;
  os << "digraph \"" << escape(g.name()) << "\" {\n";
  os << "  node [fontname=\"monospace\"];\n";
  // Graphviz ids: v<N> for an input numbered %N, n<P> for the node at position P.
  auto source_id = [&](const Value* v) {
    return v->is_input() ? detail::str("v", num[v]) : detail::str("n", num.position(v->producer()));
  };
  for (const Value* v : g.inputs()) {
    os << "  v" << num[v] << " [shape=ellipse, label=\"%" << num[v] << " "
       << input_kind_name(v->input_kind());
    if (!v->name().empty()) os << " " << escape(quote_string(v->name()));
    os << "\\n" << escape(v->type().str()) << "\"];\n";
  }
  for (const Node* n : g.nodes()) {
    os << "  n" << num.position(n) << " [shape=box, label=\"";
    std::string results;
    for (size_t k = 0; k < n->num_outputs(); ++k)
      results += detail::str(k ? ", %" : "%", num[n->output(k)]);
    os << escape(results) << (results.empty() ? "" : " = ") << escape(n->name());
    const auto& specs = n->schema().attrs;
    for (size_t k = 0; k < n->attrs().size() && k < specs.size(); ++k)
      os << "\\n" << escape(specs[k].name) << " = " << escape(attr_text(n->attrs()[k]));
    for (size_t k = 0; k < n->num_outputs(); ++k)
      os << "\\n: " << escape(n->output(k)->type().str());
    os << "\"];\n";
  }
  for (const Node* n : g.nodes())
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      const Value* v = n->input(i);
      os << "  " << source_id(v) << " -> n" << num.position(n);
      std::string label;
      if (n->num_inputs() > 1) label = std::to_string(i);
      if (!v->is_input() && v->producer()->num_outputs() > 1)
        label = detail::str("%", num[v], label.empty() ? "" : " -> ", label);
      if (!label.empty()) os << " [label=\"" << escape(label) << "\"]";
      os << ";\n";
    }
  for (size_t i = 0; i < g.num_outputs(); ++i) {
    os << "  out" << i << " [shape=doublecircle, label=\"return " << i << "\"];\n";
    os << "  " << source_id(g.output(i)) << " -> out" << i << ";\n";
  }
  for (size_t i = 0; i < g.writes().size(); ++i) {
    const InPlaceWrite& w = g.writes()[i];
    os << "  " << source_id(w.source) << " -> " << source_id(w.target)
       << " [style=dashed, color=red, constraint=false, label=\"write " << i << "\"];\n";
  }
  os << "}\n";
  return os.str();
}

} // namespace kiln::ir
