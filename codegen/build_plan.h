// The last stage of the lowering: the runtime Plan of a graph, as slots and steps.
#pragma once

#include <span>
#include <vector>

#include "codegen/lower.h"
#include "codegen/lower_group.h"
#include "passes/fusion.h"

namespace kiln::codegen {

/// The interpreter's plan of cg.graph: every node an eager call of its op.
void build_interpreted_plan(CompiledGraph& cg, std::span<const size_t> input_map);

/// The plan of a fused graph, one step per fusion step in its order: a group's kernel
/// (`entries[g]` under `schedules[g]`), a library call with its epilogue (owned by cg), or an
/// eager call.
void build_fused_plan(CompiledGraph& cg, std::span<const size_t> input_map,
                      const passes::FusionResult& fusion, std::span<const LoweredGroup> groups,
                      std::span<const Schedule> schedules, std::span<const KernelEntry> entries);

} // namespace kiln::codegen
