// nn::Sequential and nn::ModuleList: ordered containers of shared sub-modules named "0", "1", ...
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "runtime/nn/module.h"

namespace kiln::nn {

/// A list of modules registered as children "0", "1", ... (state names "blocks.0.weight").
/// It has no forward; iterate it and call each element.
class ModuleList : public Module {
public:
  ModuleList() = default;
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);

  /// Appends and registers a module under the next index.
  void push_back(std::shared_ptr<Module> module);
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  /// The i-th module; negative i counts from the end; out of range is an error.
  const std::shared_ptr<Module>& operator[](int64_t i) const;
  const std::shared_ptr<Module>& at(int64_t i) const { return (*this)[i]; }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

private:
  std::vector<std::shared_ptr<Module>> modules_;
};

/// Runs its modules in order, each on the previous one's output; every element must have a
/// single-input forward.
class Sequential : public ModuleList {
public:
  using ModuleList::ModuleList;
  Tensor forward(const Tensor& x) override;
};

} // namespace kiln::nn
