// The CPU JIT target.
#include "codegen/cpu/jit_target.h"

#include <cstdlib>

#include "codegen/cpu/kernel_codegen.h"
#include "codegen/cpu/object_check.h"

namespace kiln::codegen::cpu {

JitTarget::JitTarget(HostTarget cpu, std::vector<std::string> check_cpus)
    : cpu_(std::move(cpu)), check_cpus_(std::move(check_cpus)) {}

std::string JitTarget::identity() const {
  std::string s = "llvm ";
  s += llvm_version();
  s += "\ntarget " + cpu_.triple + " " + cpu_.cpu + " " + cpu_.features + "\n";
  if (cpu_.pic) s += "pic\n";
  // A compile that also checks other CPUs is not answered by one that did not.
  for (const std::string& cpu : check_cpus_)
    s += "check " + cpu + "\n";
  return s;
}

std::string JitTarget::source(std::span<const ir::kernel::Kernel> kernels,
                              std::span<const Schedule> schedules) const {
  return kernels_llvm_ir(kernels, schedules);
}

Expected<std::string> JitTarget::compile(std::span<const ir::kernel::Kernel> kernels,
                                         std::span<const Schedule> schedules) const {
  // LLVM's failures (a CPU it does not know, a selection failure) reach here as kiln::Error.
  try {
    for (const std::string& cpu : check_cpus_)
      if (compile_kernels(kernels, schedules, "kiln_check", cpu_target(cpu)).empty())
        return Error::without_location("LLVM emitted an empty object for " + cpu);
    return compile_kernels(kernels, schedules, "kiln_graph", cpu_);
  } catch (const Error& e) {
    return Error::without_location(std::string("the CPU code generator failed: ") + e.what());
  }
}

bool JitTarget::check(std::string_view object) const {
  return static_cast<bool>(check_object(object));
}

Expected<LoadedCode> JitTarget::load(std::string_view object,
                                     std::span<const ir::kernel::Kernel> kernels) const {
  try {
    std::shared_ptr<JitLibrary> library = load_object(object, "kiln_graph");
    LoadedCode code;
    for (const ir::kernel::Kernel& k : kernels)
      code.entries.push_back(reinterpret_cast<KernelEntry>(library->lookup(k.name)));
    code.library = std::move(library);
    return code;
  } catch (const Error& e) {
    return Error::without_location(std::string("loading the generated code failed: ") + e.what());
  }
}

const std::vector<std::string>& check_cpus() {
  static const std::vector<std::string> cpus = [] {
    std::vector<std::string> v;
    const char* env = std::getenv("KILN_CHECK_CPUS");
    std::string_view list = env != nullptr ? env : "";
    while (!list.empty()) {
      const size_t comma = list.find(',');
      if (std::string_view cpu = list.substr(0, comma); !cpu.empty()) v.emplace_back(cpu);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
    return v;
  }();
  return cpus;
}

const Target& jit_target() {
  static const JitTarget target(host_target(), check_cpus());
  return target;
}

} // namespace kiln::codegen::cpu
