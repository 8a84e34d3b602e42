// Finds the user's source location: the first stack frame outside kiln's own code.
#pragma once

#include <string>

namespace kiln {

/// "file:line" (or "function+offset" without debug info) of the innermost stack frame that
/// is not kiln's own code, or "" when none is found. Used for errors and graph breaks, where
/// no default argument can carry a location (`if (t)`, `std::cout << t`, `a + b`).
std::string user_call_site();

} // namespace kiln
