// The header of every cache key (codegen/cache.h): kept out of cache.cpp, which the cache
// fuzzer builds on its own, because it needs the build's version.
#include "codegen/cache.h"

namespace kiln::codegen {

std::string cache_key_header(std::string_view kind) {
  std::string key = "kiln ";
  key += kind;
  key += " v1\nkiln ";
  key += KILN_VERSION_STRING;
  key += "\nbuild ";
  key += build_id().empty() ? std::string(__DATE__ " " __TIME__) : build_id();
  return key + "\n";
}

} // namespace kiln::codegen
