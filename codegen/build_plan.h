// The last stage of the lowering: the runtime Plan of a graph, as slots and steps.
#pragma once

#include <span>
#include <vector>

#include "codegen/attention.h"
#include "codegen/lower.h"
#include "codegen/lower_group.h"
#include "passes/fusion.h"

namespace kiln::codegen {

/// The plan's call of a group's kernel (`entry`, compiled under `schedule`), with its
/// outputs' geometry.
Plan::KernelCall kernel_call(const LoweredGroup& lg, const Schedule& schedule, KernelEntry entry);

/// The interpreter's plan of cg.graph: every node an eager call of its op.
void build_interpreted_plan(CompiledGraph& cg, std::span<const size_t> input_map);

/// The plan of a fused graph, one step per fusion step in its order: a group's kernel
/// (`entries[g]` under `schedules[g]`), a library call with its epilogue (owned by cg), or an
/// eager call; each attention site one attention step (its three steps block by block).
/// `run_as` (ForeachPlan::run_as; empty: each its own): the kernel a group's step runs, or
/// none (-1) for a foreach kernel's member that the foreach runs at another step.
void build_fused_plan(CompiledGraph& cg, std::span<const size_t> input_map,
                      const passes::FusionResult& fusion, std::span<const LoweredGroup> groups,
                      std::span<const Schedule> schedules, std::span<const KernelEntry> entries,
                      std::span<const AttentionSite> attention = {},
                      std::span<const int64_t> run_as = {});

} // namespace kiln::codegen
