// The CPU JIT target: kernels compiled by LLVM for this host (codegen/cpu/kernel_codegen) and
// linked into the process (codegen/cpu/jit).
#pragma once

#include <string>
#include <vector>

#include "codegen/cpu/jit.h"
#include "codegen/target.h"

namespace kiln::codegen::cpu {

class JitTarget final : public Target {
public:
  /// Code for `cpu`; every compile also generates and emits code for each of `check_cpus`
  /// (cpu_target names), never loaded: widths and instruction sets the host lacks are still
  /// compiled.
  explicit JitTarget(HostTarget cpu, std::vector<std::string> check_cpus = {});

  std::string_view name() const override { return "cpu"; }
  const HostTarget& cpu() const { return cpu_; }
  int vector_bytes() const override { return cpu_.vector_bytes; }
  std::string identity() const override;
  std::string source(std::span<const ir::kernel::Kernel> kernels,
                     std::span<const Schedule> schedules) const override;
  Expected<std::string> compile(std::span<const ir::kernel::Kernel> kernels,
                                std::span<const Schedule> schedules) const override;
  bool check(std::string_view object) const override;
  Expected<LoadedCode> load(std::string_view object,
                            std::span<const ir::kernel::Kernel> kernels) const override;

private:
  HostTarget cpu_;
  std::vector<std::string> check_cpus_;
};

/// The CPUs (LLVM names) that KILN_CHECK_CPUS lists ("x86-64-v4,x86-64"), read once.
const std::vector<std::string>& check_cpus();

/// The process's target: this host, with KILN_CHECK_CPUS.
const Target& jit_target();

} // namespace kiln::codegen::cpu
