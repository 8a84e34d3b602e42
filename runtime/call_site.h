// Finds the user's source location: the first stack frame outside kiln's own code.
#pragma once

#include <string>
#include <vector>

namespace kiln {

/// "file:line" (or "function+offset" without debug info) of the innermost stack frame that
/// is not kiln's own code, or "" when none is found. Used for errors and graph breaks, where
/// no default argument can carry a location (`if (t)`, `std::cout << t`, `a + b`).
std::string user_call_site();

/// The return addresses of the current stack: cheap to take (no symbols are read), so a
/// caller that may never need the location (a graph break in a re-traced call) keeps this
/// and symbolises it only when asked.
struct CallStack {
  std::vector<void*> pcs;
};
CallStack capture_call_stack();
/// user_call_site() of a captured stack.
std::string user_call_site(const CallStack& stack);

} // namespace kiln
