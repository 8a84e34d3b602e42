// KILN_LOGS parsing.
#include "runtime/logs.h"

#include <cstdlib>
#include <string>
#include <vector>

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

bool log_list_has(std::string_view list, std::string_view artifact) {
  return names(parse_list(list), artifact);
}

bool log_enabled(std::string_view artifact) {
  static const std::vector<std::string> enabled = [] {
    const char* env = std::getenv("KILN_LOGS");
    return env != nullptr ? parse_list(env) : std::vector<std::string>{};
  }();
  return names(enabled, artifact);
}

} // namespace kiln
