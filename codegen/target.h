// Target: the seam between the target-independent lowering (codegen/lower) and a backend.
// The pipeline hands a target the kernels of one graph with their schedules; the target says
// how wide its vectors are, shows the code it generates, compiles it to an object, checks
// and loads objects (its own or the on-disk cache's). The CPU JIT (codegen/cpu/jit_target)
// is one; an AOT object writer and CUDA plug in here. Nothing above this header knows LLVM.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/schedule.h"
#include "ir/kernel/kernel.h"
#include "runtime/error.h"
#include "runtime/plan.h"

namespace kiln::codegen {

/// Code a target loaded: what keeps it mapped, and each kernel's entry.
struct LoadedCode {
  std::shared_ptr<const void> library;
  std::vector<KernelEntry> entries; // per kernel, in the order given
  /// Where the kernels run. A device target's kernels are launched (`launches`, per kernel);
  /// its `entries` are no CPU code.
  Device device = Device::cpu();
  std::vector<DeviceLaunch> launches;
};

class Target {
public:
  virtual ~Target() = default;
  /// For logs and errors ("cpu").
  virtual std::string_view name() const = 0;
  /// Where its kernels run (the plan's device).
  virtual Device device() const { return Device::cpu(); }
  /// The widest vector register in bytes: the schedules' lanes follow from it.
  virtual int vector_bytes() const = 0;
  /// Everything besides the kernels that its objects depend on (compiler version, CPU and
  /// features): part of every cache key, so no object is loaded on a target it was not made
  /// for.
  virtual std::string identity() const = 0;
  /// The code generated for the kernels, before optimisation, as text (LLVM IR for the CPU).
  virtual std::string source(std::span<const ir::kernel::Kernel> kernels,
                             std::span<const Schedule> schedules) const = 0;
  /// Compiles the kernels into one blob of code, stored in the cache as it is: for the CPU,
  /// an object, or a bundle of objects compiled at once (cpu/object_check.h). A failure is
  /// what the target cannot compile; the pipeline then runs the graph without generated code.
  virtual Expected<std::string> compile(std::span<const ir::kernel::Kernel> kernels,
                                        std::span<const Schedule> schedules) const = 0;
  /// Whether bytes are a well-formed object of this target (a corrupt cache entry is a miss).
  virtual bool check(std::string_view object) const = 0;
  /// Loads an object that compile() made and finds each kernel's entry by its name.
  virtual Expected<LoadedCode> load(std::string_view object,
                                    std::span<const ir::kernel::Kernel> kernels) const = 0;
};

} // namespace kiln::codegen
