// `kiln train`: trains a zoo model on its synthetic task (models/train.h), eagerly or as one
// compiled step, printing the loss and step time, and checks the loss reached the task's
// stated value.
#include "models/train.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <sstream>

#include <kiln/kiln.h>

#include "tools/commands.h"
#include "tools/model_args.h"

namespace kiln::tools {
namespace {

constexpr const char* kTrainUsage =
    "usage: kiln train MODEL [--steps N] [--compile] [--mode M] [--optimizer adamw|sgd]\n"
    "                  [--lr X] [--seed N]\n"
    "  Trains MODEL (mlp, gpt) on its synthetic task from fresh weights and prints the loss\n"
    "  and step time (a progress bar on a terminal). Exits 1 when the mean loss of the last\n"
    "  10 steps is above the task's target.\n"
    "  --steps N              steps to train (default: the task's)\n"
    "  --compile              run each step (forward, loss, backward, optimizer step) as one\n"
    "                         compiled function\n"
    "  --mode M               the compile mode (default, reduce_overhead, max_autotune)\n"
    "  --optimizer adamw|sgd  AdamW (weight decay 0.01; the default) or SGD (momentum 0.9)\n"
    "  --lr X                 learning rate (default: the task's)\n"
    "  --seed N               the weights' seed (default 0)\n";

bool parse_double(std::string_view text, double& out) {
  std::istringstream in{std::string(text)};
  in >> out;
  return !in.fail() && in.eof() && out > 0;
}

/// Every tenth of the run on a pipe; on a terminal, a bar redrawn each step.
class TrainProgress {
public:
  explicit TrainProgress(int64_t total) : total_(total), tty_(::isatty(1) != 0) {}
  void step(int64_t done, double loss, double ms) {
    if (tty_) {
      const int width = 30;
      const int filled = static_cast<int>(width * done / std::max<int64_t>(total_, 1));
      std::printf("\r[%s%s] %5lld/%lld  loss %8.4f  %8.2f ms/step",
                  std::string(filled, '#').c_str(), std::string(width - filled, ' ').c_str(),
                  static_cast<long long>(done), static_cast<long long>(total_), loss, ms);
      std::fflush(stdout);
      if (done == total_) std::printf("\n");
      return;
    }
    const int64_t every = std::max<int64_t>(total_ / 10, 1);
    if (done == 1 || done % every == 0 || done == total_)
      std::printf("step %5lld/%lld  loss %8.4f  %8.2f ms/step\n", static_cast<long long>(done),
                  static_cast<long long>(total_), loss, ms);
  }

private:
  int64_t total_;
  bool tty_;
};

} // namespace

int train_main(std::span<const std::string_view> args) {
  std::string model, optimizer = "adamw", mode_name_arg;
  uint64_t steps = 0, seed = 0;
  double lr = 0;
  bool compiled = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kTrainUsage;
      return 0;
    }
    if (a == "--compile") {
      compiled = true;
      continue;
    }
    std::optional<CommandError> err;
    std::string v;
    if (flag_value(args, i, "--steps", v, err)) {
      if (!err && (!parse_uint(v, steps) || steps == 0))
        err = usage_error("--steps expects a positive integer, got '" + v + "'");
    } else if (flag_value(args, i, "--seed", v, err)) {
      if (!err && !parse_uint(v, seed))
        err = usage_error("--seed expects an integer, got '" + v + "'");
    } else if (flag_value(args, i, "--lr", v, err)) {
      if (!err && !parse_double(v, lr))
        err = usage_error("--lr expects a positive number, got '" + v + "'");
    } else if (flag_value(args, i, "--optimizer", v, err)) {
      if (!err && v != "adamw" && v != "sgd")
        err = usage_error("--optimizer expects adamw or sgd, got '" + v + "'");
      optimizer = v;
    } else if (flag_value(args, i, "--mode", v, err)) {
      mode_name_arg = v;
      compiled = true;
    } else if (!a.starts_with("-") && model.empty()) {
      model = std::string(a);
      continue;
    } else {
      return report("train", usage_error("unknown option '" + std::string(a) + "'"));
    }
    if (err) return report("train", *err);
  }
  if (model.empty()) return report("train", usage_error("expected a MODEL (mlp or gpt)"));

  try {
    const zoo::TrainTask& task = zoo::train_task(model);
    const int64_t n = steps > 0 ? static_cast<int64_t>(steps) : task.steps;
    const double rate = lr > 0 ? lr : task.lr;
    CompileOptions co;
    if (!mode_name_arg.empty()) co.mode = parse_mode(mode_name_arg);
    std::shared_ptr<nn::Module> net = task.make(seed, DType::f32);
    std::unique_ptr<optim::Optimizer> opt = zoo::make_optimizer(optimizer, net->parameters(), rate);
    auto step = compile(
        [&](const Tensor& x, const Tensor& y) { return zoo::train_step(*net, *opt, task, x, y); },
        co);
    std::printf("kiln train %s: %s\n", model.c_str(), task.summary.c_str());
    std::printf("%lld steps, %s lr %g, %s\n", static_cast<long long>(n), optimizer.c_str(), rate,
                compiled ? ("compiled (" + std::string(mode_name(co.mode)) + ")").c_str()
                         : "eager");
    TrainProgress progress(n);
    std::vector<double> losses, times;
    for (int64_t s = 0; s < n; ++s) {
      const auto [x, y] = task.batch(s, DType::f32);
      const auto t0 = std::chrono::steady_clock::now();
      const Tensor loss = compiled ? step(x, y) : zoo::train_step(*net, *opt, task, x, y);
      const double value = loss.item<double>();
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      losses.push_back(value);
      times.push_back(ms);
      progress.step(s + 1, value, ms);
      if (!std::isfinite(value))
        return report("train", runtime_error("the loss is not finite at step " +
                                             std::to_string(s + 1) + "; lower --lr"));
    }
    const size_t tail = std::min<size_t>(10, losses.size());
    const double last =
        std::accumulate(losses.end() - static_cast<std::ptrdiff_t>(tail), losses.end(), 0.0) /
        static_cast<double>(tail);
    // The first steps compile: the steady step time is the median of the later ones.
    std::vector<double> steady(times.begin() +
                                   std::min<ptrdiff_t>(2, static_cast<ptrdiff_t>(times.size()) - 1),
                               times.end());
    std::nth_element(steady.begin(), steady.begin() + static_cast<ptrdiff_t>(steady.size() / 2),
                     steady.end());
    std::printf("loss %.4f -> %.4f (mean of the last %zu steps), target %.2f: %s\n", losses.front(),
                last, tail, task.target_loss, last <= task.target_loss ? "reached" : "NOT reached");
    std::printf("step time %.2f ms (median after the first 2 steps)\n", steady[steady.size() / 2]);
    if (compiled) {
      const CompileStats st = step.stats();
      std::printf("compiled: %lld traces, %lld replays, %lld graph breaks, %lld kernels per step, "
                  "%.0f ms compiling\n",
                  static_cast<long long>(st.traces), static_cast<long long>(st.replays),
                  static_cast<long long>(st.breaks), static_cast<long long>(st.kernels),
                  st.compile_ms);
    }
    return last <= task.target_loss ? 0 : 1;
  } catch (const Error& e) {
    return report("train", runtime_error(e.message()));
  }
}

} // namespace kiln::tools
