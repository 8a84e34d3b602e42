// The pass manager: registration, parsing of pass lists, unknown names.
#include <catch2/catch.hpp>

#include "passes/pass.h"

using namespace kiln;

TEST_CASE("pass manager: an unknown pass name lists the known ones", "[passes]") {
  CHECK_THROWS_WITH(passes::PassManager::parse("dead-code-elimination,no-such-pass"),
                    Catch::Contains("no-such-pass") && Catch::Contains("dead-code-elimination"));
}
