// docs/ir.md documents every op of the table, with each of its attributes.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "runtime/ops/op.h"

using namespace kiln;

TEST_CASE("docs/ir.md has a section for every op naming each of its attributes", "[ir][docs]") {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/docs/ir.md");
  REQUIRE(in.good());
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  for (int i = 0; i < kNumOps; ++i) {
    const OpSchema& s = schema(static_cast<Op>(i));
    const std::string heading = "#### `" + std::string(s.name) + "`\n";
    INFO("op " << s.name);
    size_t at = text.find(heading);
    REQUIRE(at != std::string::npos);
    size_t end = text.find("\n#", at + heading.size());
    std::string section = text.substr(at, end == std::string::npos ? end : end - at);
    CHECK(section.size() > heading.size() + 20); // a heading alone documents nothing
    for (const AttrSpec& a : s.attrs) {
      INFO("attribute " << a.name);
      CHECK(section.find(a.name + " = ") != std::string::npos);
    }
  }
}
