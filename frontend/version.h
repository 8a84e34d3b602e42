// kiln's version.
#pragma once

#define KILN_VERSION_STRING "0.1.0"

namespace kiln {
/// "MAJOR.MINOR.PATCH".
const char* version();
} // namespace kiln
