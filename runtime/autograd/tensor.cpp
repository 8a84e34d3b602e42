// Tensor's autograd methods (runtime/autograd/autograd.h).
#include "runtime/autograd/autograd.h"
#include "runtime/autograd/node.h"

namespace kiln {

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph,
                      bool create_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph, create_graph);
}

Tensor& Tensor::retain_grad() {
  autograd::refresh_view(*this);
  KILN_CHECK(requires_grad(), "retain_grad: the tensor does not require grad");
  const autograd::AutogradMeta* m = autograd::find_meta(*this);
  if (m == nullptr || !m->grad_fn) return *this; // a leaf keeps its gradient anyway
  for (const auto& [nr, weak] : m->grad_fn->retained)
    if (nr == m->output_nr && weak.lock() == impl_ptr()) return *this;
  m->grad_fn->retained.emplace_back(m->output_nr, impl_ptr());
  return *this;
}

bool Tensor::is_leaf() const {
  autograd::refresh_view(*this);
  const autograd::AutogradMeta* m = autograd::find_meta(*this);
  return m == nullptr || !m->grad_fn;
}

} // namespace kiln
