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

/// How compile_kernels trades compile time for run time; the defaults are kiln's policy (see
/// docs/performance.md, "Compile time"). For tests and measurements.
struct CodegenOptions {
  /// A kernel with more polynomial math ops (exp, log, tanh, erf, sigmoid, sin, cos, pow) than
  /// this calls functions the module shares for them (vector_math.h, emit_math_call: the same
  /// operations, so the same results); a kernel with as many or fewer has them inline. -1:
  /// always inline.
  int inline_math_limit = 8;
  /// Kernels with the same body and schedule (names aside) are compiled once: the first
  /// one's function, the others aliases of it.
  bool dedupe = true;
  /// Values a kernel's inner loops would compute again are computed once per row and kept
  /// in a scratch array (reuse_plan.h), in kernels that recompute much.
  bool reuse = true;
  /// A module of more LLVM instructions than this (before optimisation) is optimised with a
  /// cheaper pipeline (llvm_target.h, compile_module); negative: always O3.
  int64_t large_module_instructions = 20000;
  /// Kernels of distinct bodies are spread over up to this many modules, compiled at once on
  /// the thread pool and returned as a bundle of objects (object_check.h, split_objects); 0:
  /// as many as the pool has threads; 1: one module, one object.
  int parallel = 0;
};

/// Generates LLVM IR for each kernel under its schedule (a function named after the kernel),
/// optimises the module at O3 for the target's CPU (the host's unless another is given:
/// cpu_target) and returns the object file's bytes. Under the default CodegenOptions: kernels
/// with the same body are compiled once (aliases name the others), a kernel with many math
/// ops calls shared out-of-line functions for them, values later inner loops recompute are
/// kept per row instead, and a large module gets a cheaper pipeline.
std::string compile_kernels(std::span<const ir::kernel::Kernel> kernels,
                            std::span<const Schedule> schedules, std::string_view module_name,
                            const HostTarget& target = host_target());
/// The same, with options other than the defaults.
std::string compile_kernels(std::span<const ir::kernel::Kernel> kernels,
                            std::span<const Schedule> schedules, std::string_view module_name,
                            const HostTarget& target, const CodegenOptions& options);

/// The generated LLVM IR, before optimisation (for dumps and tests).
std::string kernels_llvm_ir(std::span<const ir::kernel::Kernel> kernels,
                            std::span<const Schedule> schedules);

} // namespace kiln::codegen::cpu
