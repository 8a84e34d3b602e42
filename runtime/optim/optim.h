// Optimizers, as PyTorch's (torch.optim, single-tensor form): the same update formulas in the
// same order of operations, applied in place to the parameters under NoGradGuard.
//
//   optim::AdamW opt(model.parameters(), optim::AdamWOptions{.lr = 3e-4});
//   loss.backward();
//   opt.step();
//   opt.zero_grad();
//
// Parameter groups take their own options; a parameter without a gradient is skipped. The
// state (momentum buffers, Adam's moments and step counts) is kept per parameter.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace kiln::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0; // added to the gradient (L2), as torch.optim.Adam
};

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2; // decoupled: the parameter shrinks by lr * weight_decay first
};

/// Parameters that share options.
template <typename Options> struct ParamGroup {
  std::vector<Tensor> params;
  Options options;
};

class Optimizer {
public:
  virtual ~Optimizer() = default;
  /// One update of every parameter that has a gradient.
  virtual void step() = 0;
  /// Clears the gradients: undefined (set_to_none, PyTorch's default) or zeroed in place.
  void zero_grad(bool set_to_none = true);
  /// The learning rate of group g (schedulers set it). Under kiln::compile a step reads the
  /// rate from a 0-d tensor that set_lr keeps equal to it, so a replayed step uses the rate of
  /// its call; set_lr inside a compiled function is a graph break (KB010).
  virtual double lr(size_t group = 0) const = 0;
  void set_lr(double lr, size_t group);
  virtual size_t num_groups() const = 0;
  /// Every parameter, group after group.
  std::vector<Tensor> parameters() const;

  /// The state as named tensors ("state.K.NAME" for parameter K in parameters() order, and
  /// "param_groups.G.lr"), for save_safetensors; load_state_dict takes them back (checking
  /// the shapes).
  std::map<std::string, Tensor> state_dict() const;
  void load_state_dict(const std::map<std::string, Tensor>& state);

protected:
  virtual void store_lr(double lr, size_t group) = 0;
  /// Group g's rate as the update reads it: the double eagerly; under a tracer, the 0-d f64
  /// tensor that holds it (a graph input, so a replay reads its current value).
  Tensor lr_tensor(size_t group);

  std::vector<std::vector<Tensor>> groups_;
  std::vector<Tensor> lr_tensors_; // per group, made at the first traced step
  /// Per parameter (by its TensorImpl), its named state tensors.
  std::map<const TensorImpl*, std::map<std::string, Tensor>> state_;
};

class SGD final : public Optimizer {
public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  explicit SGD(std::vector<ParamGroup<SGDOptions>> groups);
  void step() override;
  double lr(size_t group = 0) const override { return options_.at(group).lr; }
  size_t num_groups() const override { return options_.size(); }

private:
  void store_lr(double lr, size_t group) override { options_.at(group).lr = lr; }
  std::vector<SGDOptions> options_;
};

/// Adam (decoupled = false) and AdamW (decoupled = true).
class Adam : public Optimizer {
public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  explicit Adam(std::vector<ParamGroup<AdamOptions>> groups);
  void step() override;
  double lr(size_t group = 0) const override { return options_.at(group).lr; }
  size_t num_groups() const override { return options_.size(); }

protected:
  Adam() = default;
  void store_lr(double lr, size_t group) override { options_.at(group).lr = lr; }
  std::vector<AdamOptions> options_;
  bool decoupled_ = false;
};

class AdamW final : public Adam {
public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  explicit AdamW(std::vector<ParamGroup<AdamWOptions>> groups);
};

/// A learning-rate schedule: step() sets each group's rate for the next epoch from the rate
/// the group had when the scheduler was made, as torch.optim.lr_scheduler's closed forms.
class LRScheduler {
public:
  explicit LRScheduler(Optimizer& opt);
  virtual ~LRScheduler() = default;
  void step();
  double last_lr(size_t group = 0) const { return opt_.lr(group); }

protected:
  /// The rate at `epoch` of a group whose first rate was `base`.
  virtual double lr_at(double base, int64_t epoch) const = 0;

private:
  Optimizer& opt_;
  int64_t epoch_ = 0;
  std::vector<double> base_;
};

/// The rate times gamma every step_size epochs (StepLR).
class StepLR final : public LRScheduler {
public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);

private:
  double lr_at(double base, int64_t epoch) const override;
  int64_t step_size_;
  double gamma_;
};

/// eta_min + (base - eta_min) (1 + cos(pi t / T_max)) / 2 at epoch t (CosineAnnealingLR).
class CosineAnnealingLR final : public LRScheduler {
public:
  CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min = 0);

private:
  double lr_at(double base, int64_t epoch) const override;
  int64_t t_max_;
  double eta_min_;
};

} // namespace kiln::optim

namespace kiln::nn::utils {

/// The joint gradient norm clip_grad_norm_ returns: a 0-d f64 tensor, read on the host only
/// when converted to a double (`double n = clip_grad_norm_(...)`, as libtorch returns it).
/// Unread, nothing waits for it, and inside a compiled step it is no graph break.
class TotalNorm {
public:
  explicit TotalNorm(Tensor norm) : norm_(std::move(norm)) {}
  /// The norm's value (0 when no parameter has a gradient); a host read.
  operator double() const; // NOLINT(google-explicit-constructor): libtorch returns a double
  /// The norm as a 0-d f64 tensor (undefined when no parameter has a gradient).
  const Tensor& tensor() const { return norm_; }

private:
  Tensor norm_;
};

/// Scales the gradients of `params` so that their joint 2-norm is at most max_norm (by
/// max_norm / (norm + 1e-6) clamped to 1, as PyTorch), without reading anything on the host;
/// returns the norm before clipping.
TotalNorm clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

} // namespace kiln::nn::utils
