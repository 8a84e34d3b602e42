// The user's call site: walks the stack and returns the first frame outside kiln.
//
// A frame is kiln's own when its code lies in one of kiln's shared libraries, or when its
// source file is one of kiln's (headers inlined into the user's binary) or a system header
// (std::function and friends). With libbacktrace (shipped with GCC) the frame is named by
// file:line from the user's debug info; without it, by function name through dladdr.
#include "runtime/call_site.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#ifdef KILN_HAVE_BACKTRACE
#include <backtrace.h>
#endif

namespace kiln {
namespace {

enum class Owner { kiln, system, user };

// Whose code a pc is in, judged by the object that holds it: kiln's shared libraries, the
// system's (libc, libstdc++, libgomp under /lib or /usr/lib), or the user's.
Owner owner_of(uintptr_t pc) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(pc), &info) == 0 || info.dli_fname == nullptr)
    return Owner::user;
  std::string_view path(info.dli_fname);
  std::string_view name = path;
  auto slash = name.rfind('/');
  if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
  if (name.starts_with("libkiln_")) return Owner::kiln;
  if (path.starts_with("/lib/") || path.starts_with("/lib64/") || path.starts_with("/usr/lib/"))
    return Owner::system;
  return Owner::user;
}

// A name for a frame without debug info: its symbol, or its object and offset.
std::string describe_pc(uintptr_t pc) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(pc), &info) == 0) return "";
  if (info.dli_sname != nullptr) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    std::string name = status == 0 && demangled ? demangled : info.dli_sname;
    std::free(demangled);
    return name;
  }
  if (info.dli_fname == nullptr) return "";
  char offset[32];
  std::snprintf(offset, sizeof offset, "+0x%zx",
                static_cast<size_t>(pc - reinterpret_cast<uintptr_t>(info.dli_fbase)));
  return std::string(info.dli_fname) + offset;
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
backtrace_state* state() {
  static backtrace_state* s = backtrace_create_state(nullptr, /*threaded=*/1, nullptr, nullptr);
  return s;
}

// Called per frame (inlined frames first, innermost out); stops at the first user frame.
int on_frame(void* data, uintptr_t pc, const char* file, int line, const char*) {
  auto* found = static_cast<std::string*>(data);
  if (pc == 0 || pc == UINTPTR_MAX || owner_of(pc) != Owner::user) return 0;
  if (file != nullptr && file_is_library(file)) return 0; // a kiln or std header inlined here
  *found = file != nullptr ? std::string(file) + ":" + std::to_string(line) : describe_pc(pc);
  return 1;
}
#endif

} // namespace

CallStack capture_call_stack() {
  CallStack s;
  s.pcs.resize(64);
  int n = backtrace(s.pcs.data(), static_cast<int>(s.pcs.size()));
  s.pcs.resize(static_cast<size_t>(n > 1 ? n : 1));
  s.pcs.erase(s.pcs.begin()); // this function
  return s;
}

std::string user_call_site(const CallStack& stack) {
  for (void* p : stack.pcs) {
    auto pc = reinterpret_cast<uintptr_t>(p);
    if (owner_of(pc) != Owner::user) continue;
#ifdef KILN_HAVE_BACKTRACE
    if (backtrace_state* s = state()) {
      std::string found;
      // A return address points after the call; pc - 1 lies in the calling line.
      backtrace_pcinfo(s, pc - 1, on_frame, nullptr, &found);
      if (!found.empty()) return found;
      continue; // a kiln or std header inlined into user code: look further out
    }
#endif
    return describe_pc(pc);
  }
  return "";
}

std::string user_call_site() {
#ifdef KILN_HAVE_BACKTRACE
  if (backtrace_state* s = state()) {
    std::string found;
    backtrace_full(s, /*skip=*/1, on_frame, nullptr, &found);
    return found;
  }
#endif
  void* frames[64];
  int n = backtrace(frames, 64);
  for (int i = 1; i < n; ++i) {
    auto pc = reinterpret_cast<uintptr_t>(frames[i]);
    if (owner_of(pc) == Owner::user) return describe_pc(pc);
  }
  return "";
}

} // namespace kiln
