// KILN_LOGS parsing.
#include "runtime/logs.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace kiln {
namespace {

std::vector<std::string> parse_logs() {
  std::vector<std::string> out;
  const char* env = std::getenv("KILN_LOGS");
  if (!env) return out;
  std::string_view s(env);
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

} // namespace

bool log_enabled(std::string_view artifact) {
  static const std::vector<std::string> enabled = parse_logs();
  for (const std::string& e : enabled)
    if (e == artifact || e == "all") return true;
  return false;
}

} // namespace kiln
