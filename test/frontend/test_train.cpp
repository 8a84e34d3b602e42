// Compiled training (docs/user-guide.md, "Training"): a whole step (forward, loss, backward,
// optimizer update) compiled as one function, against the same step run eagerly in f32 and
// in f64 (the f64 reference rule, per step), and the cases a replay must get right: gradient
// slots, the optimizer's state and step count, the learning rate, and saved tensors.
#include <catch2/catch.hpp>

#include <kiln/kiln.h>

#include "frontend/frontend_testing.h"
#include "models/train.h"
#include "runtime/allocator.h"
#include "runtime/optim/optim.h"

using namespace kiln;

namespace {

/// A two-layer classifier with its parameters as plain tensors, so that one set of initial
/// values gives an f32 and an f64 copy.
struct Net {
  std::vector<Tensor> params; // w1 [16, 32], b1 [32], w2 [32, 4], b2 [4]

  explicit Net(DType dtype) {
    manual_seed(7);
    for (const Shape& s : {Shape{16, 32}, Shape{32}, Shape{32, 4}, Shape{4}})
      params.push_back((randn(s) * 0.3).to(dtype).requires_grad_());
  }
  Tensor forward(const Tensor& x) const {
    const Tensor h = relu(matmul(x, params[0]) + params[1]);
    return matmul(h, params[2]) + params[3];
  }
};

struct Data {
  Tensor x, y;
};

Data batch(int step, DType dtype) {
  manual_seed(100 + static_cast<uint64_t>(step));
  const Tensor x = randn({8, 16});
  const Tensor y = randint(0, 4, {8});
  return {x.to(dtype), y};
}

/// One training step: what the compiled and the eager runs both execute.
template <typename Opt> Tensor train_step(Net& net, Opt& opt, const Tensor& x, const Tensor& y) {
  opt.zero_grad();
  Tensor loss = cross_entropy(net.forward(x), y);
  loss.backward();
  opt.step();
  return loss;
}

void require_close(const Tensor& got, const Tensor& eager, const Tensor& reference,
                   const AccuracyOptions& options = {}) {
  const auto why = check_accuracy(got, eager, reference, options);
  INFO(why.value_or(""));
  REQUIRE_FALSE(why.has_value());
}

} // namespace

TEST_CASE("train: a compiled AdamW step follows the eager one step by step", "[train]") {
  const Mode mode = GENERATE(Mode::default_, Mode::reduce_overhead);
  INFO("mode " << mode_name(mode));
  Net net(DType::f32), eager(DType::f32), ref(DType::f64);
  auto opts = optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.1};
  optim::AdamW opt(net.params, opts), eager_opt(eager.params, opts), ref_opt(ref.params, opts);
  CompileOptions co;
  co.mode = mode;
  auto step =
      compile([&](const Tensor& x, const Tensor& y) { return train_step(net, opt, x, y); }, co);
  // The update is computed into the parameters' own buffers: references stay valid.
  std::vector<const void*> buffers;
  for (const Tensor& p : net.params)
    buffers.push_back(p.raw_data());
  const int steps = 12;
  for (int s = 0; s < steps; ++s) {
    INFO("step " << s);
    const Data d = batch(s, DType::f32);
    const Tensor loss = step(d.x, d.y);
    const Tensor want = train_step(eager, eager_opt, d.x, d.y);
    const Tensor reference = train_step(ref, ref_opt, d.x.to(DType::f64), d.y);
    require_close(loss, want, reference);
    for (size_t k = 0; k < net.params.size(); ++k) {
      INFO("parameter " << k);
      require_close(net.params[k], eager.params[k], ref.params[k]);
      // The gradients a replay leaves in the slots are this call's.
      REQUIRE(net.params[k].grad().defined());
      require_close(net.params[k].grad(), eager.params[k].grad(), ref.params[k].grad());
      CHECK(net.params[k].raw_data() == buffers[k]);
    }
  }
  const CompileStats st = step.stats();
  CHECK(st.static_plans == (mode == Mode::reduce_overhead ? 1 : 0));
  CHECK(st.breaks == 0);
  // The first call makes the optimizer's state (host state a replay can't make), so the
  // second is traced again; every later call replays.
  CHECK(st.traces == 2);
  CHECK(st.replays == steps - 2);
  // The loss and gradients came out of one graph; the loss keeps no usable history.
  const Tensor loss = step(batch(0, DType::f32).x, batch(0, DType::f32).y);
  CHECK(loss.requires_grad());
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("compiled function"));
}

TEST_CASE("train: a compiled SGD step with momentum and gradients zeroed in place", "[train]") {
  Net net(DType::f32), eager(DType::f32), ref(DType::f64);
  auto opts = optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true};
  optim::SGD opt(net.params, opts), eager_opt(eager.params, opts), ref_opt(ref.params, opts);
  // zero_grad(false) zeroes the slots' tensors in place, so the step reads them: a replay
  // binds the gradient each slot holds at its call.
  auto fn = [](Net& n, optim::SGD& o, const Tensor& x, const Tensor& y) {
    o.zero_grad(/*set_to_none=*/false);
    Tensor loss = cross_entropy(n.forward(x), y);
    loss.backward();
    o.step();
    return loss;
  };
  auto step = compile([&](const Tensor& x, const Tensor& y) { return fn(net, opt, x, y); });
  for (int s = 0; s < 8; ++s) {
    INFO("step " << s);
    const Data d = batch(s, DType::f32);
    const Tensor loss = step(d.x, d.y);
    require_close(loss, fn(eager, eager_opt, d.x, d.y), fn(ref, ref_opt, d.x.to(DType::f64), d.y));
    for (size_t k = 0; k < net.params.size(); ++k)
      require_close(net.params[k], eager.params[k], ref.params[k]);
  }
  CompileStats st = step.stats();
  CHECK(st.breaks == 0);
  CHECK(st.replays >= 5);
  CHECK(st.recompiles == 0);
  // The replay binds the slots' gradients, guarded: slots emptied outside the compiled step
  // fail the guard, and the step is traced again for them.
  opt.zero_grad();
  eager_opt.zero_grad();
  ref_opt.zero_grad();
  const Data d = batch(20, DType::f32);
  require_close(step(d.x, d.y), fn(eager, eager_opt, d.x, d.y),
                fn(ref, ref_opt, d.x.to(DType::f64), d.y));
  for (size_t k = 0; k < net.params.size(); ++k)
    require_close(net.params[k], eager.params[k], ref.params[k]);
  st = step.stats();
  REQUIRE(st.recompiles == 1);
  CHECK_THAT(st.recompile_reasons[0],
             Catch::Contains("gradient of") && Catch::Contains("defined became none"));
}

TEST_CASE("train: gradient clipping inside a compiled step is no graph break", "[train]") {
  Net net(DType::f32), eager(DType::f32), ref(DType::f64);
  auto opts = optim::SGDOptions{.lr = 0.1, .momentum = 0.5};
  optim::SGD opt(net.params, opts), eager_opt(eager.params, opts), ref_opt(ref.params, opts);
  // Steps alternate a bound the gradients exceed (they are scaled) with one they stay under
  // (multiplied by 1): the clamp is in the graph, not decided on the host at tracing.
  auto clip_step = [](Net& n, optim::SGD& o, const Tensor& x, const Tensor& y, double max_norm) {
    o.zero_grad();
    Tensor loss = cross_entropy(n.forward(x), y);
    loss.backward();
    const Tensor norm = nn::utils::clip_grad_norm_(n.params, max_norm).tensor();
    o.step();
    return std::vector<Tensor>{loss, norm};
  };
  auto small =
      compile([&](const Tensor& x, const Tensor& y) { return clip_step(net, opt, x, y, 0.05); });
  auto large =
      compile([&](const Tensor& x, const Tensor& y) { return clip_step(net, opt, x, y, 100.0); });
  bool clipped = false, unclipped = false;
  for (int s = 0; s < 8; ++s) {
    INFO("step " << s);
    const Data d = batch(s, DType::f32);
    const double max_norm = s % 2 == 0 ? 0.05 : 100.0;
    const std::vector<Tensor> got = s % 2 == 0 ? small(d.x, d.y) : large(d.x, d.y);
    const std::vector<Tensor> want = clip_step(eager, eager_opt, d.x, d.y, max_norm);
    const std::vector<Tensor> want64 = clip_step(ref, ref_opt, d.x.to(DType::f64), d.y, max_norm);
    require_close(got[0], want[0], want64[0]);
    // The norm is summed in f64 of f32 gradients: compared at the gradients' precision.
    require_close(got[1].to(DType::f32), want[1].to(DType::f32), want64[1]);
    (got[1].item<double>() > max_norm ? clipped : unclipped) = true;
    for (size_t k = 0; k < net.params.size(); ++k) {
      INFO("parameter " << k);
      require_close(net.params[k].grad(), eager.params[k].grad(), ref.params[k].grad());
      require_close(net.params[k], eager.params[k], ref.params[k]);
    }
  }
  CHECK(clipped);
  CHECK(unclipped);
  for (const CompileStats& st : {small.stats(), large.stats()}) {
    CHECK(st.breaks == 0);
    CHECK(st.replays >= 2);
  }
}

TEST_CASE("train: gradients accumulate across compiled calls as eagerly", "[train]") {
  // No zero_grad: each call adds its gradient to the slot's, which the replay must read.
  Net net(DType::f32), eager(DType::f32), ref(DType::f64);
  auto fn = [](Net& n, const Tensor& x, const Tensor& y) {
    Tensor loss = cross_entropy(n.forward(x), y);
    loss.backward();
    return loss;
  };
  auto step = compile([&](const Tensor& x, const Tensor& y) { return fn(net, x, y); });
  for (int s = 0; s < 4; ++s) {
    const Data d = batch(s, DType::f32);
    step(d.x, d.y);
    fn(eager, d.x, d.y);
    fn(ref, d.x.to(DType::f64), d.y);
  }
  for (size_t k = 0; k < net.params.size(); ++k)
    require_close(net.params[k].grad(), eager.params[k].grad(), ref.params[k].grad());
  CHECK(step.stats().replays >= 2);
}

TEST_CASE("train: the learning rate is read at each replayed step", "[train]") {
  Net net(DType::f32), eager(DType::f32), ref(DType::f64);
  auto opts = optim::AdamOptions{.lr = 0.02};
  optim::Adam opt(net.params, opts), eager_opt(eager.params, opts), ref_opt(ref.params, opts);
  optim::CosineAnnealingLR sched(opt, 6), eager_sched(eager_opt, 6), ref_sched(ref_opt, 6);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return train_step(net, opt, x, y); });
  for (int s = 0; s < 6; ++s) {
    INFO("step " << s << " lr " << opt.lr());
    const Data d = batch(s, DType::f32);
    const Tensor loss = step(d.x, d.y);
    require_close(loss, train_step(eager, eager_opt, d.x, d.y),
                  train_step(ref, ref_opt, d.x.to(DType::f64), d.y));
    for (size_t k = 0; k < net.params.size(); ++k)
      require_close(net.params[k], eager.params[k], ref.params[k]);
    sched.step();
    eager_sched.step();
    ref_sched.step();
  }
  CHECK(step.stats().replays >= 3);
}

TEST_CASE("train: a scheduler's step inside a compiled step is a graph break (KB010)", "[train]") {
  Net net(DType::f32), eager(DType::f32);
  optim::SGD opt(net.params, {.lr = 0.1}), eager_opt(eager.params, {.lr = 0.1});
  optim::StepLR sched(opt, 1, 0.5), eager_sched(eager_opt, 1, 0.5);
  auto fn = [](Net& n, optim::SGD& o, optim::StepLR& sc, const Tensor& x, const Tensor& y) {
    Tensor loss = train_step(n, o, x, y);
    sc.step();
    return loss;
  };
  auto step = compile([&](const Tensor& x, const Tensor& y) { return fn(net, opt, sched, x, y); });
  for (int s = 0; s < 4; ++s) {
    const Data d = batch(s, DType::f32);
    const Tensor loss = step(d.x, d.y);
    const Tensor want = fn(eager, eager_opt, eager_sched, d.x, d.y);
    CHECK(check_accuracy(loss, want, Tensor()) == std::nullopt);
  }
  CHECK(opt.lr() == eager_opt.lr());
  for (size_t k = 0; k < net.params.size(); ++k)
    CHECK(check_accuracy(net.params[k], eager.params[k], Tensor()) == std::nullopt);
  const ExplainReport rep = explain(step, batch(9, DType::f32).x, batch(9, DType::f32).y);
  REQUIRE(rep.break_count() == 1);
  CHECK(rep.breaks[0].code == "KB010");
  CHECK(rep.breaks[0].location.find("test_train.cpp") != std::string::npos);
}

TEST_CASE("train: a saved tensor written in place inside a compiled function is an error",
          "[train]") {
  Tensor w = tensor(std::vector<float>{0.5f, -1.0f, 2.0f}).requires_grad_();
  auto f = compile([&](const Tensor& x) {
    Tensor y = sigmoid(x * w); // sigmoid's backward reads its output y
    y.mul_(2);
    Tensor loss = y.sum();
    loss.backward();
    return loss;
  });
  CHECK_THROWS_WITH(f(ones({3})), Catch::Contains("modified by an inplace operation"));
  // Eagerly the same.
  Tensor y = sigmoid(ones({3}) * w);
  y.mul_(2);
  CHECK_THROWS_WITH(y.sum().backward(), Catch::Contains("modified by an inplace operation"));
}

TEST_CASE("train: a module compiled in train mode gets a compiled backward", "[train]") {
  // Two copies of one model: compiled and eager, and an f64 one for the reference.
  auto make = [](DType dtype) {
    manual_seed(5);
    auto m = std::make_shared<nn::Sequential>();
    m->push_back(std::make_shared<nn::Linear>(6, 16));
    m->push_back(std::make_shared<nn::GELU>());
    m->push_back(std::make_shared<nn::LayerNorm>(std::vector<int64_t>{16}));
    m->push_back(std::make_shared<nn::Linear>(16, 3));
    m->to(dtype);
    m->train();
    return m;
  };
  // With the min-cut partition (GELU's and LayerNorm's pointwise values computed again in
  // the backward from fewer saved ones) and without (what the formulas save).
  const bool recompute = GENERATE(true, false);
  INFO("recompute " << recompute);
  auto net = make(DType::f32), eager = make(DType::f32), ref = make(DType::f64);
  CompileOptions co;
  co.recompute = recompute;
  auto f = compile(*net, co);
  for (int call = 0; call < 3; ++call) {
    INFO("call " << call);
    manual_seed(40 + static_cast<uint64_t>(call));
    const Tensor x = randn({5, 6}), w = randn({5, 3});
    // The input requires grad too: its gradient flows out of the compiled backward.
    const Tensor xc = x.clone().requires_grad_(), xe = x.clone().requires_grad_(),
                 xr = x.to(DType::f64).requires_grad_();
    const Tensor y = f(xc);
    REQUIRE(autograd::grad_fn_name(y) == "CompiledFunctionBackward");
    (y * w).sum().backward();
    (eager->forward(xe) * w).sum().backward();
    (ref->forward(xr) * w.to(DType::f64)).sum().backward();
    require_close(xc.grad(), xe.grad(), xr.grad());
    const std::vector<Tensor> p = net->parameters(), pe = eager->parameters(),
                              pr = ref->parameters();
    for (size_t k = 0; k < p.size(); ++k) {
      INFO("parameter " << k);
      require_close(p[k].grad(), pe[k].grad(), pr[k].grad());
    }
    // The saved tensors are released by the backward, as eagerly.
    CHECK_THROWS_WITH(y.sum().backward(), Catch::Contains("second time"));
    net->zero_grad();
    eager->zero_grad();
    ref->zero_grad();
  }
  CHECK(f.stats().replays == 2);
  const CompileStats st = f.stats();
  INFO("saved " << st.backward_saved_bytes << " of " << st.backward_needed_bytes << " bytes, "
                << st.backward_recomputed_ops << " ops computed again");
  CHECK(st.backward_needed_bytes > 0);
  if (recompute) {
    CHECK(st.backward_recomputed_ops > 0);
    CHECK(st.backward_saved_bytes < st.backward_needed_bytes);
  } else {
    CHECK(st.backward_recomputed_ops == 0);
    CHECK(st.backward_saved_bytes == st.backward_needed_bytes);
  }
  // Under no_grad (inference), no backward: the results carry no history.
  const NoGradGuard no_grad;
  CHECK_FALSE(f(ones({2, 6})).requires_grad());
}

TEST_CASE("train: a reduce_overhead step updates the parameters and state in their buffers",
          "[train][llvm]") {
  const zoo::TrainTask& task = zoo::train_task("mlp");
  std::shared_ptr<nn::Module> net = task.make(0, DType::f32);
  std::unique_ptr<optim::Optimizer> opt = zoo::make_optimizer("adamw", net->parameters(), 1e-3);
  CompileOptions co;
  co.mode = Mode::reduce_overhead;
  auto step = compile(
      [&](const Tensor& x, const Tensor& y) { return zoo::train_step(*net, *opt, task, x, y); },
      co);
  const auto [x, y] = task.batch(0, DType::f32);
  for (int i = 0; i < 4; ++i) // trace (makes the state), trace, replay (builds the plan), plan
    (void)step(x, y);
  REQUIRE(step.stats().static_plans == 1);
  size_t param_bytes = 0;
  for (const Tensor& p : net->parameters())
    param_bytes += static_cast<size_t>(p.numel()) * 4;
  // A replay drops the old gradients and makes new ones, and writes the parameters and both
  // moments where they are: it needs little beyond what was live before it (measured: one
  // buffer of the largest weight's size). A plan that made the updates as fresh tensors and
  // copied them back would need three times the parameters; one that kept the old gradients
  // through the run, or a new packed copy of each weight per step, once more.
  const size_t live = cpu_memory_stats().allocated;
  reset_cpu_peak_memory();
  (void)step(x, y);
  const size_t extra = cpu_memory_stats().peak_allocated - live;
  INFO("extra " << extra << " bytes, parameters " << param_bytes << " bytes");
  CHECK(extra < param_bytes);
  CHECK(step.stats().replays == 3);
}

namespace {

/// A layer that assembles its output in a buffer through views (libtorch code often does):
/// the autograd of in-place writes through views (CopySlices) inside compiled code.
class Assemble : public nn::Module {
public:
  explicit Assemble(DType dtype) {
    manual_seed(9);
    w = (randn({6, 8}) * 0.4).to(dtype);
    register_parameter("w", w);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = matmul(x, w); // [n, 8]
    Tensor out = zeros({x.size(0), 12}, TensorOptions(x.dtype()));
    Tensor g = h * 1.5;
    g.mul_(h); // an in-place op whose backward reads the value it overwrites
    out.narrow(1, 0, 8).copy_(tanh(g));
    out.narrow(1, 8, 4).copy_(h.narrow(1, 0, 4) * x.narrow(1, 2, 4));
    out.slice(1, 2, 12, 3).mul_(sigmoid(h.narrow(1, 4, 4))); // over both writes
    return out;
  }
  Tensor w;
};

} // namespace

TEST_CASE("train: in-place writes through views, compiled, give eager's gradients", "[train]") {
  const bool whole_step = GENERATE(true, false);
  INFO((whole_step ? "a whole step compiled" : "the module compiled in train mode"));
  Assemble net(DType::f32), eager(DType::f32), ref(DType::f64);
  net.train();
  auto step = [](nn::Module& m, const Tensor& x) {
    m.zero_grad();
    Tensor y = m.forward(x);
    Tensor loss = (y * y).sum() + x.sum(); // x's gradient: two paths, one through the writes
    loss.backward();
    return loss;
  };
  auto compiled_step = compile([&](const Tensor& x) { return step(net, x); });
  auto compiled_module = compile(net);
  for (int call = 0; call < 3; ++call) {
    INFO("call " << call);
    manual_seed(60 + static_cast<uint64_t>(call));
    const Tensor x = randn({5, 6});
    const Tensor xc = x.clone().requires_grad_(), xe = x.clone().requires_grad_(),
                 xr = x.to(DType::f64).requires_grad_();
    Tensor loss;
    if (whole_step) {
      loss = compiled_step(xc);
    } else {
      net.zero_grad();
      const Tensor y = compiled_module(xc);
      loss = (y * y).sum() + xc.sum();
      loss.backward();
    }
    const Tensor want = step(eager, xe);
    const Tensor reference = step(ref, xr);
    require_close(loss, want, reference);
    if (whole_step) {
      REQUIRE(net.w.grad().defined());
    } else {
      REQUIRE(xc.grad().defined());
      require_close(xc.grad(), xe.grad(), xr.grad());
      xc.grad() = Tensor();
    }
    require_close(net.w.grad(), eager.w.grad(), ref.w.grad());
  }
  const CompileStats st = whole_step ? compiled_step.stats() : compiled_module.stats();
  CHECK(st.breaks == 0);
  CHECK(st.replays == 2);
}

TEST_CASE("train: backward through a compiled function's forward says it is not built", "[train]") {
  // A function (not a module in train mode) gets no compiled backward.
  nn::Linear lin(4, 3);
  auto f = compile([&](const Tensor& x) { return lin.forward(x); });
  const Tensor y = f(ones({2, 4}));
  REQUIRE(y.requires_grad());
  CHECK_THROWS_WITH(y.sum().backward(), Catch::Contains("gradients through a compiled forward"));
  // The compiled forward still replays (its recorded history is dropped at the end).
  f(ones({2, 4}));
  f(ones({2, 4}));
  CHECK(f.stats().replays == 2);
  const NoGradGuard no_grad;
  CHECK(check_accuracy(f(ones({2, 4})), lin.forward(ones({2, 4})), Tensor()) == std::nullopt);
}

namespace {

/// Trains `model`'s task for `steps` steps compiled, and checks each step by the f64
/// reference rule against the same step run eagerly in f32 and in f64 from the compiled run's
/// state before it: its loss, its gradients, and its update (the eager optimizer given the
/// compiled gradients). Starting each step from the compiled state keeps the rule to one
/// step's computation, along the compiled run's own curve: across steps, rounding differences
/// grow chaotically in eager and compiled runs alike, and Adam's first steps divide by
/// gradients near zero, so neither a whole curve nor a parameter after a whole step is a
/// well-conditioned result. With `module_only`, only the model is compiled (its forward and
/// the compiled backward it gets in train mode, with the min-cut partition); the loss,
/// backward() and the optimizer run eagerly around it.
void loss_curves_agree(const std::string& model, int64_t steps, int64_t magnitude_every,
                       bool module_only = false) {
  const zoo::TrainTask& task = zoo::train_task(model);
  struct Run {
    std::shared_ptr<nn::Module> net;
    std::unique_ptr<optim::Optimizer> opt;
    std::vector<Tensor> params() const { return net->parameters(); }
  };
  auto make = [&](DType dtype) {
    Run r{task.make(0, dtype), nullptr};
    r.opt = zoo::make_optimizer("adamw", r.net->parameters(), task.lr);
    return r;
  };
  Run compiled = make(DType::f32), eager = make(DType::f32), ref = make(DType::f64);
  auto whole = compile([&](const Tensor& x, const Tensor& y) {
    return zoo::train_step(*compiled.net, *compiled.opt, task, x, y);
  });
  auto forward = compile(*compiled.net);
  auto step = [&](const Tensor& x, const Tensor& y) {
    if (!module_only) return whole(x, y);
    compiled.opt->zero_grad();
    Tensor loss = task.loss(forward(x), y);
    loss.backward();
    compiled.opt->step();
    return loss;
  };
  struct Snapshot {
    std::vector<Tensor> params;
    std::map<std::string, Tensor> state;
  };
  // Loads the compiled run's state before the step into an eager run (in its dtype), with a
  // fresh optimizer (none before the first step).
  auto load = [&](const Snapshot& from, Run& to, DType dtype) {
    to.opt = zoo::make_optimizer("adamw", to.net->parameters(), task.lr);
    const NoGradGuard no_grad;
    const std::vector<Tensor> into = to.params();
    for (size_t k = 0; k < into.size(); ++k)
      Tensor(into[k]).copy_(from.params[k]);
    std::map<std::string, Tensor> state = from.state;
    for (auto& [name, t] : state)
      if (name.find(".exp_avg") != std::string::npos) t = t.to(dtype); // step and lr stay f64
    if (!state.empty()) to.opt->load_state_dict(state);
  };
  // A parameter's gradient is a sum over the batch, whose terms cancel: the magnitude of each
  // element (AccuracyOptions::magnitude) is the sum over examples of |the example's share|,
  // from the f64 run at the step's starting point (every few steps: it costs a backward per
  // example).
  auto magnitudes = [&](const Tensor& x64, const Tensor& y) {
    const std::vector<Tensor> params = ref.params();
    const Tensor out = ref.net->forward(x64);
    const Tensor g = autograd::grad({task.loss(out, y)}, {out}, {}, true)[0];
    std::vector<Tensor> sum(params.size());
    for (int64_t b = 0; b < out.size(0); ++b) {
      Tensor share = zeros_like(g);
      {
        const NoGradGuard no_grad;
        share.slice(0, b, b + 1).copy_(g.slice(0, b, b + 1));
      }
      const std::vector<Tensor> part = autograd::grad({out}, params, {share}, true, false, true);
      for (size_t k = 0; k < params.size(); ++k)
        if (part[k].defined()) sum[k] = sum[k].defined() ? sum[k] + abs(part[k]) : abs(part[k]);
    }
    return sum;
  };
  std::vector<double> curve;
  for (int64_t s = 0; s < steps; ++s) {
    INFO(model << " step " << s);
    Snapshot before;
    for (const Tensor& p : compiled.params())
      before.params.push_back(p.detach().clone());
    before.state = compiled.opt->state_dict();
    load(before, eager, DType::f32);
    load(before, ref, DType::f64);
    const auto [x, y] = task.batch(s, DType::f32);
    const auto [x64, y64] = task.batch(s, DType::f64);
    const std::vector<Tensor> magnitude =
        s % magnitude_every == 0 ? magnitudes(x64, y64) : std::vector<Tensor>{};
    load(before, ref, DType::f64);
    const Tensor got = step(x, y);
    const Tensor want = zoo::train_step(*eager.net, *eager.opt, task, x, y);
    require_close(got, want, zoo::train_step(*ref.net, *ref.opt, task, x64, y64));
    curve.push_back(got.item<double>());
    const auto names = compiled.net->named_parameters();
    const std::vector<Tensor> params = compiled.params(), eager_params = eager.params(),
                              ref_params = ref.params();
    for (size_t k = 0; k < params.size() && !magnitude.empty(); ++k) {
      INFO("gradient of " << names[k].first);
      require_close(params[k].grad(), eager_params[k].grad(), ref_params[k].grad(),
                    AccuracyOptions{.magnitude = magnitude[k]});
    }
    // The update: the eager optimizers from the same state, given the compiled gradients.
    load(before, eager, DType::f32);
    load(before, ref, DType::f64);
    for (size_t k = 0; k < params.size(); ++k) {
      Tensor(eager_params[k]).set_grad(params[k].grad().clone());
      Tensor(ref_params[k]).set_grad(params[k].grad().to(DType::f64));
    }
    eager.opt->step();
    ref.opt->step();
    for (size_t k = 0; k < params.size(); ++k) {
      INFO("update of " << names[k].first);
      require_close(params[k], eager_params[k], ref_params[k]);
    }
  }
  if (module_only) {
    // The forward replays from the second call; its backward computes values again.
    const CompileStats st = forward.stats();
    CHECK(st.breaks == 0);
    CHECK(st.replays == steps - 1);
    CHECK(st.backward_recomputed_ops > 0);
    CHECK(st.backward_saved_bytes < st.backward_needed_bytes);
    return;
  }
  // It learns, and the step was captured once: no breaks, every later call a replay.
  CHECK(curve.back() < 0.8 * curve.front());
  const CompileStats st = whole.stats();
  CHECK(st.breaks == 0);
  CHECK(st.replays == steps - 2);
}

} // namespace

TEST_CASE("train: mlp's compiled loss curve agrees with eager's for 50 steps", "[train][llvm]") {
  loss_curves_agree("mlp", 50, 5);
}

TEST_CASE("train: gpt's compiled loss curve agrees with eager's for 50 steps", "[train][llvm]") {
  loss_curves_agree("gpt", 50, 10);
}

TEST_CASE("train: mlp and gpt with only the module compiled follow eager for 20 steps",
          "[train][llvm]") {
  loss_curves_agree("mlp", 20, 5, /*module_only=*/true);
  loss_curves_agree("gpt", 20, 10, /*module_only=*/true);
}
