// Lowering a fusion group to a loop-IR kernel (ir/kernel/).
#pragma once

#include <string>
#include <vector>

#include "ir/kernel/kernel.h"
#include "passes/fusion.h"

namespace kiln::codegen {

struct LoweredGroup {
  ir::kernel::Kernel kernel;
  /// Per kernel buffer, the graph value it binds (inputs first, then outputs).
  std::vector<const ir::Value*> buffers;
};

/// Lowers a group to a kernel named `name`. It cannot fail: what has no lowering is decided
/// per node before fusion (passes::is_lowerable), and such a node runs as an extern call. A
/// group that breaks fusion's guarantees (an output its domain does not iterate) is a
/// KILN_ASSERT.
/// `in_cache`: the group's outputs stay in the caches (an attention site's softmax, run block
/// by block): never lowered for streamed stores, whatever their size.
LoweredGroup lower_group(const passes::FusionGroup& group, std::string name, bool in_cache = false);

} // namespace kiln::codegen
