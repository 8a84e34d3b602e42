// Result types of a node, from the op table's shape/dtype inference (shared with eager).
#pragma once

#include <span>
#include <vector>

#include "ir/type.h"
#include "ir/value.h"
#include "runtime/error.h"
#include "runtime/ops/op.h"

namespace kiln::ir {

/// Checks that attrs has exactly the op's schema attributes, each of its declared kind.
Expected<void> check_attrs(Op op, const Attrs& attrs);
/// Checks the operand count against the schema (variadic ops take at least one).
Expected<void> check_arity(Op op, size_t num_inputs);
/// The result types of `op` applied to operands of these types: checks arity and attributes,
/// then runs the op's inference. Symbolic sizes are not inferred yet: an error says so.
Expected<std::vector<Type>> infer_types(Op op, std::span<const Type> inputs, const Attrs& attrs);
Expected<std::vector<Type>> infer_types(Op op, std::span<Value* const> inputs, const Attrs& attrs);

} // namespace kiln::ir
