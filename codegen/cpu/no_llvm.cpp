// The CPU code generator's interface in a build without LLVM (KILN_WITH_LLVM=OFF, as on
// machines that have a GPU toolkit but no LLVM 22): every compile is an error saying so, and
// the pipeline then runs CPU graphs on the eager kernels (CompiledGraph::fallback). Built
// instead of jit.cpp, jit_target.cpp, kernel_codegen.cpp, vector_math.cpp, math_probe.cpp and
// aot_object.cpp.
#include "codegen/cpu/aot_object.h"
#include "codegen/cpu/jit.h"
#include "codegen/cpu/jit_target.h"
#include "codegen/cpu/kernel_codegen.h"

namespace kiln::codegen::cpu {
namespace {

constexpr const char* kNoLlvm =
    "kiln was built without LLVM (KILN_WITH_LLVM=OFF): no CPU kernels are generated, and CPU "
    "graphs run on the eager kernels";

[[noreturn]] void no_llvm() { throw Error::without_location(kNoLlvm); }

} // namespace

const HostTarget& host_target() {
  static const HostTarget t = [] {
    HostTarget h;
    h.triple = "x86_64-unknown-linux-gnu";
    h.cpu = "none (no LLVM)";
#if defined(__x86_64__) && defined(__GNUC__)
    h.vector_bytes = __builtin_cpu_supports("avx512f") ? 64
                     : __builtin_cpu_supports("avx2")  ? 32
                                                       : 16;
#endif
    return h;
  }();
  return t;
}
HostTarget cpu_target(std::string_view) { no_llvm(); }
std::vector<std::string> cpu_features(const HostTarget&) { return {}; }
bool host_runs(const HostTarget& target) {
  return target.cpu == host_target().cpu && target.features == host_target().features;
}
const char* llvm_version() { return "none"; }

struct JitLibrary::Impl {};
JitLibrary::~JitLibrary() = default;
void* JitLibrary::lookup(std::string_view) const { no_llvm(); }
std::shared_ptr<JitLibrary> load_object(std::string_view, std::string_view) { no_llvm(); }

std::string compile_kernels(std::span<const ir::kernel::Kernel>, std::span<const Schedule>,
                            std::string_view, const HostTarget&) {
  no_llvm();
}
std::string compile_kernels(std::span<const ir::kernel::Kernel>, std::span<const Schedule>,
                            std::string_view, const HostTarget&, const CodegenOptions&) {
  no_llvm();
}
std::string kernels_llvm_ir(std::span<const ir::kernel::Kernel>, std::span<const Schedule>) {
  return std::string("; ") + kNoLlvm + "\n";
}

std::string aot_data_object(const HostTarget&, const AotData&) { no_llvm(); }

JitTarget::JitTarget(HostTarget cpu, std::vector<std::string> check_cpus)
    : cpu_(std::move(cpu)), check_cpus_(std::move(check_cpus)) {}
std::string JitTarget::identity() const { return "no llvm\n"; }
std::string JitTarget::source(std::span<const ir::kernel::Kernel> kernels,
                              std::span<const Schedule> schedules) const {
  return kernels_llvm_ir(kernels, schedules);
}
Expected<std::string> JitTarget::compile(std::span<const ir::kernel::Kernel>,
                                         std::span<const Schedule>) const {
  return Error::without_location(kNoLlvm);
}
bool JitTarget::check(std::string_view) const { return false; }
Expected<LoadedCode> JitTarget::load(std::string_view, std::span<const ir::kernel::Kernel>) const {
  return Error::without_location(kNoLlvm);
}
const std::vector<std::string>& check_cpus() {
  static const std::vector<std::string> none;
  return none;
}
const Target& jit_target() {
  static const JitTarget target(host_target());
  return target;
}

} // namespace kiln::codegen::cpu
