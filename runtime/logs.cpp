// KILN_LOGS parsing.
#include "runtime/logs.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

namespace kiln {
namespace {

std::vector<std::string> parse_list(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '+'))
      item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ')
      item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

bool names(const std::vector<std::string>& list, std::string_view artifact) {
  for (const std::string& e : list)
    if (e == artifact || e == "all") return true;
  return false;
}

} // namespace

const std::vector<std::string>& known_logs() {
  // Every artifact some log_enabled / CompileOptions::logs test asks for (user-guide.md,
  // "Logs and dumps"); a new log is added here too, or its users are warned about it.
  static const std::vector<std::string> known = {"graph",      "passes",   "graph_breaks", "guards",
                                                 "recompiles", "fusion",   "layout",       "lower",
                                                 "cache",      "autotune", "attention",    "all"};
  return known;
}

std::vector<std::string> unknown_logs(std::string_view list) {
  std::vector<std::string> out;
  const std::vector<std::string>& known = known_logs();
  for (std::string& name : parse_list(list))
    if (std::find(known.begin(), known.end(), name) == known.end()) out.push_back(std::move(name));
  return out;
}

bool log_list_has(std::string_view list, std::string_view artifact) {
  return names(parse_list(list), artifact);
}

bool log_enabled(std::string_view artifact) {
  static const std::vector<std::string> enabled = [] {
    const char* env = std::getenv("KILN_LOGS");
    if (env == nullptr) return std::vector<std::string>{};
    std::vector<std::string> unknown = unknown_logs(env);
    if (!unknown.empty()) {
      std::string known;
      for (const std::string& k : known_logs())
        known += (known.empty() ? "" : ", ") + k;
      std::string msg;
      for (const std::string& u : unknown)
        msg += "kiln: warning: KILN_LOGS names an unknown log '" + u + "' (known: " + known + ")\n";
      std::cerr << msg; // one write: the lines don't interleave with other threads'
    }
    return parse_list(env);
  }();
  return names(enabled, artifact);
}

} // namespace kiln
