// Optimizers (runtime/optim/optim.h) against torch.optim's formulas written out here per
// element in double, over several steps with changing gradients; schedulers; clipping; and a
// small model trained with autograd.
#include <catch2/catch.hpp>
#include <cmath>
#include <numbers>

#include <kiln/kiln.h>

#include "runtime/optim/optim.h"

using namespace kiln;

namespace {

/// The gradient of step s for element i (deterministic, signs vary).
double grad_at(int s, size_t i) { return std::sin(1.3 * static_cast<double>(i) + 0.7 * s) * 0.5; }

Tensor param(const std::vector<double>& v) { return tensor(v).requires_grad_(); }

void set_grads(std::vector<Tensor>& ps, int s) {
  for (Tensor& p : ps) {
    std::vector<double> g;
    for (size_t i = 0; i < static_cast<size_t>(p.numel()); ++i)
      g.push_back(grad_at(s, i));
    p.set_grad(tensor(g));
  }
}

void check_close(const Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = got.to_vector<double>();
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": " << g[i] << " vs " << want[i]);
    CHECK(std::abs(g[i] - want[i]) <= 1e-12 * std::max(1.0, std::abs(want[i])));
  }
}

const std::vector<double> kStart = {0.5, -1.25, 2.0, 0.0};

} // namespace

TEST_CASE("optim: SGD with momentum, dampening, nesterov and weight decay as torch.optim",
          "[optim]") {
  for (auto [momentum, dampening, nesterov, wd] :
       {std::tuple{0.0, 0.0, false, 0.0}, std::tuple{0.9, 0.1, false, 0.01},
        std::tuple{0.9, 0.0, true, 0.05}}) {
    INFO("momentum " << momentum << " nesterov " << nesterov);
    std::vector<Tensor> ps = {param(kStart)};
    optim::SGD opt(ps, optim::SGDOptions{.lr = 0.1,
                                         .momentum = momentum,
                                         .dampening = dampening,
                                         .weight_decay = wd,
                                         .nesterov = nesterov});
    std::vector<double> p = kStart, buf(p.size());
    for (int s = 0; s < 4; ++s) {
      set_grads(ps, s);
      opt.step();
      for (size_t i = 0; i < p.size(); ++i) {
        double d = grad_at(s, i);
        if (wd != 0) d = d + p[i] * wd;
        if (momentum != 0) {
          buf[i] = s == 0 ? d : buf[i] * momentum + d * (1 - dampening);
          d = nesterov ? d + buf[i] * momentum : buf[i];
        }
        p[i] = p[i] + d * -0.1;
      }
      check_close(ps[0], p);
    }
  }
}

TEST_CASE("optim: Adam and AdamW as torch.optim", "[optim]") {
  for (bool decoupled : {false, true}) {
    INFO((decoupled ? "AdamW" : "Adam"));
    std::vector<Tensor> ps = {param(kStart)};
    std::unique_ptr<optim::Optimizer> opt;
    if (decoupled)
      opt = std::make_unique<optim::AdamW>(
          ps,
          optim::AdamWOptions{.lr = 0.01, .betas = {0.8, 0.95}, .eps = 1e-6, .weight_decay = 0.1});
    else
      opt = std::make_unique<optim::Adam>(
          ps,
          optim::AdamOptions{.lr = 0.01, .betas = {0.8, 0.95}, .eps = 1e-6, .weight_decay = 0.1});
    std::vector<double> p = kStart, m(p.size()), v(p.size());
    for (int s = 0; s < 5; ++s) {
      set_grads(ps, s);
      opt->step();
      const double t = s + 1;
      for (size_t i = 0; i < p.size(); ++i) {
        double g = grad_at(s, i);
        if (decoupled)
          p[i] = p[i] * (1 - 0.01 * 0.1);
        else
          g = g + p[i] * 0.1;
        m[i] = m[i] + (g - m[i]) * (1 - 0.8);
        v[i] = v[i] * 0.95 + g * g * (1 - 0.95);
        const double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(0.95, t)) + 1e-6;
        p[i] = p[i] + m[i] / denom * -(0.01 / (1 - std::pow(0.8, t)));
      }
      check_close(ps[0], p);
    }
    // The state round-trips: a copy continued from it takes the same steps.
    const std::map<std::string, Tensor> state = opt->state_dict();
    CHECK(state.count("state.0.exp_avg") == 1);
    CHECK(state.at("state.0.step").item<double>() == 5);
    std::vector<Tensor> qs = {ps[0].detach().clone().requires_grad_()};
    optim::Adam copy_adam(
        qs, optim::AdamOptions{.lr = 0.01, .betas = {0.8, 0.95}, .eps = 1e-6, .weight_decay = 0.1});
    optim::AdamW copy_adamw(
        qs,
        optim::AdamWOptions{.lr = 0.01, .betas = {0.8, 0.95}, .eps = 1e-6, .weight_decay = 0.1});
    optim::Optimizer& copy = decoupled ? static_cast<optim::Optimizer&>(copy_adamw) : copy_adam;
    copy.load_state_dict(state);
    set_grads(ps, 5);
    set_grads(qs, 5);
    opt->step();
    copy.step();
    CHECK(ps[0].to_vector<double>() == qs[0].to_vector<double>());
  }
}

TEST_CASE("optim: groups, zero_grad, schedulers and gradient clipping", "[optim]") {
  Tensor a = param({1.0, 2.0}), b = param({3.0});
  optim::SGD opt({{{a}, optim::SGDOptions{.lr = 0.1}}, {{b}, optim::SGDOptions{.lr = 1.0}}});
  a.set_grad(tensor(std::vector<double>{1.0, 1.0}));
  b.set_grad(tensor(std::vector<double>{1.0}));
  opt.step();
  check_close(a, {0.9, 1.9});
  check_close(b, {2.0});
  opt.zero_grad(false);
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0.0, 0.0});
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  opt.step(); // nothing to do without gradients
  check_close(a, {0.9, 1.9});

  optim::StepLR step_lr(opt, 2, 0.5);
  std::vector<double> lrs;
  for (int k = 0; k < 4; ++k) {
    step_lr.step();
    lrs.push_back(opt.lr(0));
  }
  check_close(tensor(lrs), {0.1, 0.05, 0.05, 0.025});
  CHECK(opt.lr(1) == 0.25);
  optim::SGD opt2({a}, optim::SGDOptions{.lr = 1.0});
  optim::CosineAnnealingLR cosine(opt2, 4, 0.1);
  cosine.step();
  CHECK(std::abs(opt2.lr() - (0.1 + 0.9 * (1 + std::cos(std::numbers::pi / 4)) / 2)) < 1e-15);
  for (int k = 0; k < 3; ++k)
    cosine.step();
  CHECK(std::abs(opt2.lr() - 0.1) < 1e-15);

  a.set_grad(tensor(std::vector<double>{3.0, 0.0}));
  b.set_grad(tensor(std::vector<double>{4.0}));
  CHECK(nn::utils::clip_grad_norm_({a, b}, 1.0) == 5.0);
  check_close(a.grad(), {3.0 / (5.0 + 1e-6), 0.0});
  check_close(b.grad(), {4.0 / (5.0 + 1e-6)});
  CHECK(nn::utils::clip_grad_norm_({a, b}, 10.0) < 1.0); // the norm after the first clip
}

TEST_CASE("optim: a model trained with autograd and AdamW fits its data", "[optim]") {
  manual_seed(0);
  nn::Sequential net;
  net.push_back(std::make_shared<nn::Linear>(4, 16));
  net.push_back(std::make_shared<nn::ReLU>());
  net.push_back(std::make_shared<nn::Linear>(16, 1));
  const Tensor x = randn({64, 4});
  const Tensor y = (x * tensor(std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f})).sum({1}, true);
  optim::AdamW opt(net.parameters(), optim::AdamWOptions{.lr = 0.02, .weight_decay = 0.0});
  double first = 0, last = 0;
  for (int s = 0; s < 200; ++s) {
    opt.zero_grad();
    Tensor loss = mse_loss(net.forward(x), y);
    loss.backward();
    opt.step();
    (s == 0 ? first : last) = loss.item<double>();
  }
  INFO("loss " << first << " -> " << last);
  CHECK(last < first * 0.02);
}
