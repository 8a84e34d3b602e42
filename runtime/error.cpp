// kiln::Error construction and the internal assertion handler.
#include "runtime/error.h"

#include <cstdio>
#include <cstdlib>

#include "runtime/call_site.h"

namespace kiln {

Error::Error(std::string message) : message_(std::move(message)), location_(user_call_site()) {
  full_ = location_.empty() ? message_ : message_ + " (at " + location_ + ")";
}

Error::Error(std::string message, NoLocation) : message_(std::move(message)), full_(message_) {}

Error Error::without_location(std::string message) {
  return Error(std::move(message), NoLocation{});
}

namespace detail {
void assert_fail(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "kiln internal error: %s:%d: assertion `%s` failed: %s\n", file, line, cond,
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}
} // namespace detail

} // namespace kiln
