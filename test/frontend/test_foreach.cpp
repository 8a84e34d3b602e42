// Foreach kernels run (codegen/foreach.h): an optimizer's update of many parameters as one
// kernel gives the step eager gives, writes in the parameters' buffers, and launches fewer
// kernels; kernels that read each other's results stay apart.
#include "frontend/frontend_testing.h"
#include "runtime/optim/optim.h"

using namespace kiln;

namespace {

/// A chain of four layers without biases: each weight's gradient comes from a matmul (a
/// library call), so each update is a kernel of its own before foreach joins them.
std::vector<Tensor> make_params(DType dtype) {
  manual_seed(17);
  std::vector<Tensor> p;
  for (const Shape& s : {Shape{16, 8}, Shape{8, 8}, Shape{8, 12}, Shape{12, 4}})
    p.push_back((randn(s) * 0.4).to(dtype).requires_grad_());
  return p;
}

Tensor step(std::vector<Tensor>& params, optim::AdamW& opt, const Tensor& x, const Tensor& y) {
  opt.zero_grad();
  Tensor h = x.to(params[0].dtype());
  for (size_t k = 0; k < params.size(); ++k)
    h = k + 1 < params.size() ? tanh(matmul(h, params[k])) : matmul(h, params[k]);
  Tensor loss = cross_entropy(h, y);
  loss.backward();
  opt.step();
  return loss;
}

} // namespace

TEST_CASE("foreach: an AdamW step over many parameters runs its updates as one kernel",
          "[foreach][llvm]") {
  const auto opts = optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.1};
  CompileStats with, without;
  for (const bool foreach : {true, false}) {
    INFO("foreach " << foreach);
    std::vector<Tensor> p = make_params(DType::f32), pe = make_params(DType::f32),
                        pr = make_params(DType::f64);
    optim::AdamW opt(p, opts), opt_e(pe, opts), opt_r(pr, opts);
    CompileOptions co;
    co.foreach = foreach;
    auto compiled =
        compile([&](const Tensor& x, const Tensor& y) { return step(p, opt, x, y); }, co);
    std::vector<const void*> buffers;
    for (const Tensor& t : p)
      buffers.push_back(t.raw_data());
    for (int s = 0; s < 6; ++s) {
      INFO("step " << s);
      manual_seed(30 + static_cast<uint64_t>(s));
      const Tensor x = randn({6, 16}), y = randint(0, 4, {6});
      const Tensor loss = compiled(x, y);
      KILN_REQUIRE_ACCURATE(loss, step(pe, opt_e, x, y), step(pr, opt_r, x.to(DType::f64), y));
      for (size_t k = 0; k < p.size(); ++k) {
        INFO("parameter " << k);
        KILN_REQUIRE_ACCURATE(p[k], pe[k], pr[k]);
        CHECK(p[k].raw_data() == buffers[k]); // updated in place
      }
    }
    (foreach ? with : without) = compiled.stats();
  }
  INFO("kernels per call: " << with.kernels << " with foreach, " << without.kernels << " without");
  // Four updates: one kernel instead of four.
  CHECK(with.kernels <= without.kernels - 3);
  CHECK(with.generated_kernels < without.generated_kernels);
}

TEST_CASE("foreach: kernels that read each other's results are not joined", "[foreach][llvm]") {
  // b's kernel has a's body but reads a's result through the matmul; c's is independent.
  auto fn = [](const Tensor& x, const Tensor& y, const Tensor& w) {
    const Tensor a = x * 2.0 + 1.0;
    const Tensor m = matmul(a, w);
    const Tensor b = m * 2.0 + 1.0;
    const Tensor c = y * 2.0 + 1.0;
    return cat({b, c, a.narrow(1, 0, 4)}, 0);
  };
  manual_seed(3);
  const Tensor x = randn({5, 6}), y = randn({5, 4}), w = randn({6, 4});
  auto compiled = compile(fn);
  KILN_REQUIRE_CLOSE(compiled(x, y, w), fn, x, y, w);
}
