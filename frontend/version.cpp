// kiln's version string, reported by the CLI and stored in compile-cache keys.
#include "frontend/version.h"

namespace kiln {
const char* version() { return KILN_VERSION_STRING; }
} // namespace kiln
