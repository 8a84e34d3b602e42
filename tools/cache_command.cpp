// `kiln cache stats|clear`: what the on-disk kernel cache ($KILN_CACHE_DIR, or ~/.cache/kiln)
// holds, and emptying it.
#include <iostream>
#include <string>

#include "codegen/cache.h"
#include "tools/commands.h"
#include "tools/model_args.h"

namespace kiln::tools {
namespace {

constexpr const char* kCacheUsage =
    "usage: kiln cache stats|clear\n"
    "  The on-disk cache of compiled kernels: $KILN_CACHE_DIR, or ~/.cache/kiln when unset.\n"
    "  stats              print the directory, the number of entries and their bytes\n"
    "  clear              remove every entry (and temp files left by interrupted writes)\n";

int bad_usage(const std::string& message) {
  std::cerr << "kiln cache: error: " << message << "\n" << kCacheUsage;
  return 2;
}

} // namespace

int cache_main(std::span<const std::string_view> args) {
  std::string_view sub;
  for (std::string_view a : args) {
    if (a == "-h" || a == "--help") {
      std::cout << kCacheUsage;
      return 0;
    }
    if (a.starts_with("-")) return bad_usage("unknown option '" + std::string(a) + "'");
    if (!sub.empty()) return bad_usage("unexpected argument '" + std::string(a) + "'");
    sub = a;
  }
  if (sub.empty()) return bad_usage("no subcommand given (stats or clear)");
  if (sub != "stats" && sub != "clear")
    return bad_usage("unknown subcommand '" + std::string(sub) + "'");

  const codegen::DiskCache& cache = codegen::DiskCache::global();
  if (!cache.enabled()) {
    std::string where = cache.dir().empty() ? "" : " at " + cache.dir().string();
    return report("cache",
                  runtime_error("the cache" + where + " is disabled: " + cache.disabled_reason()));
  }
  if (sub == "stats") {
    const codegen::DiskCache::Stats s = cache.stats();
    std::cout << "directory  " << cache.dir().string() << "\n"
              << "entries    " << s.entries << "\n"
              << "bytes      " << s.bytes << "\n";
  } else {
    const int64_t removed = cache.clear();
    std::cout << "removed " << removed << (removed == 1 ? " entry" : " entries") << " from "
              << cache.dir().string() << "\n";
  }
  return 0;
}

} // namespace kiln::tools
