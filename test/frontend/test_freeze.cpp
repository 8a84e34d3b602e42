// Eval-mode batch norms folded into the convolutions before them at compile time
// (frontend/freeze.h): the folded graph computes what eager code computes (by the f64 rule,
// with strides, padding, groups and odd channel counts), an update of any folded tensor makes
// the next call trace and fold again, and nothing is folded that must not be (training
// statistics, a conv result read twice, a tensor the graph writes).
#include "frontend_testing.h"

using namespace kiln;

namespace {

/// A conv and an eval batch norm with non-trivial statistics, as tensors a function captures
/// (parameters and buffers), in f32 and as f64 copies for the reference run.
struct ConvBn {
  Tensor w, b, mean, var, gamma, beta;
  std::vector<int64_t> stride, padding;
  int64_t groups = 1;

  ConvBn(int64_t in, int64_t out, int64_t k, std::vector<int64_t> s, std::vector<int64_t> p,
         int64_t g, bool bias)
      : stride(std::move(s)), padding(std::move(p)), groups(g) {
    w = randn({out, in / g, k, k}) * 0.3;
    if (bias) b = randn({out});
    mean = randn({out}) * 0.5;
    var = rand({out}) + 0.5;
    gamma = randn({out});
    beta = randn({out});
  }
  ConvBn to(DType t) const {
    ConvBn c = *this;
    for (Tensor* p : {&c.w, &c.b, &c.mean, &c.var, &c.gamma, &c.beta})
      if (p->defined()) *p = p->to(t);
    return c;
  }
  Tensor operator()(const Tensor& x, bool training = false) const {
    Tensor y = conv2d(x, w, b, stride, padding, {1, 1}, groups);
    return batch_norm(y, mean, var, gamma, beta, training, 0.1, 1e-5);
  }
};

/// f compiled on x: three calls (trace, replay, replay), each by the f64 rule against f on x
/// and ref64 on x in f64.
template <typename F, typename C, typename R>
void require_close(const F& f, C& c, const Tensor& x, const R& ref64) {
  for (int call = 0; call < 3; ++call) {
    INFO("call " << call);
    KILN_REQUIRE_ACCURATE(c(x), f(x), ref64(x.to(DType::f64)));
  }
}

} // namespace

TEST_CASE("eval batch norms fold into their convs and compute what eager code does", "[freeze]") {
  manual_seed(3);
  struct Case {
    const char* what;
    int64_t in, out, k;
    std::vector<int64_t> stride, padding;
    int64_t groups;
    bool bias;
  };
  for (const Case& c : {Case{"3x3, bias", 3, 5, 3, {1, 1}, {1, 1}, 1, true},
                        Case{"strided, no bias", 4, 7, 3, {2, 2}, {0, 0}, 1, false},
                        Case{"grouped, odd channels", 6, 9, 3, {2, 1}, {1, 2}, 3, true},
                        Case{"1x1 downsample", 5, 3, 1, {2, 2}, {0, 0}, 1, false}}) {
    INFO(c.what);
    const ConvBn m(c.in, c.out, c.k, c.stride, c.padding, c.groups, c.bias);
    const ConvBn m64 = m.to(DType::f64);
    // The batch norm, then a relu, and a per-channel and a scalar affine of the conv's own.
    auto f = [&m](const Tensor& x) { return (m(x) * 2.0 + 1.0).relu(); };
    auto f64 = [&m64](const Tensor& x) { return (m64(x) * 2.0 + 1.0).relu(); };
    auto compiled = compile(f);
    const Tensor x = randn({2, c.in, 11, 10});
    require_close(f, compiled, x, f64);
    CHECK(compiled.stats().conv_folds == 1);
    CHECK(compiled.stats().traces == 1);
  }
}

TEST_CASE("an update of a folded parameter or statistic folds again", "[freeze]") {
  manual_seed(5);
  ConvBn m(3, 4, 3, {1, 1}, {1, 1}, 1, true);
  auto f = [&m](const Tensor& x) { return m(x); };
  auto compiled = compile(f);
  const Tensor x = randn({2, 3, 8, 8});
  (void)compiled(x);
  (void)compiled(x);
  REQUIRE(compiled.stats().traces == 1);
  // Each tensor the fold read, updated in place as an optimizer step or load_state_dict
  // does: the guard on its version fails, and the next call folds the new values.
  int64_t traces = 1;
  for (Tensor* p : {&m.w, &m.b, &m.mean, &m.var, &m.gamma, &m.beta}) {
    {
      NoGradGuard no_grad;
      p->add_(randn(p->sizes()) * 0.1);
    }
    const ConvBn m64 = m.to(DType::f64);
    KILN_REQUIRE_ACCURATE(compiled(x), f(x), m64(x.to(DType::f64)));
    CHECK(compiled.stats().traces == ++traces);
    CHECK(compiled.stats().conv_folds == 1);
    REQUIRE_FALSE(compiled.stats().recompile_reasons.empty());
    CHECK_THAT(compiled.stats().recompile_reasons.back(),
               Catch::Contains("folded into a convolution while tracing was modified in place"));
  }
}

TEST_CASE("nothing folds that must not", "[freeze]") {
  manual_seed(7);
  ConvBn m(3, 4, 3, {1, 1}, {1, 1}, 1, false);
  const ConvBn m64 = m.to(DType::f64);
  const Tensor x = randn({2, 3, 6, 6});
  SECTION("training statistics: the batch's, not frozen") {
    ConvBn t = m, t_ref = m; // the running statistics are updated: one copy each
    t.mean = m.mean.clone();
    t.var = m.var.clone();
    t_ref.mean = m.mean.clone();
    t_ref.var = m.var.clone();
    auto compiled = compile([&t](const Tensor& x) { return t(x, /*training=*/true); });
    const Tensor got = compiled(x);
    const Tensor want = t_ref(x, true);
    KILN_REQUIRE_ACCURATE(got, want, Tensor());
    CHECK(compiled.stats().conv_folds == 0);
  }
  SECTION("a conv result read twice") {
    auto f = [&m](const Tensor& x) {
      Tensor y = conv2d(x, m.w, {}, m.stride, m.padding);
      return batch_norm(y, m.mean, m.var, m.gamma, m.beta, false) + y;
    };
    auto f64 = [&m64](const Tensor& x) {
      Tensor y = conv2d(x, m64.w, {}, m64.stride, m64.padding);
      return batch_norm(y, m64.mean, m64.var, m64.gamma, m64.beta, false) + y;
    };
    auto compiled = compile(f);
    require_close(f, compiled, x, f64);
    CHECK(compiled.stats().conv_folds == 0);
  }
  SECTION("a weight the graph writes") {
    Tensor w = m.w.clone(), w_ref = m.w.clone();
    auto step = [&m](Tensor& weight, const Tensor& x) {
      Tensor y = batch_norm(conv2d(x, weight, {}, m.stride, m.padding), m.mean, m.var, m.gamma,
                            m.beta, false);
      weight.mul_(0.5);
      return y;
    };
    auto compiled = compile([&](const Tensor& x) { return step(w, x); });
    for (int call = 0; call < 3; ++call) {
      INFO("call " << call);
      KILN_REQUIRE_ACCURATE(compiled(x), step(w_ref, x), Tensor());
      KILN_REQUIRE_ACCURATE(w, w_ref, Tensor());
    }
    CHECK(compiled.stats().conv_folds == 0);
  }
  SECTION("the eager backend records the graph as traced") {
    CompileOptions o;
    o.backend = "eager";
    auto f = [&m](const Tensor& x) { return m(x); };
    auto compiled = compile(f, o);
    (void)compiled(x);
    CHECK(compiled.stats().conv_folds == 0);
  }
}
