// KILN_LOGS: which artifacts kiln prints to stderr as they happen (API.md, "Logging").
#pragma once

#include <string_view>

namespace kiln {

/// Whether `artifact` ("passes", "graph_breaks", ...) is named in KILN_LOGS, a comma list
/// where "+all" or "all" enables every artifact. Read once, at the first call.
bool log_enabled(std::string_view artifact);
/// The same test on a list given in code (CompileOptions::logs).
bool log_list_has(std::string_view list, std::string_view artifact);

} // namespace kiln
