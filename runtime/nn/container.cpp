// nn::ModuleList and nn::Sequential: registration by index, bounds checks, chained forward.
#include "runtime/nn/container.h"

#include <string>

namespace kiln::nn {

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules)
    push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  KILN_CHECK(module != nullptr, name(), ".push_back: the module is null");
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

const std::shared_ptr<Module>& ModuleList::operator[](int64_t i) const {
  auto n = static_cast<int64_t>(modules_.size());
  KILN_CHECK(i >= -n && i < n, name(), ": index ", i, " is out of range for ", n, " modules");
  return modules_[static_cast<size_t>(i < 0 ? i + n : i)];
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& m : *this)
    y = m->forward(y);
  return y;
}

} // namespace kiln::nn
