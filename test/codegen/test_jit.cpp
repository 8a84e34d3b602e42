// The JIT's host target, object loading, and code for CPUs other than the host.
#include <catch2/catch.hpp>

#include "codegen/cpu/jit.h"
#include "codegen/cpu/kernel_codegen.h"
#include "codegen/cpu/object_check.h"
#include "codegen/lower_group.h"
#include "ir/parser.h"
#include "passes/fusion.h"
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

namespace {

/// The kernels of a softmax in f32, a row sum in f64 and a chain through f16, lowered under
/// `lanes` f32 lanes.
struct Lowered {
  std::vector<kiln::ir::kernel::Kernel> kernels;
  std::vector<kiln::codegen::Schedule> schedules;
};
Lowered lowered_kernels(int lanes) {
  const char* text = R"(graph @g {
  %0 : f32[8,300] = input "x"
  %1 : f64[8,77] = input "y"
  %2 : f16[33] = input "z"
  %3 : f32[8,1] = amax(%0) {dims = [1], keepdim = true}
  %4 : f32[8,300] = sub(%0, %3)
  %5 : f32[8,300] = exp(%4)
  %6 : f32[8,1] = sum(%5) {dims = [1], keepdim = true, dtype = f32}
  %7 : f32[8,300] = div(%5, %6)
  %8 : f64[8] = sum(%1) {dims = [1], keepdim = false, dtype = f64}
  %9 : f16[33] = tanh(%2)
  %10 : f16[33] = mul(%9, %2)
  return %7, %8, %10
}
)";
  kiln::Expected<std::unique_ptr<kiln::ir::Graph>> g = kiln::ir::parse_graph(text);
  INFO((g ? std::string() : g.error().message()));
  REQUIRE(g);
  kiln::passes::FusionResult fusion = kiln::passes::fuse(**g);
  Lowered out;
  kiln::codegen::ScheduleOverride o;
  o.lanes = lanes;
  for (size_t i = 0; i < fusion.groups.size(); ++i) {
    std::string name = "k";
    name += std::to_string(i);
    out.kernels.push_back(kiln::codegen::lower_group(fusion.groups[i], name).kernel);
    out.schedules.push_back(kiln::codegen::choose_schedule(out.kernels.back(), 16, o));
  }
  return out;
}

} // namespace

TEST_CASE("kernels compile for CPUs the host is not, at every width", "[jit]") {
  // AVX-512, AVX2 and SSE2 machines: generated, verified and emitted here whatever this
  // host has (KILN_CHECK_CPUS does the same for every kernel of a test run).
  for (int lanes : {4, 8, 16}) {
    INFO("lanes " << lanes);
    Lowered l = lowered_kernels(lanes);
    REQUIRE(l.kernels.size() >= 3);
    std::vector<std::string> objects;
    for (const char* cpu : {"x86-64-v4", "x86-64-v3", "x86-64"}) {
      INFO(cpu);
      std::string object = compile_kernels(l.kernels, l.schedules, "foreign", cpu_target(cpu));
      // One object, or a bundle of objects compiled on several threads: each an ELF file.
      kiln::Expected<std::vector<std::string_view>> parts =
          kiln::codegen::cpu::split_objects(object);
      REQUIRE(parts);
      for (std::string_view part : *parts) {
        REQUIRE(part.size() > 64);
        CHECK(part.compare(0, 4,
                           "\x7f"
                           "ELF") == 0);
      }
      CHECK(kiln::codegen::cpu::check_object(object));
      objects.push_back(object);
    }
    CHECK(objects[0] != objects[2]); // AVX-512 code is not the baseline's
  }
  CHECK_THROWS_WITH(cpu_target("no-such-cpu"), Catch::Contains("unknown CPU 'no-such-cpu'"));
}
