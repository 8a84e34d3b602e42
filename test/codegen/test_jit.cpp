// The JIT's host target and object loading.
#include <catch2/catch.hpp>

#include "codegen/cpu/jit.h"
#include "runtime/error.h"

using namespace kiln::codegen::cpu;

TEST_CASE("the host target names a CPU with its vector width", "[jit]") {
  const HostTarget& t = host_target();
  CHECK(t.triple.find("x86_64") != std::string::npos);
  CHECK_FALSE(t.cpu.empty());
  CHECK((t.vector_bytes == 16 || t.vector_bytes == 32 || t.vector_bytes == 64));
  CHECK(std::string(llvm_version()).rfind("22.", 0) == 0);
}

TEST_CASE("a malformed object is a kiln Error", "[jit]") {
  CHECK_THROWS_AS(load_object("not an object file", "garbage"), kiln::Error);
  CHECK_THROWS_AS(load_object("", "empty"), kiln::Error);
}
