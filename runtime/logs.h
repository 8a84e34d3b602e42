// KILN_LOGS: which artifacts kiln prints to stderr as they happen (docs/user-guide.md, "Logs and
// dumps").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// The artifacts KILN_LOGS knows: graph, passes, graph_breaks, guards, recompiles, fusion,
/// layout, lower, cache, and all.
const std::vector<std::string>& known_logs();

/// The names in a KILN_LOGS-style comma list that are not known_logs(), in list order.
std::vector<std::string> unknown_logs(std::string_view list);

/// Whether `artifact` ("passes", "graph_breaks", ...) is named in KILN_LOGS, a comma list
/// where "+all" or "all" enables every artifact. Read once, at the first call, which warns on
/// stderr (once) about each name it does not know, listing the known ones.
bool log_enabled(std::string_view artifact);
/// The same test on a list given in code (CompileOptions::logs).
bool log_list_has(std::string_view list, std::string_view artifact);

} // namespace kiln
