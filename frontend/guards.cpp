// Guard construction and checking. Checks run in the order of describe(): grad mode, module
// mode, module tensor identity, arguments, captured tensors, host-read versions.
#include "frontend/guards.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "runtime/error.h"
#include "runtime/grad_mode.h"
#include "runtime/shape.h"

namespace kiln::frontend {
namespace {

std::string scalar_str(const Scalar& s) {
  if (s.is_bool()) return s.to_int() ? "true" : "false";
  if (s.is_integral()) return std::to_string(s.to_int());
  std::ostringstream os;
  os.precision(17);
  os << s.to_double();
  return os.str();
}

bool same_scalar(const Scalar& a, const Scalar& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_floating()) {
    double x = a.to_double(), y = b.to_double();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  return a.to_int() == b.to_int();
}

uint64_t scalar_bits(const Scalar& s) {
  if (!s.is_floating()) return static_cast<uint64_t>(s.to_int());
  double d = s.to_double();
  uint64_t bits = 0;
  std::memcpy(&bits, &d, sizeof d);
  return bits;
}

const char* kind_str(const Scalar& s) {
  return s.is_bool() ? "bool" : s.is_integral() ? "int" : "float";
}

template <typename Fn> void each_module_tensor(const nn::Module& m, Fn&& fn) {
  for (auto& [name, p] : m.named_parameters())
    fn(name, p.impl_ptr().get());
  for (auto& [name, b] : m.named_buffers())
    fn(name, b.impl_ptr().get());
}

} // namespace

void GuardSet::alias_pattern(std::span<const detail::CallArg> args, std::vector<int64_t>& arg_alias,
                             std::vector<int64_t>& captured_alias) const {
  arg_alias.assign(args.size(), kNoAlias);
  captured_alias.assign(args.size(), kNoAlias);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_tensor || !args[i].tensor.defined()) continue;
    const auto& st = args[i].tensor.impl().storage;
    if (st == nullptr) continue;
    for (size_t j = 0; j < i; ++j)
      if (args[j].is_tensor && args[j].tensor.defined() && args[j].tensor.impl().storage == st) {
        arg_alias[i] = static_cast<int64_t>(j);
        break;
      }
    for (size_t c = 0; c < captured_.size(); ++c)
      if (captured_[c].tensor->storage == st) {
        captured_alias[i] = static_cast<int64_t>(c);
        break;
      }
  }
}

GuardSet::TensorMetaGuard GuardSet::meta_of(const TensorImpl& t) {
  return {t.dtype, t.sizes, t.strides, t.device, t.requires_grad};
}

std::optional<std::string> GuardSet::compare(const TensorMetaGuard& want, const TensorImpl& got) {
  if (want.dtype != got.dtype) return detail::str("dtype ", want.dtype, " became ", got.dtype);
  if (want.sizes != got.sizes)
    return detail::str("sizes ", shape_str(want.sizes), " became ", shape_str(got.sizes));
  if (want.strides != got.strides)
    return detail::str("strides ", shape_str(want.strides), " became ", shape_str(got.strides));
  if (want.device != got.device) return detail::str("device ", want.device, " became ", got.device);
  if (want.requires_grad != got.requires_grad)
    return detail::str("requires_grad ", want.requires_grad ? "true" : "false", " became ",
                       got.requires_grad ? "true" : "false");
  return std::nullopt;
}

GuardSet GuardSet::build(std::span<const detail::CallArg> args, const nn::Module* module,
                         const TraceSession::Replay* replay,
                         std::span<const HostReadGuard> host_reads,
                         std::span<const ModeReadGuard> mode_reads) {
  GuardSet g;
  g.grad_enabled_ = is_grad_enabled();
  g.modes_.assign(mode_reads.begin(), mode_reads.end());
  if (module != nullptr) {
    g.has_module_ = true;
    for (auto& [name, m] : module->named_modules())
      g.training_.emplace_back(name.empty() ? "<root>" : name, m->is_training());
    each_module_tensor(*module, [&](const std::string& name, const TensorImpl* t) {
      g.module_tensors_.emplace_back(name, t);
    });
  }
  for (const detail::CallArg& a : args) {
    ArgGuard ag;
    ag.is_tensor = a.is_tensor;
    if (a.is_tensor)
      ag.meta = meta_of(a.tensor.impl());
    else
      ag.scalar = a.scalar;
    g.args_.push_back(std::move(ag));
  }
  if (replay != nullptr) {
    for (const InputBinding& b : replay->bindings)
      if (b.kind == InputBinding::Kind::captured)
        g.captured_.push_back({b.captured, b.name, meta_of(*b.captured)});
    g.versions_.assign(host_reads.begin(), host_reads.end());
    g.grads_ = replay->grad_reads;
  }
  g.alias_pattern(args, g.arg_alias_, g.captured_alias_);
  if (module != nullptr) {
    std::vector<const nn::Module*> modules;
    std::vector<const Tensor*> members;
    module->collect(modules, members);
    for (const nn::Module* m : modules) {
      g.flat_modules_.emplace_back(m, m->registrations());
      g.flat_training_.push_back(m->is_training());
    }
    for (const Tensor* t : members)
      g.flat_members_.emplace_back(t, t->defined() ? &t->impl() : nullptr);
  }
  g.flatten();
  return g;
}

void GuardSet::flatten() {
  for (const ArgGuard& a : args_) {
    FlatArg f;
    f.is_tensor = a.is_tensor;
    if (a.is_tensor) {
      f.dtype = a.meta.dtype;
      f.device = a.meta.device;
      f.requires_grad = a.meta.requires_grad;
      f.rank = static_cast<uint32_t>(a.meta.sizes.size());
      f.dims = static_cast<uint32_t>(flat_dims_.size());
      flat_dims_.insert(flat_dims_.end(), a.meta.sizes.begin(), a.meta.sizes.end());
      flat_dims_.insert(flat_dims_.end(), a.meta.strides.begin(), a.meta.strides.end());
    } else {
      f.kind = a.scalar.kind();
      f.bits = scalar_bits(a.scalar);
    }
    flat_args_.push_back(f);
  }
}

std::optional<std::string> GuardSet::check_grad(const TraceSession::Replay::GradRead& g,
                                                std::span<const detail::CallArg> args) {
  const TensorImpl* slot = nullptr;
  if (g.slot.leaf) {
    slot = g.slot.leaf->grad.get();
  } else {
    size_t k = 0;
    for (const detail::CallArg& a : args)
      if (a.is_tensor && k++ == g.slot.argument) slot = a.tensor.impl().grad.get();
  }
  if ((slot != nullptr) != g.defined)
    return detail::str("gradient of ", g.slot.name, ": ", g.defined ? "defined" : "none",
                       " became ", slot != nullptr ? "defined" : "none");
  if (slot == nullptr) return std::nullopt;
  const TensorMeta& m = g.meta;
  if (slot->dtype != m.dtype || slot->sizes != m.sizes || slot->strides != m.strides ||
      slot->device != m.device)
    return detail::str("gradient of ", g.slot.name, ": ", m.dtype, " sizes ", shape_str(m.sizes),
                       " strides ", shape_str(m.strides), " became ", slot->dtype, " sizes ",
                       shape_str(slot->sizes), " strides ", shape_str(slot->strides));
  return std::nullopt;
}

bool GuardSet::same_meta(const TensorMetaGuard& want, const TensorImpl& got) {
  return want.dtype == got.dtype && want.sizes == got.sizes && want.strides == got.strides &&
         want.device == got.device && want.requires_grad == got.requires_grad;
}

bool GuardSet::holds(std::span<const detail::CallArg> args, const nn::Module* module) const {
  if (is_grad_enabled() != grad_enabled_) return false;
  for (const ModeReadGuard& m : modes_)
    if (*m.flag != m.training) return false;
  if (has_module_ != (module != nullptr)) return false;
  for (size_t k = 0; k < flat_modules_.size(); ++k) {
    const auto& [m, registrations] = flat_modules_[k];
    if (m->registrations() != registrations || m->is_training() != flat_training_[k]) return false;
  }
  for (const auto& [member, impl] : flat_members_)
    if ((member->defined() ? &member->impl() : nullptr) != impl) return false;
  if (args.size() != flat_args_.size()) return false;
  for (size_t i = 0; i < args.size(); ++i) {
    const FlatArg& want = flat_args_[i];
    const detail::CallArg& got = args[i];
    if (want.is_tensor != got.is_tensor) return false;
    if (!want.is_tensor) {
      if (got.scalar.kind() != want.kind || scalar_bits(got.scalar) != want.bits) return false;
      continue;
    }
    if (!got.tensor.defined()) return false;
    const TensorImpl& t = got.tensor.impl();
    if (t.dtype != want.dtype || t.device != want.device || t.requires_grad != want.requires_grad ||
        t.sizes.size() != want.rank)
      return false;
    const int64_t* dims = flat_dims_.data() + want.dims;
    for (uint32_t d = 0; d < want.rank; ++d)
      if (t.sizes[d] != dims[d] || t.strides[d] != dims[want.rank + d]) return false;
    // The pattern of memory sharing, as alias_pattern computes it.
    const Storage* st = t.storage.get();
    int64_t alias = kNoAlias, captured = kNoAlias;
    if (st != nullptr) {
      for (size_t j = 0; j < i && alias == kNoAlias; ++j)
        if (args[j].is_tensor && args[j].tensor.defined() &&
            args[j].tensor.impl().storage.get() == st)
          alias = static_cast<int64_t>(j);
      for (size_t c = 0; c < captured_.size() && captured == kNoAlias; ++c)
        if (captured_[c].tensor->storage.get() == st) captured = static_cast<int64_t>(c);
    }
    if (alias != arg_alias_[i] || captured != captured_alias_[i]) return false;
  }
  for (const CapturedGuard& c : captured_)
    if (!same_meta(c.meta, *c.tensor)) return false;
  for (const HostReadGuard& v : versions_)
    if ((v.tensor->storage ? v.tensor->storage->version() : 0) != v.version) return false;
  for (const TraceSession::Replay::GradRead& g : grads_)
    if (check_grad(g, args)) return false;
  return true;
}

std::optional<std::string> GuardSet::check(std::span<const detail::CallArg> args,
                                           const nn::Module* module) const {
  if (is_grad_enabled() != grad_enabled_)
    return detail::str("grad mode: ", grad_enabled_ ? "enabled" : "disabled", " became ",
                       grad_enabled_ ? "disabled" : "enabled");
  for (const ModeReadGuard& m : modes_)
    if (*m.flag != m.training)
      return detail::str("module mode: ", m.name, " was ", m.training ? "train" : "eval", ", now ",
                         *m.flag ? "train" : "eval");
  if (has_module_) {
    size_t k = 0;
    for (auto& [name, m] : module->named_modules()) {
      if (k >= training_.size()) return std::string("module structure: a submodule was added");
      if (m->is_training() != training_[k].second)
        return detail::str("module mode: ", training_[k].first, " was ",
                           training_[k].second ? "train" : "eval", ", now ",
                           m->is_training() ? "train" : "eval");
      ++k;
    }
    if (k != training_.size()) return std::string("module structure: a submodule was removed");
    size_t t = 0;
    std::optional<std::string> changed;
    each_module_tensor(*module, [&](const std::string& name, const TensorImpl* p) {
      if (changed) return;
      if (t >= module_tensors_.size() || module_tensors_[t].second != p)
        changed = detail::str("module tensor identity: ", name,
                              " is another tensor than when traced (re-assigned)");
      ++t;
    });
    if (changed) return changed;
    if (t != module_tensors_.size())
      return std::string("module tensor identity: parameters or buffers were removed");
  }
  if (args.size() != args_.size())
    return detail::str("argument count: ", args_.size(), " became ", args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgGuard& want = args_[i];
    const detail::CallArg& got = args[i];
    if (want.is_tensor != got.is_tensor)
      return detail::str("argument ", i, ": a ", want.is_tensor ? "tensor" : "scalar", " became a ",
                         got.is_tensor ? "tensor" : "scalar");
    if (want.is_tensor) {
      if (!got.tensor.defined()) return detail::str("tensor argument ", i, ": undefined");
      if (auto why = compare(want.meta, got.tensor.impl()))
        return detail::str("tensor argument ", i, ": ", *why);
    } else if (!same_scalar(want.scalar, got.scalar)) {
      return detail::str("scalar argument ", i, ": ", kind_str(want.scalar), " ",
                         scalar_str(want.scalar), " became ", kind_str(got.scalar), " ",
                         scalar_str(got.scalar));
    }
  }
  std::vector<int64_t> arg_alias, captured_alias;
  alias_pattern(args, arg_alias, captured_alias);
  for (size_t i = 0; i < args.size(); ++i) {
    if (arg_alias[i] != arg_alias_[i])
      return detail::str(
          "argument aliasing: tensor argument ", i,
          arg_alias_[i] == kNoAlias ? std::string(" had its own memory")
                                    : detail::str(" shared memory with argument ", arg_alias_[i]),
          ", now ",
          arg_alias[i] == kNoAlias ? std::string("it has its own")
                                   : detail::str("it shares memory with argument ", arg_alias[i]));
    if (captured_alias[i] != captured_alias_[i])
      return detail::str("argument aliasing: tensor argument ", i,
                         " now shares memory with a tensor the function captured, or no longer "
                         "does");
  }
  for (const CapturedGuard& c : captured_)
    if (auto why = compare(c.meta, *c.tensor))
      return detail::str("captured tensor ", c.name.empty() ? "<unnamed>" : c.name, ": ", *why);
  for (const HostReadGuard& v : versions_) {
    uint64_t now = v.tensor->storage ? v.tensor->storage->version() : 0;
    if (now != v.version)
      return detail::str("tensor version: ", v.name.empty() ? "a captured tensor" : v.name, " ",
                         v.why, " while tracing was modified in place (version ", v.version,
                         " became ", now, ")");
  }
  for (const TraceSession::Replay::GradRead& g : grads_)
    if (auto why = check_grad(g, args)) return why;
  return std::nullopt;
}

std::vector<std::string> GuardSet::describe() const {
  std::vector<std::string> out;
  out.push_back(detail::str("grad mode is ", grad_enabled_ ? "enabled" : "disabled"));
  bool uniform = std::all_of(training_.begin(), training_.end(),
                             [&](const auto& m) { return m.second == training_[0].second; });
  if (uniform && training_.size() > 1)
    out.push_back(detail::str("module <root> and its ", training_.size() - 1,
                              " submodules are all in ", training_[0].second ? "train" : "eval",
                              " mode"));
  else
    for (auto& [name, training] : training_)
      out.push_back(detail::str("module ", name, " is in ", training ? "train" : "eval", " mode"));
  if (training_.empty())
    for (const ModeReadGuard& m : modes_)
      out.push_back(detail::str("module ", m.name, " (whose mode the code read) is in ",
                                m.training ? "train" : "eval", " mode"));
  if (has_module_)
    out.push_back(detail::str("module parameters and buffers are the same ", module_tensors_.size(),
                              " tensors (identity)"));
  for (size_t i = 0; i < args_.size(); ++i) {
    const ArgGuard& a = args_[i];
    if (a.is_tensor)
      out.push_back(detail::str("tensor argument ", i, ": ", a.meta.dtype, " sizes ",
                                shape_str(a.meta.sizes), " strides ", shape_str(a.meta.strides),
                                " on ", a.meta.device,
                                a.meta.requires_grad ? ", requires_grad" : ""));
    else
      out.push_back(detail::str("scalar argument ", i, " == ", kind_str(a.scalar), " ",
                                scalar_str(a.scalar)));
  }
  for (size_t i = 0; i < arg_alias_.size(); ++i)
    if (arg_alias_[i] != kNoAlias)
      out.push_back(
          detail::str("tensor argument ", i, " shares memory with argument ", arg_alias_[i]));
  for (const CapturedGuard& c : captured_)
    out.push_back(detail::str("captured tensor ", c.name.empty() ? "<unnamed>" : c.name, ": ",
                              c.meta.dtype, " sizes ", shape_str(c.meta.sizes)));
  for (const HostReadGuard& v : versions_)
    out.push_back(detail::str("tensor ", v.name.empty() ? "<unnamed>" : v.name, " (", v.why,
                              ") is at version ", v.version));
  for (const TraceSession::Replay::GradRead& g : grads_)
    out.push_back(g.defined ? detail::str("gradient of ", g.slot.name, ": ", g.meta.dtype,
                                          " sizes ", shape_str(g.meta.sizes))
                            : detail::str("gradient of ", g.slot.name, " is none"));
  return out;
}

} // namespace kiln::frontend
