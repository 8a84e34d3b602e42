// The table of differential cases known to fail. Keep it short and current: an entry whose
// case passes fails the run, so fix the bug and delete the line in the same change.
#include "diff/expected_failures.h"

#include <array>

namespace kiln::diff {

namespace {

// {"case name exactly as the failure message spells it", "why it fails (issue or cause)"},
constexpr std::array<ExpectedFailure, 3> kExpectedFailures{{
    {"chains [f16 7x33]",
     "-0.0 where eager gives +0.0 in output 8 (maximum(x, y) - minimum(x, 0) * 2), only when "
     "compiled with the other 16 chains in one graph; not reproduced alone: under investigation"},
    {"chains [f16 1023 and 0-d]",
     "-0.0 where eager gives +0.0 in output 8 (maximum(x, y) - minimum(x, 0) * 2), only when "
     "compiled with the other 16 chains in one graph; not reproduced alone: under investigation"},
    {"chains [f16 transposed and expanded]",
     "-0.0 where eager gives +0.0 in output 8 (maximum(x, y) - minimum(x, 0) * 2), only when "
     "compiled with the other 16 chains in one graph; not reproduced alone: under investigation"},
}};

} // namespace

std::span<const ExpectedFailure> expected_failures() { return kExpectedFailures; }

} // namespace kiln::diff
