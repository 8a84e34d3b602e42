// Which values share storage with which: what passes must check before they forward a value
// to a graph output.
#pragma once

#include "ir/value.h"

namespace kiln::passes {

/// The value whose storage v shares: through view ops down to a fresh result or an input.
const ir::Value* storage_root(const ir::Value* v);

/// Whether v is one of its graph's outputs.
bool is_graph_output(const ir::Value* v);

} // namespace kiln::passes
