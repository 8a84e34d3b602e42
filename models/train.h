// Training tasks for the zoo models: a synthetic supervised task per model, generated in code,
// that `kiln train`, `kiln bench train-*` and the tests train on (docs/user-guide.md,
// "Training").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/nn/module.h"
#include "runtime/optim/optim.h"
#include "runtime/tensor.h"

namespace kiln::zoo {

struct TrainTask {
  std::string model;   // the zoo model it trains
  std::string summary; // what the model learns
  /// The defaults of `kiln train MODEL`, and the loss it must reach with them: the mean of
  /// the last 10 steps' losses (the same with --compile).
  int64_t steps = 0;
  double lr = 0;
  double target_loss = 0;
  /// The model in train mode, weights drawn from `seed`, in `dtype`.
  std::function<std::shared_ptr<nn::Module>(uint64_t seed, DType dtype)> make;
  /// Batch number `step` (the same for every run): the model's input (floating inputs in
  /// `dtype`) and the target.
  std::function<std::pair<Tensor, Tensor>(int64_t step, DType dtype)> batch;
  /// The loss of the model's output against the target (a 0-d tensor).
  std::function<Tensor(const Tensor& output, const Tensor& target)> loss;
};

/// The task of zoo model `model` (mlp, gpt); an error naming the models that have one.
const TrainTask& train_task(const std::string& model);
/// The models that have a training task.
std::vector<std::string> train_task_models();

/// The optimizer `kiln train` uses: "adamw" (weight decay 0.01) or "sgd" (momentum 0.9).
std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& name,
                                                 std::vector<Tensor> params, double lr);

/// One training step: zero_grad, forward, loss, backward, the optimizer's step; returns the
/// loss. The same code runs eagerly and under kiln::compile.
Tensor train_step(nn::Module& model, optim::Optimizer& opt, const TrainTask& task,
                  const Tensor& input, const Tensor& target);

} // namespace kiln::zoo
