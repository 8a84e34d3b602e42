// The user's call site: walks the stack and returns the first frame outside kiln.
//
// A frame is kiln's own when its code lies in one of kiln's shared libraries, or when its
// source file is one of kiln's (headers inlined into the user's binary) or a system header
// (std::function and friends). With libbacktrace (shipped with GCC) the frame is named by
// file:line from the user's debug info; without it, by function name through dladdr.
#include "runtime/call_site.h"

#include <dlfcn.h>
#include <execinfo.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#ifdef KILN_HAVE_BACKTRACE
#include <backtrace.h>
#endif

namespace kiln {
namespace {

bool object_is_kiln(uintptr_t pc) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(pc), &info) == 0 || info.dli_fname == nullptr) return false;
  std::string_view name(info.dli_fname);
  auto slash = name.rfind('/');
  if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
  return name.starts_with("libkiln_");
}

bool file_is_library(std::string_view file) {
  if (file.starts_with("/usr/include/") || file.starts_with("/usr/lib/")) return true;
  if (file.find("/include/kiln/") != std::string_view::npos) return true;
#ifdef KILN_SOURCE_DIR
  std::string_view src = KILN_SOURCE_DIR;
  if (file.starts_with(src) && file.size() > src.size() + 1) {
    std::string_view rest = file.substr(src.size() + 1);
    for (std::string_view layer : {"runtime/", "ir/", "passes/", "codegen/", "frontend/"})
      if (rest.starts_with(layer)) return true;
  }
#endif
  return false;
}

#ifdef KILN_HAVE_BACKTRACE
struct Search {
  std::string found;
};

backtrace_state* state() {
  static backtrace_state* s = backtrace_create_state(nullptr, /*threaded=*/1, nullptr, nullptr);
  return s;
}

int on_frame(void* data, uintptr_t pc, const char* file, int line, const char* function) {
  auto* search = static_cast<Search*>(data);
  if (pc == 0 || pc == UINTPTR_MAX || object_is_kiln(pc)) return 0;
  if (file == nullptr) {
    // No debug info: libc/libstdc++ glue or a user binary built without -g. Keep walking,
    // but remember the function as a fallback.
    if (search->found.empty() && function != nullptr && std::strncmp(function, "kiln::", 6) != 0 &&
        std::strncmp(function, "std::", 5) != 0 && std::strncmp(function, "__", 2) != 0)
      search->found = function;
    return 0;
  }
  if (file_is_library(file)) return 0;
  search->found = std::string(file) + ":" + std::to_string(line);
  return 1;
}
#endif

}  // namespace

std::string user_call_site() {
#ifdef KILN_HAVE_BACKTRACE
  if (backtrace_state* s = state()) {
    Search search;
    backtrace_full(s, /*skip=*/1, on_frame, nullptr, &search);
    return search.found;
  }
#endif
  void* frames[64];
  int n = backtrace(frames, 64);
  for (int i = 1; i < n; ++i) {
    auto pc = reinterpret_cast<uintptr_t>(frames[i]);
    if (object_is_kiln(pc)) continue;
    Dl_info info{};
    if (dladdr(frames[i], &info) != 0 && info.dli_sname != nullptr) return info.dli_sname;
    return "";
  }
  return "";
}

}  // namespace kiln
