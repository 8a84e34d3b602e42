// The LLVM CPU code generator: kernels + schedules in, one object file out.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "codegen/cpu/jit.h"
#include "codegen/schedule.h"
#include "ir/kernel/kernel.h"
#include "runtime/plan.h"

namespace kiln::codegen::cpu {

/// The C ABI of a generated kernel (the runtime Plan's): buffer base pointers (indexed as
/// Kernel::buffers) and a range of rows (Schedule::rows).
using KernelEntry = kiln::KernelEntry;

/// Generates LLVM IR for each kernel under its schedule (a function named after the kernel),
/// optimises the module at O3 for the target's CPU (the host's unless another is given:
/// cpu_target) and returns the object file's bytes.
std::string compile_kernels(std::span<const ir::kernel::Kernel> kernels,
                            std::span<const Schedule> schedules, std::string_view module_name,
                            const HostTarget& target = host_target());

/// The generated LLVM IR, before optimisation (for dumps and tests).
std::string kernels_llvm_ir(std::span<const ir::kernel::Kernel> kernels,
                            std::span<const Schedule> schedules);

} // namespace kiln::codegen::cpu
