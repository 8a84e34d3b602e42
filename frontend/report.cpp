// ExplainReport: the human text and the JSON form (schema in docs/graph-breaks.md).
#include <ostream>
#include <sstream>

#include "frontend/compile.h"
#include "runtime/error.h"
#include "runtime/serialize/json.h"

namespace kiln {
namespace {

const json::Value& member(const json::Value& obj, std::string_view key, json::Value::Type type) {
  KILN_CHECK(obj.type == json::Value::Type::object, "explain report: expected an object");
  for (const json::Value::Member& m : obj.object)
    if (m.key == key) {
      KILN_CHECK(m.value.type == type, "explain report: '", key, "' should be a ",
                 json::Value::type_name(type), ", got a ", json::Value::type_name(m.value.type));
      return m.value;
    }
  throw Error::without_location("explain report: missing '" + std::string(key) + "'");
}

int64_t int_member(const json::Value& obj, std::string_view key) {
  const json::Value& v = member(obj, key, json::Value::Type::number);
  KILN_CHECK(v.is_int64, "explain report: '", key, "' should be an integer");
  return v.int64;
}

const std::string& str_member(const json::Value& obj, std::string_view key) {
  return member(obj, key, json::Value::Type::string).string;
}

/// A string member that older reports lack: empty when absent.
std::string optional_str_member(const json::Value& obj, std::string_view key) {
  for (const json::Value::Member& m : obj.object)
    if (m.key == key) return str_member(obj, key);
  return {};
}

} // namespace

std::string ExplainReport::to_json() const {
  std::ostringstream os;
  os << "{\n  \"schema\": \"kiln.explain/1\",\n";
  os << "  \"graph_count\": " << graph_count() << ",\n";
  os << "  \"break_count\": " << break_count() << ",\n";
  os << "  \"graphs\": [";
  for (size_t i = 0; i < graphs.size(); ++i) {
    const Graph& g = graphs[i];
    os << (i ? ",\n" : "\n") << "    {\"index\": " << i << ", \"ops\": " << g.ops
       << ", \"inputs\": " << g.inputs << ", \"outputs\": " << g.outputs
       << ", \"ir\": " << json::quote(g.ir) << ", \"fallback\": " << json::quote(g.fallback)
       << ", \"layout\": [";
    for (size_t k = 0; k < g.layout.size(); ++k)
      os << (k ? ", " : "") << json::quote(g.layout[k]);
    os << "], \"attention\": [";
    for (size_t k = 0; k < g.attention.size(); ++k)
      os << (k ? ", " : "") << json::quote(g.attention[k]);
    os << "]}";
  }
  os << (graphs.empty() ? "],\n" : "\n  ],\n");
  os << "  \"breaks\": [";
  for (size_t i = 0; i < breaks.size(); ++i) {
    const GraphBreak& b = breaks[i];
    os << (i ? ",\n" : "\n") << "    {\"code\": " << json::quote(b.code)
       << ", \"reason\": " << json::quote(b.reason) << ", \"location\": " << json::quote(b.location)
       << ", \"hint\": " << json::quote(b.hint) << ", \"graph\": " << b.graph << "}";
  }
  os << (breaks.empty() ? "],\n" : "\n  ],\n");
  os << "  \"guards\": [";
  for (size_t i = 0; i < guards.size(); ++i)
    os << (i ? ",\n" : "\n") << "    " << json::quote(guards[i]);
  os << (guards.empty() ? "]\n" : "\n  ]\n");
  os << "}\n";
  return os.str();
}

ExplainReport ExplainReport::from_json(std::string_view text) {
  json::Value root = json::parse(text, "explain report");
  KILN_CHECK(str_member(root, "schema") == "kiln.explain/1", "explain report: unknown schema '",
             str_member(root, "schema"), "'");
  ExplainReport r;
  for (const json::Value& g : member(root, "graphs", json::Value::Type::array).array) {
    r.graphs.push_back({int_member(g, "ops"),
                        int_member(g, "inputs"),
                        int_member(g, "outputs"),
                        str_member(g, "ir"),
                        optional_str_member(g, "fallback"),
                        {},
                        {}});
    // "layout" and "attention": absent in older reports.
    for (const json::Value::Member& m : g.object)
      if (m.key == "layout" || m.key == "attention")
        for (const json::Value& line : member(g, m.key, json::Value::Type::array).array) {
          KILN_CHECK(line.type == json::Value::Type::string, "explain report: a ", m.key,
                     " line should be a string");
          (m.key == "layout" ? r.graphs.back().layout : r.graphs.back().attention)
              .push_back(line.string);
        }
  }
  for (const json::Value& b : member(root, "breaks", json::Value::Type::array).array)
    r.breaks.push_back({str_member(b, "code"), str_member(b, "reason"), str_member(b, "location"),
                        str_member(b, "hint"), int_member(b, "graph")});
  for (const json::Value& g : member(root, "guards", json::Value::Type::array).array) {
    KILN_CHECK(g.type == json::Value::Type::string, "explain report: a guard should be a string");
    r.guards.push_back(g.string);
  }
  KILN_CHECK(int_member(root, "graph_count") == r.graph_count() &&
                 int_member(root, "break_count") == r.break_count(),
             "explain report: graph_count/break_count disagree with the lists");
  return r;
}

std::string ExplainReport::str() const {
  std::ostringstream os;
  os << graph_count() << (graph_count() == 1 ? " graph, " : " graphs, ") << break_count()
     << (break_count() == 1 ? " graph break\n" : " graph breaks\n");
  for (size_t i = 0; i < graphs.size(); ++i) {
    os << "  graph " << i << ": " << graphs[i].ops << " ops, " << graphs[i].inputs << " inputs, "
       << graphs[i].outputs << " outputs"
       << (graphs[i].fallback.empty() ? "" : ", runs on the interpreter: " + graphs[i].fallback)
       << "\n";
    for (const std::string& line : graphs[i].layout)
      os << "    " << line << "\n";
    for (const std::string& line : graphs[i].attention)
      os << "    " << line << "\n";
  }
  if (!breaks.empty()) os << "breaks:\n";
  for (size_t i = 0; i < breaks.size(); ++i) {
    const GraphBreak& b = breaks[i];
    os << "  " << i + 1 << ". " << b.code << " at " << (b.location.empty() ? "?" : b.location)
       << " (after graph " << b.graph << ")\n     " << b.reason << "\n     hint: " << b.hint
       << "\n";
  }
  // The first guards in full (grad mode, module modes, arguments); the rest are in to_json().
  constexpr size_t kShown = 12;
  if (!guards.empty()) os << guards.size() << (guards.size() == 1 ? " guard" : " guards") << ":\n";
  for (size_t i = 0; i < guards.size() && i < kShown; ++i)
    os << "  " << guards[i] << "\n";
  if (guards.size() > kShown)
    os << "  ... and " << guards.size() - kShown << " more (the JSON report lists every one)\n";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const ExplainReport& r) { return os << r.str(); }

} // namespace kiln
