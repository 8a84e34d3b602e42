// Conv nets through the layout pass (passes/layout.h): compiled results equal eager code by
// the f64 rule in eval and train mode, over odd channel counts, strides, padding, dilation and
// groups, in each mode; the caller gets the layout eager code gives; and the pass stores what
// it should channels-last.
#include <iostream>
#include <sstream>

#include "frontend_testing.h"
#include "runtime/epilogue.h"

using namespace kiln;

namespace {

/// One conv and its eval batch norm's statistics, as tensors the net captures.
struct Conv {
  Tensor w, b, mean, var, gamma, beta;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;

  Conv(int64_t in, int64_t out, int64_t k, std::vector<int64_t> s, std::vector<int64_t> p,
       int64_t g = 1, std::vector<int64_t> d = {1, 1})
      : stride(std::move(s)), padding(std::move(p)), dilation(std::move(d)), groups(g) {
    w = randn({out, in / g, k, k}) * (1.0 / static_cast<double>(in / g * k));
    mean = randn({out}) * 0.2;
    var = rand({out}) + 0.5;
    gamma = rand({out}) + 0.5;
    beta = randn({out}) * 0.2;
  }
  Conv to(DType t) const {
    Conv c = *this;
    for (Tensor* p : {&c.w, &c.mean, &c.var, &c.gamma, &c.beta})
      *p = p->to(t);
    return c;
  }
  /// conv, then batch norm: eval (folded at compile time) or train (the batch's statistics,
  /// which update mean and var).
  Tensor operator()(const Tensor& x, bool train) const {
    Tensor y = conv2d(x, w, {}, stride, padding, dilation, groups);
    return batch_norm(y, mean, var, gamma, beta, train, 0.1, 1e-5);
  }
};

/// A ResNet-like net with odd widths: a stem, a residual block, a downsampling block with a
/// grouped and a dilated conv, pooling by tiling windows and globally, and a linear head.
struct Net {
  Conv stem, a1, a2, down, b1, b2, grouped;
  Tensor fc_w, fc_b;
  bool train = false;

  Net()
      : stem(3, 12, 3, {1, 1}, {1, 1}), a1(12, 12, 3, {1, 1}, {1, 1}),
        a2(12, 12, 3, {1, 1}, {2, 2}, 1, {2, 2}), down(12, 21, 1, {2, 2}, {0, 0}),
        b1(12, 21, 3, {2, 2}, {1, 1}), b2(21, 21, 3, {1, 1}, {1, 1}),
        grouped(21, 21, 3, {1, 1}, {1, 1}, 3) {
    fc_w = randn({5, 21}) * 0.2;
    fc_b = randn({5});
  }
  Net to(DType t) const {
    Net n = *this;
    for (Conv* c : {&n.stem, &n.a1, &n.a2, &n.down, &n.b1, &n.b2, &n.grouped})
      *c = c->to(t);
    n.fc_w = fc_w.to(t);
    n.fc_b = fc_b.to(t);
    return n;
  }
  /// The logits, and the last block's activations (a channels-last region's value the caller
  /// reads).
  std::vector<Tensor> operator()(const Tensor& x) const {
    Tensor h = stem(x, train).relu();
    h = (a2(a1(h, train).relu(), train) + h).relu();
    Tensor block = (b2(b1(h, train).relu(), train) + down(h, train)).relu();
    Tensor g = grouped(block, train).relu();
    Tensor pooled = adaptive_avg_pool2d(max_pool2d(g, {2, 2}), {1, 1}).flatten(1);
    return {linear(pooled, fc_w, fc_b), block};
  }
};

/// Whether oneDNN runs a 3x3 conv of these sizes (padding 1, stride 1) on NHWC itself.
bool runs_nhwc(IntList x, IntList w, IntList y) {
  const Attrs attrs{std::vector<int64_t>{1, 1}, std::vector<int64_t>{1, 1},
                    std::vector<int64_t>{1, 1}, int64_t{1}};
  return library_conv_runs_nhwc(x, w, y, false, attrs);
}

void check_net(bool train, Mode mode, const Tensor& x) {
  INFO((train ? "train" : "eval") << " mode, " << mode_name(mode) << ", input strides "
                                  << shape_str(x.strides()));
  manual_seed(11);
  Net net, ref = net, ref64 = net.to(DType::f64);
  net.train = ref.train = ref64.train = train;
  if (train) // each copy's running statistics of its own
    for (Net* n : {&net, &ref})
      for (Conv* c : {&n->stem, &n->a1, &n->a2, &n->down, &n->b1, &n->b2, &n->grouped}) {
        c->mean = c->mean.clone();
        c->var = c->var.clone();
      }
  CompileOptions o;
  o.mode = mode;
  auto compiled = compile([&net](const Tensor& t) { return net(t); }, o);
  for (int call = 0; call < 3; ++call) {
    INFO("call " << call);
    std::vector<Tensor> got = compiled(x);
    std::vector<Tensor> want = ref(x);
    std::vector<Tensor> want64 = ref64(x.to(DType::f64));
    REQUIRE(got.size() == 2);
    KILN_REQUIRE_ACCURATE(got[0], want[0], want64[0]);
    KILN_REQUIRE_ACCURATE(got[1], want[1], want64[1]);
    // The caller's tensors are laid out as eager code lays them out.
    CHECK(got[1].is_contiguous() == want[1].is_contiguous());
    CHECK(got[1].strides() == want[1].strides());
    if (train) {
      KILN_REQUIRE_ACCURATE(net.b1.mean, ref.b1.mean, ref64.b1.mean);
      KILN_REQUIRE_ACCURATE(net.grouped.var, ref.grouped.var, ref64.grouped.var);
    }
  }
  CHECK(compiled.stats().traces == 1);
  const CompileStats& s = compiled.stats();
  if (train) {
    // Batch norm's statistics read each conv result: their sums keep the contiguous layout.
    CHECK(s.channels_last_values == 0);
  } else if (runs_nhwc({2, 3, 34, 30}, {12, 3, 3, 3}, {2, 12, 34, 30}) &&
             runs_nhwc({2, 12, 34, 30}, {12, 12, 3, 3}, {2, 12, 34, 30})) {
    // Where oneDNN runs the stem's and the first block's convs NHWC (it chooses per CPU and
    // shape: on this project's AVX-512 hosts every conv but the grouped one, 11 values),
    // they and the relu between them form a region, entered through one copy unless the
    // input is channels-last already.
    CHECK(s.channels_last_values >= 3);
    CHECK(s.layout_conversions >= (x.is_contiguous() ? 1 : 0));
  }
}

} // namespace

TEST_CASE("conv nets through the layout pass compute what eager code does", "[layout]") {
  manual_seed(2);
  const Tensor x = randn({2, 3, 34, 30});
  // The same input stored channels-last: the stem's conv reads it without a copy.
  const Tensor x_cl = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  REQUIRE_FALSE(x_cl.is_contiguous());
  for (Mode mode : {Mode::default_, Mode::reduce_overhead})
    for (bool train : {false, true})
      check_net(train, mode, x);
  check_net(false, Mode::default_, x_cl);
  check_net(false, Mode::max_autotune, x);
}

TEST_CASE("KILN_LOGS=layout names each region and the cost model's choice", "[layout]") {
  // oneDNN chooses NHWC for these convs on some CPUs only; elsewhere there is no region.
  if (!runs_nhwc({2, 3, 32, 32}, {16, 3, 3, 3}, {2, 16, 32, 32}) ||
      !runs_nhwc({2, 16, 32, 32}, {16, 16, 3, 3}, {2, 16, 32, 32}))
    return;
  manual_seed(4);
  Conv c1(3, 16, 3, {1, 1}, {1, 1}), c2(16, 16, 3, {1, 1}, {1, 1});
  CompileOptions o;
  o.logs = "layout";
  auto f = compile([&](const Tensor& x) { return c2(c1(x, false).relu(), false).relu(); }, o);
  std::ostringstream text;
  std::streambuf* saved = std::cerr.rdbuf(text.rdbuf());
  (void)f(randn({2, 3, 32, 32}));
  std::cerr.rdbuf(saved);
  const std::string log = text.str();
  CHECK_THAT(log, Catch::Contains("[kiln layout] graph") &&
                      Catch::Contains("(2 convs, 3 values): channels-last, conversions") &&
                      Catch::Contains("< oneDNN's reorders"));
  CHECK(f.stats().channels_last_values == 3);
  CHECK(f.stats().layout_conversions == 1);

  // explain() gives the same line per graph, in its text and its JSON.
  ExplainReport rep =
      explain([&](const Tensor& x) { return c2(c1(x, false).relu(), false).relu(); },
              randn({2, 3, 32, 32}));
  REQUIRE(rep.graph_count() == 1);
  REQUIRE(rep.graphs[0].layout.size() == 1);
  CHECK_THAT(rep.graphs[0].layout[0], Catch::Contains("(2 convs, 3 values): channels-last"));
  CHECK_THAT(rep.str(), Catch::Contains("    layout: region of %"));
  const ExplainReport back = ExplainReport::from_json(rep.to_json());
  CHECK(back.graphs[0].layout == rep.graphs[0].layout);
  CHECK(back.to_json() == rep.to_json());
}
