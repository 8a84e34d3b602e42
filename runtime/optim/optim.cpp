// The optimizers (runtime/optim/optim.h): torch.optim's single-tensor updates.
#include "runtime/optim/optim.h"

#include <cmath>
#include <numbers>

#include "runtime/grad_mode.h"
#include "runtime/ops.h"
#include "runtime/tracing.h"

namespace kiln::optim {
namespace {

template <typename Options>
std::vector<std::vector<Tensor>> params_of(const std::vector<ParamGroup<Options>>& groups,
                                           std::vector<Options>& options) {
  std::vector<std::vector<Tensor>> out;
  for (const ParamGroup<Options>& g : groups) {
    for (const Tensor& p : g.params)
      KILN_CHECK(p.defined() && p.is_leaf() && is_floating(p.dtype()),
                 "optimizer: a parameter must be a floating leaf tensor");
    out.push_back(g.params);
    options.push_back(g.options);
  }
  return out;
}

/// State tensor `name` of p, made by `init` at its first use.
template <typename Init>
Tensor& state_of(std::map<const TensorImpl*, std::map<std::string, Tensor>>& state, const Tensor& p,
                 const std::string& name, Init init) {
  std::map<std::string, Tensor>& s = state[&p.impl()];
  auto it = s.find(name);
  if (it == s.end()) it = s.emplace(name, init()).first;
  return it->second;
}

} // namespace

void Optimizer::zero_grad(bool set_to_none) {
  for (const std::vector<Tensor>& g : groups_)
    for (Tensor p : g) { // a handle: set_grad writes the shared TensorImpl
      if (!p.grad().defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        const NoGradGuard no_grad;
        p.grad().zero_();
      }
    }
}

void Optimizer::set_lr(double lr, size_t group) {
  // A traced step reads the rate from its tensor when the graph runs: the graph so far must run
  // first, with the old rate.
  HostReadScope scope(nullptr, HostRead::host_state);
  store_lr(lr, group);
  if (group < lr_tensors_.size() && lr_tensors_[group].defined()) {
    const NoGradGuard no_grad;
    lr_tensors_[group].fill_(lr);
  }
}

Tensor Optimizer::lr_tensor(size_t group) {
  if (lr_tensors_.size() <= group) lr_tensors_.resize(num_groups());
  Tensor& t = lr_tensors_[group];
  if (!t.defined()) {
    const TracerScope eager(nullptr); // a tensor of the optimizer, not of the trace
    t = scalar_tensor(lr(group), DType::f64);
  }
  return t;
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (const std::vector<Tensor>& g : groups_)
    out.insert(out.end(), g.begin(), g.end());
  return out;
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> out;
  const std::vector<Tensor> params = parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    auto it = state_.find(&params[k].impl());
    if (it == state_.end()) continue;
    for (const auto& [name, t] : it->second)
      out["state." + std::to_string(k) + "." + name] = t.clone();
  }
  for (size_t g = 0; g < num_groups(); ++g)
    out["param_groups." + std::to_string(g) + ".lr"] = scalar_tensor(lr(g), DType::f64);
  return out;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  const std::vector<Tensor> params = parameters();
  for (const auto& [key, t] : state) {
    if (key.rfind("param_groups.", 0) == 0) {
      const size_t dot = key.find('.', 13);
      const size_t g = std::stoul(key.substr(13, dot - 13));
      KILN_CHECK(g < num_groups(), "load_state_dict: ", key, " names group ", g, " of ",
                 num_groups());
      set_lr(t.item<double>(), g);
      continue;
    }
    KILN_CHECK(key.rfind("state.", 0) == 0, "load_state_dict: unexpected key ", key);
    const size_t dot = key.find('.', 6);
    KILN_CHECK(dot != std::string::npos, "load_state_dict: unexpected key ", key);
    const size_t k = std::stoul(key.substr(6, dot - 6));
    KILN_CHECK(k < params.size(), "load_state_dict: ", key, " names parameter ", k, " of ",
               params.size());
    const std::string name = key.substr(dot + 1);
    if (name != "step")
      KILN_CHECK(t.sizes() == params[k].sizes(), "load_state_dict: ", key, " has shape ",
                 shape_str(t.sizes()), ", the parameter ", shape_str(params[k].sizes()));
    state_[&params[k].impl()][name] = t.clone().to(params[k].device());
  }
}

// ---- SGD ----

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(std::vector<ParamGroup<SGDOptions>>{{std::move(params), options}}) {}

SGD::SGD(std::vector<ParamGroup<SGDOptions>> groups) {
  groups_ = params_of(groups, options_);
  for (const SGDOptions& o : options_)
    KILN_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
               "SGD: nesterov needs a momentum and zero dampening");
}

void SGD::step() {
  const NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const SGDOptions& o = options_[g];
    for (Tensor p : groups_[g]) {
      if (!p.grad().defined()) continue;
      Tensor d = p.grad();
      if (o.weight_decay != 0) d = d + p * o.weight_decay;
      if (o.momentum != 0) {
        bool fresh = false;
        Tensor& buf = state_of(state_, p, "momentum_buffer", [&] {
          fresh = true;
          return d.clone();
        });
        if (!fresh) {
          buf.mul_(o.momentum);
          buf.add_(d * (1 - o.dampening));
        }
        d = o.nesterov ? d + buf * o.momentum : buf;
      }
      if (active_tracer() != nullptr)
        p.add_(d * -lr_tensor(g));
      else
        p.add_(d * -o.lr);
    }
  }
}

// ---- Adam, AdamW ----

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(std::vector<ParamGroup<AdamOptions>>{{std::move(params), options}}) {}

Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups) { groups_ = params_of(groups, options_); }

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(std::vector<ParamGroup<AdamWOptions>>{{std::move(params), options}}) {}

AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups) {
  decoupled_ = true;
  for (ParamGroup<AdamWOptions>& g : groups) {
    groups_.push_back(g.params);
    options_.push_back({g.options.lr, g.options.betas, g.options.eps, g.options.weight_decay});
  }
}

void Adam::step() {
  const NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const AdamOptions& o = options_[g];
    const auto [beta1, beta2] = o.betas;
    for (Tensor p : groups_[g]) {
      if (!p.grad().defined()) continue;
      Tensor grad = p.grad();
      Tensor& step = state_of(state_, p, "step", [] { return scalar_tensor(0.0, DType::f64); });
      Tensor& m = state_of(state_, p, "exp_avg", [&] { return zeros_like(p); });
      Tensor& v = state_of(state_, p, "exp_avg_sq", [&] { return zeros_like(p); });
      step.add_(1.0);
      // Traced, the step count and the rate stay tensors (graph inputs: a replay reads their
      // values then); eagerly they are doubles, as in torch.optim.
      const bool traced = active_tracer() != nullptr;
      const Tensor lr = traced ? lr_tensor(g) : Tensor();
      if (decoupled_ && traced)
        p.mul_(1 - lr * o.weight_decay);
      else if (decoupled_)
        p.mul_(1 - o.lr * o.weight_decay);
      else if (o.weight_decay != 0)
        grad = grad + p * o.weight_decay;
      // exp_avg.lerp_(grad, 1 - beta1): exp_avg + (1 - beta1) (grad - exp_avg).
      m.add_((grad - m) * (1 - beta1));
      v.mul_(beta2);
      v.add_(grad * grad * (1 - beta2));
      if (traced) {
        auto bias = [&](double beta) { return 1 - pow(scalar_tensor(beta, DType::f64), step); };
        const Tensor denom = sqrt(v) / sqrt(bias(beta2)) + o.eps;
        p.add_(m / denom * -(lr / bias(beta1)));
        continue;
      }
      const double t = step.item<double>();
      const double bias1 = 1 - std::pow(beta1, t), bias2 = 1 - std::pow(beta2, t);
      const double step_size = o.lr / bias1;
      const Tensor denom = sqrt(v) / std::sqrt(bias2) + o.eps;
      p.add_(m / denom * -step_size);
    }
  }
}

// ---- schedulers ----

LRScheduler::LRScheduler(Optimizer& opt) : opt_(opt) {
  for (size_t g = 0; g < opt.num_groups(); ++g)
    base_.push_back(opt.lr(g));
}

void LRScheduler::step() {
  ++epoch_;
  for (size_t g = 0; g < base_.size(); ++g)
    opt_.set_lr(lr_at(base_[g], epoch_), g);
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma)
    : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  KILN_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
}

double StepLR::lr_at(double base, int64_t epoch) const {
  return base * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min)
    : LRScheduler(opt), t_max_(t_max), eta_min_(eta_min) {
  KILN_CHECK(t_max > 0, "CosineAnnealingLR: T_max must be positive, got ", t_max);
}

double CosineAnnealingLR::lr_at(double base, int64_t epoch) const {
  const double c =
      std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_));
  return eta_min_ + (base - eta_min_) * (1 + c) / 2;
}

} // namespace kiln::optim

namespace kiln::nn::utils {

TotalNorm::operator double() const { return norm_.defined() ? norm_.item<double>() : 0.0; }

TotalNorm clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  const NoGradGuard no_grad;
  // Tensors throughout (as torch's foreach path): nothing is read on the host, so the
  // clipping traces into a compiled step without a break. The sum is taken in f64.
  Tensor total;
  for (const Tensor& p : params)
    if (p.grad().defined()) {
      const Tensor g = p.grad().to(DType::f64);
      const Tensor sq = (g * g).sum();
      total = total.defined() ? total + sq : sq;
    }
  if (!total.defined()) return TotalNorm(Tensor());
  const Tensor norm = sqrt(total);
  // max_norm / (norm + 1e-6), at most 1: gradients under the bound are multiplied by 1.
  const Tensor coef = clamp(max_norm / (norm + 1e-6), std::nullopt, 1.0);
  for (const Tensor& p : params)
    if (p.grad().defined()) p.grad().mul_(coef);
  return TotalNorm(norm);
}

} // namespace kiln::nn::utils
