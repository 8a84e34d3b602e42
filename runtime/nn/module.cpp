// nn::Module: registration, recursive traversal, train/eval, to(), state dicts, repr.
#include "runtime/nn/module.h"

#include <cxxabi.h>

#include <cstdlib>
#include <functional>
#include <ostream>
#include <set>
#include <sstream>

#include "runtime/error.h"
#include "runtime/tracing.h"

namespace kiln::nn {
namespace {

std::string demangle(const std::type_info& t) {
  int status = 0;
  char* s = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && s ? s : t.name();
  std::free(s);
  return out;
}

/// "kiln::nn::Linear" → "Linear"; template arguments keep their namespaces.
std::string short_name(const std::string& full) {
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    char c = full[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth == 0 && c == ':' && i + 1 < full.size() && full[i + 1] == ':') start = i + 2;
  }
  return full.substr(start);
}

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) out += ", ";
    out += '"';
    out += keys[i];
    out += '"';
  }
  return out;
}

} // namespace

Tensor Module::forward(const Tensor&) {
  throw Error(detail::str("forward: ", name(),
                          " does not define forward(const Tensor&); call its "
                          "own forward with the inputs it takes"));
}

void Module::check_new_name(const std::string& name, const char* what) const {
  KILN_CHECK(!name.empty(), what, ": the name is empty (in ", this->name(), ")");
  KILN_CHECK(name.find('.') == std::string::npos, what, ": name \"", name,
             "\" contains \".\", which separates nested names (in ", this->name(), ")");
  auto taken = [&](const auto& list) {
    for (const auto& entry : list)
      if (entry.first == name) return true;
    return false;
  };
  bool child = false;
  for (const Child& c : children_)
    child = child || c.name == name;
  KILN_CHECK(!taken(params_) && !taken(buffers_) && !child, what, ": \"", name,
             "\" is already registered in ", this->name());
}

Tensor& Module::register_parameter(const std::string& name, Tensor& param) {
  check_new_name(name, "register_parameter");
  // nn.Parameter requires grad by default; integer parameters cannot.
  if (param.defined() && is_floating(param.dtype())) param.requires_grad_(true);
  params_.emplace_back(name, &param);
  return param;
}

Tensor& Module::register_buffer(const std::string& name, Tensor& buffer) {
  check_new_name(name, "register_buffer");
  buffers_.emplace_back(name, &buffer);
  return buffer;
}

void Module::add_child(const std::string& name, Module* module, std::shared_ptr<Module> owner) {
  check_new_name(name, "register_module");
  KILN_CHECK(module != nullptr, "register_module: module \"", name, "\" is null (in ", this->name(),
             ")");
  KILN_CHECK(module != this, "register_module: ", this->name(), " cannot be its own child \"", name,
             "\"");
  children_.push_back({name, module, std::move(owner)});
}

template <typename Fn>
void Module::visit_tensors(bool params, bool recurse, const std::string& prefix, Fn&& fn) const {
  for (const auto& [name, ptr] : params ? params_ : buffers_)
    if (ptr->defined()) fn(prefix + name, *ptr);
  if (!recurse) return;
  for (const Child& c : children_)
    c.module->visit_tensors(params, true, prefix + c.name + ".", fn);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::set<const TensorImpl*> seen;
  visit_tensors(true, recurse, "", [&](const std::string& n, Tensor& t) {
    if (seen.insert(&t.impl()).second) out.emplace_back(n, t);
  });
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse))
    out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::set<const TensorImpl*> seen;
  visit_tensors(false, recurse, "", [&](const std::string& n, Tensor& t) {
    if (seen.insert(&t.impl()).second) out.emplace_back(n, t);
  });
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse))
    out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_children() const {
  std::vector<std::pair<std::string, Module*>> out;
  for (const Child& c : children_)
    out.emplace_back(c.name, c.module);
  return out;
}

std::vector<Module*> Module::children() const {
  std::vector<Module*> out;
  for (const Child& c : children_)
    out.push_back(c.module);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, Module*>> out{{"", const_cast<Module*>(this)}};
  for (const Child& c : children_)
    for (auto& [n, m] : c.module->named_modules())
      out.emplace_back(n.empty() ? c.name : c.name + "." + n, m);
  return out;
}

void Module::collect(std::vector<const Module*>& modules,
                     std::vector<const Tensor*>& members) const {
  modules.push_back(this);
  for (const auto& [name, ptr] : params_)
    members.push_back(ptr);
  for (const auto& [name, ptr] : buffers_)
    members.push_back(ptr);
  for (const Child& c : children_)
    c.module->collect(modules, members);
}

bool Module::is_training() const {
  if (Tracer* t = active_tracer()) [[unlikely]]
    t->module_mode_read(*this, training_);
  return *training_;
}

Module& Module::train(bool on) {
  *training_ = on;
  for (const Child& c : children_)
    c.module->train(on);
  return *this;
}

Module& Module::to(DType dtype) {
  convert_tensors([&](const Tensor& t) { return is_floating(t.dtype()) && t.dtype() != dtype; },
                  [&](const Tensor& t) { return t.to(dtype); });
  return *this;
}

Module& Module::to(Device device) {
  convert_tensors([&](const Tensor& t) { return t.device() != device; },
                  [&](const Tensor& t) { return t.to(device); });
  return *this;
}

void Module::convert_tensors(const std::function<bool(const Tensor&)>& wanted,
                             const std::function<Tensor(const Tensor&)>& convert) {
  // One conversion per tensor, so tied members stay tied (PyTorch converts param.data in
  // place for the same reason). The old tensors stay alive in the map so no address repeats.
  std::map<const TensorImpl*, std::pair<Tensor, Tensor>> done;
  auto visit = [&](const std::string&, Tensor& member) {
    if (!wanted(member)) return;
    auto [it, fresh] = done.try_emplace(&member.impl());
    if (fresh) {
      Tensor converted = convert(member.detach());
      if (member.requires_grad()) converted.requires_grad_(true);
      it->second = {member, converted};
    }
    member = it->second.second;
  };
  visit_tensors(true, true, "", visit);
  visit_tensors(false, true, "", visit);
}

void Module::zero_grad() {
  for (auto& [n, p] : named_parameters())
    p.set_grad(Tensor());
}

StateDict Module::state_dict() const {
  StateDict out;
  // PyTorch keeps both names of a tied tensor in the state dict.
  visit_tensors(true, true, "", [&](const std::string& n, Tensor& t) { out.emplace(n, t); });
  visit_tensors(false, true, "", [&](const std::string& n, Tensor& t) { out.emplace(n, t); });
  return out;
}

LoadReport Module::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::pair<std::string, Tensor*>> targets;
  auto collect = [&](const std::string& n, Tensor& t) { targets.emplace_back(n, &t); };
  visit_tensors(true, true, "", collect);
  visit_tensors(false, true, "", collect);

  LoadReport report;
  std::set<std::string> expected;
  std::string mismatches;
  for (const auto& [key, member] : targets) {
    expected.insert(key);
    auto it = state.find(key);
    if (it == state.end()) {
      report.missing_keys.push_back(key);
      continue;
    }
    KILN_CHECK(it->second.defined(), "load_state_dict: the tensor for \"", key, "\" is undefined");
    if (it->second.sizes() != member->sizes())
      mismatches += detail::str("\n  size mismatch for ", key, ": copying a tensor of shape ",
                                shape_str(it->second.sizes()), " from the state dict, the ",
                                "shape in the model is ", shape_str(member->sizes()));
  }
  for (const auto& [key, t] : state)
    if (!expected.count(key)) report.unexpected_keys.push_back(key);

  std::string errors = mismatches;
  if (strict && !report.missing_keys.empty())
    errors += "\n  missing keys: " + join_keys(report.missing_keys);
  if (strict && !report.unexpected_keys.empty())
    errors += "\n  unexpected keys: " + join_keys(report.unexpected_keys);
  KILN_CHECK(errors.empty(), "load_state_dict: error(s) loading the state dict of ", name(), ":",
             errors);

  for (const auto& [key, member] : targets) {
    auto it = state.find(key);
    if (it == state.end()) continue;
    // Write through a detached view: the same storage (so every holder of the parameter sees
    // the values and its version bumps), without recording the copy for autograd.
    // The explicit cast allows any dtype pair, as param.copy_ does in PyTorch.
    Tensor dst = member->detach();
    dst.copy_(it->second.to(dst.dtype()));
  }
  return report;
}

std::string Module::name() const { return short_name(demangle(typeid(*this))); }

void Module::throw_bad_cast(const std::type_info& wanted) const {
  throw Error(
      detail::str("as: the module is a ", demangle(typeid(*this)), ", not a ", demangle(wanted)));
}

namespace {

void print_module(std::ostream& os, const Module& m, int indent) {
  os << m.name() << "(";
  auto kids = m.named_children();
  if (kids.empty()) {
    os << m.extra_repr() << ")";
    return;
  }
  std::string pad(static_cast<size_t>(indent + 2), ' ');
  if (!m.extra_repr().empty()) os << "\n" << pad << m.extra_repr();
  for (auto& [n, c] : kids) {
    os << "\n" << pad << "(" << n << "): ";
    print_module(os, *c, indent + 2);
  }
  os << "\n" << std::string(static_cast<size_t>(indent), ' ') << ")";
}

} // namespace

std::ostream& operator<<(std::ostream& os, const Module& m) {
  std::ostringstream s;
  print_module(s, m, 0);
  return os << s.str();
}

} // namespace kiln::nn
