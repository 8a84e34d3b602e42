// The differential cases known to fail, each with the reason: the harness (diff_testing.h)
// reports such a case as expected, and fails the test when it passes ("remove it").
#pragma once

#include <span>
#include <string_view>

namespace kiln::diff {

/// One known failure: `name` is a case's full name as Case::name() spells it,
/// "op [variant]" (e.g. "unary ops [f16 7x33 transposed]").
struct ExpectedFailure {
  std::string_view name;
  std::string_view reason;
};

/// The table the harness consults by default (expected_failures.cpp).
std::span<const ExpectedFailure> expected_failures();

} // namespace kiln::diff
