// The training tasks (models/train.h).
#include "models/train.h"

#include <algorithm>
#include <random>

#include "models/zoo.h"
#include "runtime/error.h"
#include "runtime/grad_mode.h"
#include "runtime/ops.h"
#include "runtime/random.h"

namespace kiln::zoo {
namespace {

/// A TrainTask::make for a zoo model: its spec's weights, in the dtype, in train mode.
std::function<std::shared_ptr<nn::Module>(uint64_t, DType)> trainable(ModelSpec (*spec)()) {
  return [spec](uint64_t seed, DType dtype) {
    std::shared_ptr<nn::Module> m = spec().make(seed);
    m->to(dtype);
    m->train();
    return m;
  };
}

// ---- mlp: a fixed random classification set ----

constexpr int64_t kMlpExamples = 2048, kMlpBatch = 64;

/// 2048 points of N(0, 1)^784, each labelled by which of 10 fixed random directions it points
/// along most (argmax of x W for a random teacher W): a separable 10-class problem.
const std::pair<Tensor, Tensor>& mlp_data() {
  static const std::pair<Tensor, Tensor> data = [] {
    const NoGradGuard no_grad;
    manual_seed(20261206);
    const Tensor x = randn({kMlpExamples, 784});
    const Tensor teacher = randn({784, 10});
    return std::pair{x, argmax(matmul(x, teacher), 1)};
  }();
  return data;
}

TrainTask mlp_task() {
  TrainTask t;
  t.model = "mlp";
  t.summary = "10-class classification of 2048 random points labelled by a random linear "
              "teacher (batches of 64)";
  t.steps = 200;
  t.lr = 1e-3;
  t.target_loss = 0.05;
  t.make = trainable(mlp_spec);
  t.batch = [](int64_t step, DType dtype) {
    const auto& [x, y] = mlp_data();
    const int64_t at = (step * kMlpBatch) % kMlpExamples;
    return std::pair{x.slice(0, at, at + kMlpBatch).to(dtype), y.slice(0, at, at + kMlpBatch)};
  };
  t.loss = [](const Tensor& logits, const Tensor& y) { return cross_entropy(logits, y); };
  return t;
}

// ---- gpt: sorting short token lists ----

constexpr int64_t kSortLength = 8, kSortVocab = 16, kGptBatch = 16;

TrainTask gpt_task() {
  TrainTask t;
  t.model = "gpt";
  t.summary = "sorting: 8 tokens from 16, then the same tokens sorted; the loss counts the 8 "
              "sorted positions (batches of 16)";
  t.steps = 400;
  t.lr = 3e-3;
  t.target_loss = 0.4;
  t.make = trainable(gpt_spec);
  t.batch = [](int64_t step, DType) {
    // Drawn on the host from the step number: the same batches on every run and machine.
    std::mt19937_64 gen(static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull + 1);
    std::vector<int64_t> input, target;
    for (int64_t b = 0; b < kGptBatch; ++b) {
      std::vector<int64_t> seq(kSortLength);
      for (int64_t& v : seq)
        v = static_cast<int64_t>(gen() % kSortVocab);
      std::vector<int64_t> sorted = seq;
      std::sort(sorted.begin(), sorted.end());
      seq.insert(seq.end(), sorted.begin(), sorted.end());
      // Position i predicts token i + 1; only the sorted half is scored.
      for (int64_t i = 0; i + 1 < 2 * kSortLength; ++i) {
        input.push_back(seq[static_cast<size_t>(i)]);
        target.push_back(i + 1 >= kSortLength ? seq[static_cast<size_t>(i + 1)] : -100);
      }
    }
    const int64_t len = 2 * kSortLength - 1;
    return std::pair{tensor(input, {kGptBatch, len}), tensor(target, {kGptBatch, len})};
  };
  t.loss = [](const Tensor& logits, const Tensor& y) {
    return cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
  };
  return t;
}

const std::vector<TrainTask>& tasks() {
  static const std::vector<TrainTask> all = {mlp_task(), gpt_task()};
  return all;
}

} // namespace

const TrainTask& train_task(const std::string& model) {
  for (const TrainTask& t : tasks())
    if (t.model == model) return t;
  std::string names;
  for (const TrainTask& t : tasks())
    names += (names.empty() ? "" : ", ") + t.model;
  throw Error::without_location("no training task for model '" + model +
                                "'; models with one: " + names);
}

std::vector<std::string> train_task_models() {
  std::vector<std::string> out;
  for (const TrainTask& t : tasks())
    out.push_back(t.model);
  return out;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& name,
                                                 std::vector<Tensor> params, double lr) {
  if (name == "adamw")
    return std::make_unique<optim::AdamW>(std::move(params),
                                          optim::AdamWOptions{.lr = lr, .weight_decay = 0.01});
  if (name == "sgd")
    return std::make_unique<optim::SGD>(std::move(params),
                                        optim::SGDOptions{.lr = lr, .momentum = 0.9});
  throw Error::without_location("unknown optimizer '" + name + "'; expected adamw or sgd");
}

Tensor train_step(nn::Module& model, optim::Optimizer& opt, const TrainTask& task,
                  const Tensor& input, const Tensor& target) {
  opt.zero_grad();
  Tensor loss = task.loss(model.forward(input), target);
  loss.backward();
  opt.step();
  return loss;
}

} // namespace kiln::zoo
