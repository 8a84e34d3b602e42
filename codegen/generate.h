// From fused groups to native code: lowers each group, schedules it, generates one object
// for the whole graph (or takes it from the on-disk cache) and loads it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/cpu/kernel_codegen.h"
#include "codegen/schedule.h"
#include "passes/fusion.h"

namespace kiln::codegen {

namespace cpu {
class JitLibrary;
}

struct GeneratedKernel {
  cpu::KernelEntry entry = nullptr;
  ir::kernel::Kernel kernel;
  Schedule schedule;
  int64_t rows = 0;
  /// The graph value each kernel buffer binds (Kernel::buffers order).
  std::vector<const ir::Value*> buffers;
};

struct GeneratedCode {
  std::shared_ptr<cpu::JitLibrary> library;
  std::vector<GeneratedKernel> kernels; // one per fusion group, same order
  bool cache_hit = false;
  std::string cache_key_hash;
};

/// The GNU build ID (hex) of the binary holding the code generator, part of every cache key
/// so that a rebuilt kiln never loads an object an older build cached; empty if it has none.
const std::string& build_id();

/// The CPUs (LLVM names) that KILN_CHECK_CPUS lists ("x86-64-v4,x86-64"): every compile
/// also generates and emits code for each, never loaded (cpu::cpu_target).
const std::vector<std::string>& check_cpus();

/// Lowers and compiles every group of `fusion` under the heuristic's schedules with the
/// override's fields. Throws kiln::Error when a group has no lowering (the caller then runs
/// the graph on the interpreter).
GeneratedCode generate(const passes::FusionResult& fusion, bool use_cache = true,
                       const ScheduleOverride& schedule = {});

} // namespace kiln::codegen
