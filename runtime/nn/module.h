// nn::Module: the base of every layer and model; owns the registry of parameters, buffers
// and child modules that named_parameters, state_dict, train/eval and to() walk.
#pragma once

#include <concepts>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace kiln::nn {

/// What load_state_dict found besides the tensors it loaded (PyTorch's
/// _IncompatibleKeys): entries of the model absent from the map, and map entries the model
/// does not have.
struct LoadReport {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
  /// True when every key matched.
  bool ok() const { return missing_keys.empty() && unexpected_keys.empty(); }
};

/// A module's state by PyTorch's dotted names ("blocks.0.ln1.weight"), sorted by name.
using StateDict = std::map<std::string, Tensor>;

/// Base class of layers and models. A subclass holds its parameters as public Tensor members
/// and its sub-layers as members (or shared_ptr for containers) and registers each one in its
/// constructor:
///
///   struct MLP : nn::Module {
///     nn::Linear fc1{784, 256}, fc2{256, 10};
///     MLP() { register_module("fc1", fc1); register_module("fc2", fc2); }
///     Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
///   };
///
/// The registry stores pointers to the members, so a module is neither copyable nor movable
/// (every registered member stays where it was constructed). Registered members must outlive
/// the module: register members, or shared_ptrs (which the module then co-owns).
class Module {
public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = delete;
  Module& operator=(Module&&) = delete;

  // ---- the forward pass ----
  /// The forward pass of a single-input module; throws unless a subclass overrides it.
  /// Modules with several inputs define their own forward (and call it directly).
  virtual Tensor forward(const Tensor& x);
  /// m(x) is m.forward(x).
  Tensor operator()(const Tensor& x) { return forward(x); }

  // ---- registration (call from the subclass constructor) ----
  /// Registers a trainable tensor member; floating parameters get requires_grad. An
  /// undefined tensor (a disabled bias) is allowed and skipped everywhere, like PyTorch's None.
  Tensor& register_parameter(const std::string& name, Tensor& param);
  /// Registers non-trainable state saved in the state dict (running statistics).
  Tensor& register_buffer(const std::string& name, Tensor& buffer);
  /// Registers a sub-module member; its state appears under "name.".
  template <typename M>
  requires std::derived_from<M, Module> M& register_module(const std::string& name, M& module) {
    add_child(name, &module, nullptr);
    return module;
  }
  /// Registers a shared sub-module; this module co-owns it.
  template <typename M>
  requires std::derived_from<M, Module> std::shared_ptr<M>
  register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module.get(), module);
    return module;
  }

  // ---- traversal (registration order; nested names are dotted, as PyTorch) ----
  /// Parameters of this module, then of each child in turn; a tensor registered twice (tied
  /// weights) is listed once, under its first name.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// Direct sub-modules.
  std::vector<std::pair<std::string, Module*>> named_children() const;
  std::vector<Module*> children() const;
  /// This module (named "") and every descendant, depth first.
  std::vector<std::pair<std::string, Module*>> named_modules() const;
  /// What the guards of a compiled call compare without building names or allocating: this
  /// module and its descendants in named_modules' order, and every registered parameter and
  /// buffer member (undefined ones too) of the tree. Appends to both.
  void collect(std::vector<const Module*>& modules, std::vector<const Tensor*>& members) const;
  /// Parameters, buffers and children registered here (not in descendants): a change means
  /// the module's structure changed.
  size_t registrations() const { return params_.size() + buffers_.size() + children_.size(); }

  // ---- mode ----
  /// Sets training mode here and in every descendant (dropout, batch norm statistics).
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  /// Under kiln::compile, reading the mode is recorded: the compiled entry is guarded on it.
  bool is_training() const;

  // ---- conversion ----
  /// Converts floating parameters and buffers to dtype (integer buffers such as
  /// num_batches_tracked keep theirs). The members are re-bound to the converted tensors and
  /// keep their requires_grad flag; tensors taken from the module earlier keep the old data.
  Module& to(DType dtype);
  /// Moves every parameter and buffer to the device (members re-bound as for to(DType)).
  Module& to(Device device);
  /// Drops the gradient of every parameter.
  void zero_grad();

  // ---- state ----
  /// Parameters and buffers by their dotted names (shared with the module, not copies).
  StateDict state_dict() const;
  /// Copies the map's tensors into the registered members in place (casting to their dtype),
  /// so tensors already taken from the module see the new values. A shape mismatch is always
  /// an error naming the key and both shapes; with strict, so is any missing or unexpected key.
  /// Nothing is written unless every check passes.
  LoadReport load_state_dict(const StateDict& state, bool strict = true);

  // ---- identity ----
  /// The checked downcast: b->as<Block>() is the Block, or a kiln::Error naming both types.
  template <typename T> T* as() {
    if (auto* p = dynamic_cast<T*>(this)) return p;
    throw_bad_cast(typeid(T));
  }
  template <typename T> const T* as() const {
    if (auto* p = dynamic_cast<const T*>(this)) return p;
    throw_bad_cast(typeid(T));
  }
  /// The class name without namespaces ("Linear", "MLP").
  std::string name() const;
  /// The text inside the parentheses of this module's repr ("in_features=4, ...").
  virtual std::string extra_repr() const { return {}; }

private:
  struct Child {
    std::string name;
    Module* module;
    std::shared_ptr<Module> owner; // null for a member
  };

  void add_child(const std::string& name, Module* module, std::shared_ptr<Module> owner);
  void check_new_name(const std::string& name, const char* what) const;
  [[noreturn]] void throw_bad_cast(const std::type_info& wanted) const;
  /// Re-binds every parameter and buffer member of the tree for which `wanted` holds to
  /// `convert` of it (detached; requires_grad kept).
  void convert_tensors(const std::function<bool(const Tensor&)>& wanted,
                       const std::function<Tensor(const Tensor&)>& convert);
  /// Visits every registered (name, member) pair of parameters or buffers, recursively.
  template <typename Fn>
  void visit_tensors(bool params, bool recurse, const std::string& prefix, Fn&& fn) const;

  std::vector<std::pair<std::string, Tensor*>> params_;
  std::vector<std::pair<std::string, Tensor*>> buffers_;
  std::vector<Child> children_;
  std::shared_ptr<bool> training_ = std::make_shared<bool>(true);
};

/// PyTorch's module repr: "MLP(\n  (fc1): Linear(in_features=784, ...)\n  ...\n)".
std::ostream& operator<<(std::ostream& os, const Module& m);

} // namespace kiln::nn
