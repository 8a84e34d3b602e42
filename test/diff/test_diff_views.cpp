// Differential tests of the view primitives (view, permute, expand, slice) and the view
// composites (reshape, transpose, unsqueeze, squeeze, narrow, select, flatten, contiguous),
// alone and in chains that feed pointwise ops and reductions, where fusion must index
// through the view's strides.
#include "diff/diff_testing.h"

using namespace kiln;
using namespace kiln::diff;

namespace {

struct ViewCase {
  const char* name;
  Shape shape; // the input's shape
  Layout layout;
  Shape base; // for Layout::expanded
  std::function<Tensor(const Tensor&)> fn;
};

std::vector<ViewCase> view_cases() {
  using L = Layout;
  return {
      // Views returned as they are (the replay rebuilds them from the input).
      {"view 7x33 to 33x7",
       {7, 33},
       L::contiguous,
       {},
       [](const Tensor& x) {
         return x.view({33, 7});
       }},
      {"view to -1", {2, 3, 5, 7}, L::contiguous, {}, [](const Tensor& x) { return x.view({-1}); }},
      {"view of 0-d to 1x1",
       {},
       L::contiguous,
       {},
       [](const Tensor& x) {
         return x.view({1, 1});
       }},
      {"t then step-2 slice",
       {7, 33},
       L::contiguous,
       {},
       [](const Tensor& x) { return x.t().slice(0, 1, 33, 2); }},
      {"permute 4-d",
       {2, 3, 5, 7},
       L::contiguous,
       {},
       [](const Tensor& x) {
         return x.permute({3, 1, 0, 2});
       }},
      {"expand with -1",
       {7, 1},
       L::contiguous,
       {},
       [](const Tensor& x) {
         return x.expand({4, -1, 33});
       }},
      {"identity", {7, 33}, L::transposed, {}, [](const Tensor& x) { return x; }},
      // Views feeding pointwise ops.
      {"view then + 1",
       {7, 33},
       L::contiguous,
       {},
       [](const Tensor& x) {
         return x.view({33, 7}) + 1;
       }},
      {"slice step 3 then exp",
       {7, 33},
       L::contiguous,
       {},
       [](const Tensor& x) { return x.slice(1, 1, 30, 3).exp(); }},
      {"slice with negative start then neg",
       {7, 33},
       L::contiguous,
       {},
       [](const Tensor& x) { return -x.slice(1, -10, 33, 2); }},
      {"slice past the end then abs",
       {7, 33},
       L::contiguous,
       {},
       [](const Tensor& x) { return abs(x.slice(0, 2, 100)); }},
      {"empty slice then * 2",
       {7, 33},
       L::contiguous,
       {},
       [](const Tensor& x) { return x.slice(1, 5, 5) * 2; }},
      {"transpose plus itself",
       {7, 7},
       L::contiguous,
       {},
       [](const Tensor& x) { return x + x.t(); }},
      {"x.t() + 1 then sum dim 0",
       {7, 33},
       L::contiguous,
       {},
       [](const Tensor& x) { return (x.t() + 1).sum({0}); }},
      {"reshape of transposed (a copy) then sin",
       {7, 33},
       L::transposed,
       {},
       [](const Tensor& x) {
         return x.reshape({33, 7}).sin();
       }},
      {"reshape of sliced then sum dim 1",
       {7, 33},
       L::sliced,
       {},
       [](const Tensor& x) {
         return x.reshape({3, 77}).sum({1});
       }},
      {"permute 4-d then sum dim 1",
       {2, 3, 5, 7},
       L::contiguous,
       {},
       [](const Tensor& x) {
         return x.permute({0, 3, 1, 2}).sum({1});
       }},
      {"permuted input permuted back then * 3",
       {2, 3, 5, 7},
       L::permuted,
       {},
       [](const Tensor& x) {
         return x.permute({3, 2, 1, 0}) * 3;
       }},
      {"expand then add",
       {7, 1},
       L::contiguous,
       {},
       [](const Tensor& x) {
         return x.expand({7, 33}) + x;
       }},
      {"expand of 0-d then mul",
       {},
       L::contiguous,
       {},
       [](const Tensor& x) {
         return x.expand({3, 4}) * arange(4, DType::f32);
       }},
      {"step-2 slice of expanded then relu",
       {7, 33},
       L::expanded,
       {7, 1},
       [](const Tensor& x) { return x.slice(1, 0, 33, 2).relu(); }},
      {"unsqueeze squeeze chain",
       {7, 33},
       L::contiguous,
       {},
       [](const Tensor& x) { return x.unsqueeze(1).unsqueeze(0).squeeze(1).squeeze() - 1; }},
      {"select then * 3",
       {7, 33},
       L::transposed,
       {},
       [](const Tensor& x) { return x.select(1, 2) * 3; }},
      {"narrow then floor",
       {7, 33},
       L::contiguous,
       {},
       [](const Tensor& x) { return x.narrow(1, 3, 20).floor(); }},
      {"flatten of permuted",
       {2, 3, 5, 7},
       L::permuted,
       {},
       [](const Tensor& x) { return x.flatten(1, 2) + 0.5; }},
      {"contiguous of transposed",
       {7, 33},
       L::transposed,
       {},
       [](const Tensor& x) { return x.contiguous(); }},
      {"view of a pointwise result then t",
       {7, 33},
       L::contiguous,
       {},
       [](const Tensor& x) {
         return (x * 2).view({33, 7}).t();
       }},
      // A reduced value broadcast back (softmax's pattern and its variants).
      {"x - amax keepdim",
       {7, 33},
       L::contiguous,
       {},
       [](const Tensor& x) { return x - amax(x, {1}, true); }},
      {"x / sum dim 0 keepdim",
       {7, 33},
       L::transposed,
       {},
       [](const Tensor& x) { return x / x.sum({0}, true); }},
      {"x - mean of all",
       {2, 3, 5, 7},
       L::contiguous,
       {},
       [](const Tensor& x) { return x - x.mean(); }},
      {"sum without keepdim unsqueezed back",
       {7, 33},
       L::contiguous,
       {},
       [](const Tensor& x) { return x * x.sum({1}).unsqueeze(1); }},
      {"reduction of a broadcast",
       {7, 1},
       L::contiguous,
       {},
       [](const Tensor& x) { return (x + arange(33, DType::f32)).sum({0}); }},
      // Longer chains.
      {"permute reshape slice mul sum",
       {2, 3, 5, 7},
       L::contiguous,
       {},
       [](const Tensor& x) {
         return (x.permute({1, 0, 3, 2}).reshape({6, 35}).slice(1, 0, 35, 2) * 1.5).sum({1});
       }},
      {"slice transpose expand add",
       {7, 33},
       L::sliced,
       {},
       [](const Tensor& x) {
         return x.slice(0, 0, 7, 2).t().unsqueeze(0).expand({2, 33, 4}) + 1;
       }},
      {"expand slice then cumsum",
       {1, 33},
       L::contiguous,
       {},
       [](const Tensor& x) {
         return cumsum(x.expand({5, 33}).slice(1, 0, 33, 4), 0);
       }},
  };
}

} // namespace

TEST_CASE("diff: views alone and feeding pointwise ops and reductions", "[diff]") {
  uint64_t seed = 12000;
  for (const ViewCase& v : view_cases()) {
    for (DType t : {DType::f32, DType::f16, DType::i64}) {
      Case c;
      c.op = v.name;
      std::string shape = v.shape.empty() ? std::string("0-d") : shape_str(v.shape);
      c.variant = dtype_str(t) + " " + shape;
      c.inputs = {make_input(v.shape, t, Values::exact_special, ++seed, v.layout, v.base)};
      auto f = v.fn;
      c.fn = [f](const Inputs& in) { return Outputs{f(in[0])}; };
      c.may_refuse = t != DType::f32;
      check(c);
    }
  }
}

TEST_CASE("diff: outputs that alias inputs and each other", "[diff]") {
  Tensor x = make_input({7, 33}, DType::f32, Values::special, 13000);
  Tensor y = make_input({7, 33}, DType::f32, Values::special, 13001);
  auto run = [&](const char* name, Fn fn) {
    Case c;
    c.op = name;
    c.variant = "f32 7x33";
    c.inputs = {x, y};
    c.fn = std::move(fn);
    check(c);
  };
  run("both inputs returned", [](const Inputs& in) { return Outputs{in[1], in[0]}; });
  run("one result twice", [](const Inputs& in) {
    Tensor r = in[0] + in[1];
    return Outputs{r, r};
  });
  run("a result and a view of it", [](const Inputs& in) {
    Tensor r = in[0] * in[1];
    return Outputs{r, r.t(), r.slice(1, 0, 33, 3)};
  });
  run("an input, its view and a result", [](const Inputs& in) {
    return Outputs{in[0], in[0].slice(0, 1, 7, 2), in[0] - in[1]};
  });
  run("split chunk and stack", [](const Inputs& in) {
    Outputs out = split(in[0], 10, 1);
    for (Tensor& t : chunk(in[1], 3, 0))
      out.push_back(t * 2);
    out.push_back(stack({in[0], in[1]}, 1));
    return out;
  });
  run("intermediate shared by three outputs", [](const Inputs& in) {
    Tensor e = exp(in[0] - amax(in[0], {1}, true));
    return Outputs{e, e.sum({1}), e / e.sum({1}, true)};
  });
}
