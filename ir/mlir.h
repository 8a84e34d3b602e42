// MLIR output of a graph (`--format mlir`): func + linalg/tensor/arith, readable by mlir-opt.
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::ir {

/// The graph as an MLIR module holding one `func.func`, with tensors as builtin ranked
/// tensor types and ops in the linalg, tensor and arith dialects (docs/ir.md lists the
/// mapping; ops with no such form become calls to declared external functions). Layouts
/// (strides) are dropped: MLIR tensors are values. Throws kiln::Error for what MLIR cannot
/// express (symbolic sizes, non-CPU devices).
std::string to_mlir(const Graph& g);

} // namespace kiln::ir
