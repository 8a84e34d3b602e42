// Foreach kernels (horizontal fusion, docs/ir.md "Foreach kernels"): independent pointwise
// kernels of one body, such as an optimizer's update of each parameter, run as one kernel,
// each on its own buffers: one call (one launch on a device) instead of one per parameter.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "codegen/lower_group.h"
#include "codegen/schedule.h"
#include "ir/kernel/kernel.h"
#include "passes/fusion.h"

namespace kiln::codegen {

/// The kernel over one flat dim of its points, when it is pointwise over a contiguous domain:
/// each buffer is accessed at the point's row-major position (its extent the points) or at its
/// one element. nullopt for any other kernel.
std::optional<ir::kernel::Kernel> flatten_pointwise(const ir::kernel::Kernel& k);

struct ForeachPlan {
  /// Per fusion group: the index in `lowered` of the kernel its step runs (its own, or for a
  /// foreach's last member the foreach kernel), or -1 for the other members.
  std::vector<int64_t> run_as;
  /// Per entry of `lowered`: whether it is a member of a foreach (then never compiled).
  std::vector<bool> merged;
  size_t kernels = 0; // foreach kernels formed
  size_t members = 0; // the kernels they run
};

/// Forms foreach kernels and appends them to `lowered` and `schedules` (the schedule of the
/// largest part, under `fixed`). Members are pointwise kernels of one flattened body, not in
/// `in_cache`; a foreach runs at its last member's step, so no member's results may be read
/// before it. Each needs at least two members.
ForeachPlan form_foreach(const passes::FusionResult& fusion, std::vector<LoweredGroup>& lowered,
                         std::vector<Schedule>& schedules, const std::vector<bool>& in_cache,
                         int vector_bytes, const ScheduleOverride& fixed);

} // namespace kiln::codegen
