// Differential tests of the composites of runtime/api and runtime/nn: softmax, log_softmax,
// layer_norm, batch_norm, gelu (both forms), silu, clamp, mean, var, std, dropout (eval and
// train with a fixed seed, bit for bit), cross_entropy, mse_loss, scaled_dot_product_attention,
// add with alpha, and nn modules (Linear, LayerNorm, Conv2d, BatchNorm2d, Dropout, GELU, ...).
#include <cmath>
#include <limits>

#include "diff/diff_testing.h"

using namespace kiln;
using namespace kiln::diff;

namespace {

const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> ts = {DType::f32, DType::f64, DType::f16, DType::bf16};
  return ts;
}

/// A row of -inf (softmax gives NaN), one with +inf and one with huge finite values.
Tensor with_extreme_rows(Tensor x) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor r = x.clone();
  r.select(0, 0).fill_(-inf);
  r.select(0, 1).slice(0, 0, 3).fill_(inf);
  r.select(0, 2).mul_(1000.0);
  r.select(0, 3).fill_(-0.0);
  return r;
}

} // namespace

TEST_CASE("diff: softmax and log_softmax over dims dtypes and extreme rows", "[diff]") {
  uint64_t seed = 23000;
  for (DType t : float_dtypes()) {
    Tensor x = make_input({7, 33}, t, Values::normal, ++seed);
    Tensor xe = with_extreme_rows(make_input({7, 33}, t, Values::normal, ++seed));
    Tensor x4 = make_input({2, 3, 5, 7}, t, Values::normal, ++seed, Layout::permuted);
    Tensor e = make_input({0, 5}, t, Values::normal, ++seed);
    const bool must = t == DType::f32;
    CHECK(check_bundle(
        "softmax", dtype_str(t) + " 7x33", {x, xe, x4, e},
        {{"softmax dim 1", [](const Inputs& in) { return softmax(in[0], 1); }, must},
         {"softmax dim 0", [](const Inputs& in) { return softmax(in[0], 0); }, must},
         {"softmax extreme rows", [](const Inputs& in) { return softmax(in[1], 1); }, must},
         {"softmax 4-d permuted dim 2", [](const Inputs& in) { return softmax(in[2], 2); }, must},
         {"softmax of transposed", [](const Inputs& in) { return in[0].t().softmax(-1); }, must},
         {"softmax empty", [](const Inputs& in) { return softmax(in[3], 1); }, must},
         {"log_softmax dim 1", [](const Inputs& in) { return log_softmax(in[0], 1); }, must},
         {"log_softmax dim 0", [](const Inputs& in) { return log_softmax(in[0], 0); }, must},
         {"log_softmax extreme rows", [](const Inputs& in) { return log_softmax(in[1], -1); },
          must},
         {"log_softmax 4-d dim -1", [](const Inputs& in) { return log_softmax(in[2], -1); },
          must}}));
  }
}

TEST_CASE("diff: layer_norm and batch_norm", "[diff]") {
  uint64_t seed = 24000;
  for (DType t : float_dtypes()) {
    Tensor x = make_input({4, 7, 33}, t, Values::normal, ++seed);
    Tensor w = make_input({33}, t, Values::normal, ++seed);
    Tensor b = make_input({33}, t, Values::normal, ++seed);
    Tensor w2 = make_input({7, 33}, t, Values::normal, ++seed);
    Tensor xt = make_input({4, 7, 33}, t, Values::normal, ++seed, Layout::transposed);
    const bool must = t == DType::f32;
    CHECK(check_bundle(
        "layer_norm", dtype_str(t) + " 4x7x33", {x, w, b, w2, xt},
        {{"layer_norm", [](const Inputs& in) { return layer_norm(in[0], {33}); }, must},
         {"layer_norm affine",
          [](const Inputs& in) { return layer_norm(in[0], {33}, in[1], in[2]); }, must},
         {"layer_norm two dims weight only",
          [](const Inputs& in) {
            return layer_norm(in[0], {7, 33}, in[3]);
          },
          must},
         {"layer_norm eps 0.1",
          [](const Inputs& in) { return layer_norm(in[0], {33}, {}, in[2], 0.1); }, must},
         {"layer_norm of transposed",
          [](const Inputs& in) { return layer_norm(in[4], {33}, in[1], in[2]); }, must},
         {"layer_norm of a constant row",
          [](const Inputs& in) { return layer_norm(in[0] * 0 + 3, {33}); }, must}}));

    Tensor img = make_input({2, 3, 5, 7}, t, Values::normal, ++seed);
    Tensor rm = make_input({3}, t, Values::normal, ++seed);
    Tensor rv = make_input({3}, t, Values::positive, ++seed);
    Tensor gw = make_input({3}, t, Values::normal, ++seed);
    Tensor gb = make_input({3}, t, Values::normal, ++seed);
    CHECK(check_bundle(
        "batch_norm eval", dtype_str(t) + " 2x3x5x7", {img, rm, rv, gw, gb},
        {{"batch_norm eval",
          [](const Inputs& in) { return batch_norm(in[0], in[1], in[2], in[3], in[4], false); },
          must},
         {"batch_norm eval no affine",
          [](const Inputs& in) { return batch_norm(in[0], in[1], in[2], {}, {}, false); }, must},
         {"batch_norm train without running stats",
          [](const Inputs& in) { return batch_norm(in[0], {}, {}, in[3], in[4], true); }, must},
         {"batch_norm 2-d input",
          [](const Inputs& in) {
            return batch_norm(in[0].select(3, 0).select(2, 0), in[1], in[2], {}, {}, false);
          },
          must}}));
    // Training updates the running statistics in place: fresh copies for every run, and
    // their final values compared like outputs.
    Case train;
    train.op = "batch_norm train updates running stats";
    train.variant = dtype_str(t) + " 2x3x5x7";
    train.make_inputs = [img, rm, rv] { return Inputs{img, rm.clone(), rv.clone()}; };
    train.fn = [](const Inputs& in) {
      return Outputs{batch_norm(in[0], in[1], in[2], {}, {}, true, 0.25)};
    };
    train.may_refuse = !must;
    check(train);
  }
}

TEST_CASE("diff: activations gelu silu clamp and friends", "[diff]") {
  uint64_t seed = 25000;
  for (DType t : sweep_dtypes()) {
    Tensor x = make_input({7, 33}, t, Values::special, ++seed);
    Tensor xs = make_input({7, 33}, t, Values::special, ++seed, Layout::sliced);
    const bool must = t == DType::f32;
    CHECK(check_bundle(
        "activations", dtype_str(t) + " 7x33", {x, xs},
        {{"gelu", [](const Inputs& in) { return gelu(in[0]); }, must},
         {"gelu tanh", [](const Inputs& in) { return gelu(in[0], "tanh"); }, must},
         {"gelu of a slice", [](const Inputs& in) { return gelu(in[1]); }, must},
         {"silu", [](const Inputs& in) { return silu(in[0]); }, must},
         {"silu of a slice", [](const Inputs& in) { return in[1].silu(); }, must},
         {"clamp both", [](const Inputs& in) { return clamp(in[0], -1.5, 2); }, must},
         {"clamp min", [](const Inputs& in) { return clamp(in[0], 0, std::nullopt); }, must},
         {"clamp max", [](const Inputs& in) { return in[0].clamp(std::nullopt, -0.0); }, must},
         {"clamp int bounds", [](const Inputs& in) { return clamp(in[0], -3, 3); }, must},
         {"sigmoid tanh relu mix",
          [](const Inputs& in) { return sigmoid(in[0]) * tanh(in[1]) + relu(in[0]); }, must},
         {"add with alpha", [](const Inputs& in) { return add(in[0], in[1], 2); }, must},
         {"add with float alpha", [](const Inputs& in) { return add(in[0], in[1], -0.5); }, must},
         {"mse_loss", [](const Inputs& in) { return mse_loss(in[0], in[1]); }},
         {"mse_loss sum", [](const Inputs& in) { return mse_loss(in[0], in[1], "sum"); }},
         {"mse_loss none", [](const Inputs& in) { return mse_loss(in[0], in[1], "none"); },
          must}}));
  }
}

TEST_CASE("diff: mean var and std over dims and corrections", "[diff]") {
  uint64_t seed = 26000;
  for (DType t : float_dtypes()) {
    // Reductions of products are order-dependent in their last bits: modest extents keep the
    // difference between two correct orders inside the tolerances.
    Tensor x = make_input({5, 6, 7}, t, Values::normal, ++seed);
    Tensor xp = make_input({5, 6, 7}, t, Values::normal, ++seed, Layout::permuted);
    Tensor one = make_input({1, 4}, t, Values::normal, ++seed);
    const bool must = t == DType::f32;
    std::vector<Item> items;
    for (auto [dims, keep] : std::vector<std::pair<std::vector<int64_t>, bool>>{
             {{0}, false}, {{2}, true}, {{0, 2}, false}, {{}, true}, {{1}, false}}) {
      std::string s = " dims " + std::to_string(dims.size()) +
                      (dims.empty() ? " all" : " first " + std::to_string(dims[0])) +
                      (keep ? " keepdim" : "");
      items.push_back(
          {"var" + s, [dims, keep](const Inputs& in) { return var(in[0], dims, keep); }, must});
      items.push_back({"std" + s,
                       [dims, keep](const Inputs& in) { return kiln::std(in[1], dims, keep); },
                       must});
      items.push_back(
          {"mean" + s, [dims, keep](const Inputs& in) { return mean(in[1], dims, keep); }, must});
    }
    items.push_back(
        {"var correction 0", [](const Inputs& in) { return var(in[0], {1}, false, 0); }, must});
    items.push_back({"std correction 2",
                     [](const Inputs& in) { return kiln::std(in[0], {2}, true, 2); }, must});
    items.push_back({"var of one element (correction 1 gives nan or inf)",
                     [](const Inputs& in) { return var(in[2], {0}); }, must});
    items.push_back({"max and min composites",
                     [](const Inputs& in) {
                       return in[0].max({1}) - in[1].min({0, 2}, true).sum();
                     },
                     must});
    CHECK(check_bundle("mean var std", dtype_str(t) + " 5x6x7", {x, xp, one}, std::move(items)));
  }
}

TEST_CASE("diff: dropout in eval and train mode is bit for bit with a fixed seed", "[diff]") {
  uint64_t seed = 27000;
  for (DType t : float_dtypes()) {
    for (const ShapeCase& s :
         std::vector<ShapeCase>{{"1023", {1023}},
                                {"7x33 transposed", {7, 33}, Layout::transposed},
                                {"0-d", {}},
                                {"empty 4x0", {4, 0}}}) {
      Case c;
      c.op = "dropout";
      c.variant = dtype_str(t) + " " + s.label;
      c.inputs = {make_input(s.shape, t, Values::special, ++seed, s.layout, s.base)};
      c.fn = [](const Inputs& in) {
        return Outputs{dropout(in[0], 0.3, true), dropout(in[0], 0.5, false),
                       dropout(in[0], 0.0, true), dropout(in[0], 1.0, true),
                       dropout(in[0] * 2, 0.5, true) + 1};
      };
      c.output_names = {"train p 0.3", "eval", "train p 0", "train p 1", "train p 0.5 chain"};
      c.seed = 1234 + seed;
      // Bit for bit: the mask is drawn from the stream, and an f64 run draws other numbers.
      c.compare.exact_because = "dropout draws its mask from the random stream";
      c.may_refuse = t != DType::f32;
      check(c);
    }
  }
  // The module in both modes, and factories drawing from the same stream.
  nn::Dropout drop_train(0.25), drop_eval(0.25);
  drop_eval.eval();
  Case m;
  m.op = "nn::Dropout and random factories";
  m.variant = "f32 7x33";
  m.inputs = {make_input({7, 33}, DType::f32, Values::normal, ++seed)};
  m.fn = [&](const Inputs& in) {
    Tensor a = drop_train.forward(in[0]);
    Tensor b = drop_eval.forward(in[0]);
    return Outputs{a,
                   b,
                   in[0] + rand({7, 33}),
                   randn({33}) * in[0],
                   randint(0, 9, {7, 1}) + in[0],
                   rand_like(in[0]).to(DType::f16)};
  };
  m.seed = 99;
  m.compare.exact_because = "random factories: an f64 run draws other numbers";
  check(m);
}

TEST_CASE("diff: cross_entropy over reductions and shapes", "[diff]") {
  uint64_t seed = 28000;
  for (DType t : float_dtypes()) {
    Tensor logits = make_input({6, 11}, t, Values::normal, ++seed);
    Tensor target = tensor<int64_t>({0, 10, 3, 3, 7, 1});
    Tensor l3 = make_input({2, 5, 4}, t, Values::normal, ++seed);
    Tensor t3 = tensor<int64_t>({0, 4, 2, 1, 3, 3, 0, 4}).view({2, 4});
    Tensor l1 = make_input({5}, t, Values::normal, ++seed);
    Tensor t0 = tensor<int64_t>({2}).view({});
    const bool must = t == DType::f32;
    CHECK(check_bundle(
        "cross_entropy", dtype_str(t) + " 6x11", {logits, target, l3, t3, l1, t0},
        {{"cross_entropy mean", [](const Inputs& in) { return cross_entropy(in[0], in[1]); }, must},
         {"cross_entropy sum", [](const Inputs& in) { return cross_entropy(in[0], in[1], "sum"); },
          must},
         {"cross_entropy none",
          [](const Inputs& in) { return cross_entropy(in[0], in[1], "none"); }, must},
         {"cross_entropy i32 target",
          [](const Inputs& in) { return cross_entropy(in[0], in[1].to(DType::i32)); }, must},
         {"cross_entropy N C d", [](const Inputs& in) { return cross_entropy(in[2], in[3]); },
          must},
         {"cross_entropy unbatched", [](const Inputs& in) { return cross_entropy(in[4], in[5]); },
          must},
         {"cross_entropy of transposed logits",
          [](const Inputs& in) { return cross_entropy(in[0].t().contiguous().t(), in[1], "none"); },
          must}}));
  }
}

TEST_CASE("diff: scaled_dot_product_attention with masks and dropout", "[diff]") {
  uint64_t seed = 29000;
  for (DType t : float_dtypes()) {
    Tensor q = make_input({2, 3, 5, 8}, t, Values::normal, ++seed);
    Tensor k = make_input({2, 3, 7, 8}, t, Values::normal, ++seed);
    Tensor v = make_input({2, 3, 7, 4}, t, Values::normal, ++seed);
    Tensor mask = make_input({5, 7}, DType::bool_, Values::special, ++seed);
    Tensor fmask = make_input({1, 3, 5, 7}, t, Values::normal, ++seed);
    const bool must = t == DType::f32;
    CHECK(check_bundle(
        "scaled_dot_product_attention", dtype_str(t) + " 2x3x5x8", {q, k, v, mask, fmask},
        {{"sdpa",
          [](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); }, must},
         {"sdpa causal",
          [](const Inputs& in) {
            return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true);
          },
          must},
         {"sdpa bool mask",
          [](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2], in[3]); },
          must},
         {"sdpa float mask and scale",
          [](const Inputs& in) {
            return scaled_dot_product_attention(in[0], in[1], in[2], in[4], 0.0, false, 0.5);
          },
          must},
         {"sdpa of transposed k",
          [](const Inputs& in) {
            Tensor kt = in[1].transpose(2, 3).contiguous().transpose(2, 3);
            return scaled_dot_product_attention(in[0], kt, in[2]);
          },
          must}}));
    Case d;
    d.op = "sdpa with dropout";
    d.variant = dtype_str(t) + " 2x3x5x8";
    d.inputs = {q, k, v};
    d.fn = [](const Inputs& in) {
      return Outputs{scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.4)};
    };
    d.seed = 5 + seed;
    d.compare.no_f64_because = "an f64 run draws another dropout mask";
    d.may_refuse = !must;
    check(d);
  }
}

TEST_CASE("diff: nn modules as compiled functions", "[diff]") {
  manual_seed(31);
  nn::Linear lin(9, 5);
  nn::LayerNorm ln(std::vector<int64_t>{9});
  nn::Conv2d conv(3, 4, 3, 1, 1);
  nn::BatchNorm2d bn(4);
  nn::GELU gelu_tanh("tanh");
  nn::SiLU silu_m;
  nn::MaxPool2d pool(2);
  nn::Softmax sm(-1);
  bn.eval();
  // The same modules in f64, for the reference run on f64 inputs.
  nn::Linear lin64(9, 5);
  nn::LayerNorm ln64(std::vector<int64_t>{9});
  nn::Conv2d conv64(3, 4, 3, 1, 1);
  nn::BatchNorm2d bn64(4);
  lin64.load_state_dict(lin.state_dict());
  ln64.load_state_dict(ln.state_dict());
  conv64.load_state_dict(conv.state_dict());
  bn64.load_state_dict(bn.state_dict());
  for (nn::Module* m : std::initializer_list<nn::Module*>{&lin64, &ln64, &conv64, &bn64})
    m->to(DType::f64);
  bn64.eval();
  uint64_t seed = 30000;
  Tensor x = make_input({4, 9}, DType::f32, Values::normal, ++seed);
  Tensor img = make_input({2, 3, 6, 6}, DType::f32, Values::normal, ++seed);
  Case c;
  c.op = "nn modules";
  c.variant = "f32 4x9 and 2x3x6x6";
  c.inputs = {x, img};
  c.fn = [&](const Inputs& in) {
    const bool f64 = in[0].dtype() == DType::f64;
    Tensor h = sm.forward(silu_m.forward(
        gelu_tanh.forward((f64 ? lin64 : lin).forward((f64 ? ln64 : ln).forward(in[0])))));
    Tensor y = pool.forward((f64 ? bn64 : bn).forward((f64 ? conv64 : conv).forward(in[1])));
    return Outputs{h, y};
  };
  c.output_names = {"linear stack", "conv stack"};
  check(c);
}
