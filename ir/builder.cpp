// Builder: node creation with inferred result types.
#include "ir/builder.h"

#include "ir/infer.h"
#include "runtime/ops/dispatch.h"

namespace kiln::ir {

Node* Builder::create_node(Op op, std::vector<Value*> inputs, Attrs attrs) {
  Expected<std::vector<Type>> types = infer_types(op, inputs, attrs);
  if (!types) throw Error(types.error().message());
  Node* n = g_->create_node(op, std::move(inputs), std::move(attrs), *types, before_);
  n->set_location(location_);
  return n;
}

Value* Builder::create(Op op, std::vector<Value*> inputs, Attrs attrs) {
  Node* n = create_node(op, std::move(inputs), std::move(attrs));
  KILN_ASSERT(n->num_outputs() == 1, "Builder::create: ", n->name(), " has ", n->num_outputs(),
              " results");
  return n->output();
}

Value* Builder::scalar(Scalar s) { return g_->add_constant(wrap_scalar(s), true); }

} // namespace kiln::ir
