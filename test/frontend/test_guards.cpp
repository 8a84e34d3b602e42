// Guards: each kind triggers exactly one recompile; the recompile limit; eager fallback.
#include "frontend_testing.h"

using namespace kiln;

namespace {

// After a first call, `change` makes the next call fail exactly one guard: one recompile,
// whose reason contains `reason`; calling again in the new state replays.
template <typename F>
void expect_one_recompile(F& f, const std::function<Tensor()>& call,
                          const std::function<void()>& change, const std::function<Tensor()>& eager,
                          const std::string& reason) {
  // Guards are under test here, not accuracy: the closures compute in the caller's dtypes, so
  // eager is the reference and the rule's floor bounds a reordered result (a compiled
  // reduction may sum in another order than eager's, so not bit for bit).
  KILN_REQUIRE_ACCURATE(call(), eager(), Tensor());
  KILN_REQUIRE_ACCURATE(call(), eager(), Tensor());
  CHECK(f.stats().recompiles == 0);
  change();
  KILN_REQUIRE_ACCURATE(call(), eager(), Tensor());
  KILN_REQUIRE_ACCURATE(call(), eager(), Tensor());
  CompileStats st = f.stats();
  CHECK(st.recompiles == 1);
  CHECK(st.traces == 2);
  REQUIRE(st.recompile_reasons.size() == 1);
  CHECK_THAT(st.recompile_reasons[0], Catch::Contains(reason));
}

} // namespace

TEST_CASE("guards: tensor argument metadata") {
  auto fn = [](const Tensor& x) { return (x * 2).sum({0}); };
  manual_seed(1);
  Tensor x = randn({4, 3});
  SECTION("dtype") {
    auto f = compile(fn);
    expect_one_recompile(
        f, [&] { return f(x); }, [&] { x = x.to(DType::f64); }, [&] { return fn(x); },
        "tensor argument 0: dtype f32 became f64");
  }
  SECTION("sizes") {
    auto f = compile(fn);
    expect_one_recompile(
        f, [&] { return f(x); },
        [&] {
          x = randn({5, 3});
        },
        [&] { return fn(x); }, "sizes [4, 3] became [5, 3]");
  }
  SECTION("strides") {
    auto f = compile(fn);
    expect_one_recompile(
        f, [&] { return f(x); },
        [&] {
          x = randn({3, 4}).t();
        },
        [&] { return fn(x); }, "strides [3, 1] became [1, 4]");
  }
  SECTION("requires_grad") {
    auto f = compile(fn);
    expect_one_recompile(
        f, [&] { return f(x); }, [&] { x.requires_grad_(); }, [&] { return fn(x); },
        "requires_grad false became true");
  }
}

TEST_CASE("guards: scalar arguments") {
  auto fn = [](const Tensor& x, int64_t k) { return x + k; };
  auto f = compile(fn);
  Tensor x = ones({2});
  int64_t k = 1;
  expect_one_recompile(
      f, [&] { return f(x, k); }, [&] { k = 2; }, [&] { return fn(x, k); },
      "scalar argument 1: int 1 became int 2");
}

TEST_CASE("guards: grad mode") {
  auto fn = [](const Tensor& x) { return x.exp(); };
  auto f = compile(fn);
  Tensor x = ones({2});
  std::optional<NoGradGuard> g;
  expect_one_recompile(
      f, [&] { return f(x); }, [&] { g.emplace(); }, [&] { return fn(x); },
      "grad mode: enabled became disabled");
}

namespace {
struct Net : nn::Module {
  nn::Linear fc{3, 2};
  nn::Dropout drop{0.5};
  Net() {
    register_module("fc", fc);
    register_module("drop", drop);
  }
  Tensor forward(const Tensor& x) override { return drop(fc(x)); }
};
} // namespace

TEST_CASE("guards: module train/eval mode") {
  Net net;
  net.eval();
  auto cm = compile(net);
  manual_seed(2);
  Tensor x = randn({4, 3});
  expect_one_recompile(
      cm,
      [&] {
        manual_seed(3);
        return cm(x);
      },
      [&] { net.train(); },
      [&] {
        manual_seed(3);
        return net.forward(x);
      },
      "module mode: drop was eval, now train");
}

TEST_CASE("guards: parameter identity (a re-assigned member)") {
  Net net;
  net.eval();
  auto cm = compile(net);
  Tensor x = ones({1, 3});
  expect_one_recompile(
      cm, [&] { return cm(x); },
      [&] {
        NoGradGuard g;
        net.fc.weight = zeros({2, 3}).requires_grad_(); // a new tensor, not an in-place write
      },
      [&] { return net.forward(x); }, "module tensor identity: fc.weight");
}

TEST_CASE("guards: the version of a tensor read on the host while tracing") {
  // The branch depends on the buffer's value, so the trace holds only while it is unchanged.
  Tensor flag = ones({1});
  auto fn = [&](const Tensor& x) { return flag.item<float>() > 0 ? x * 2 : x * -2; };
  auto f = compile(fn);
  Tensor x = arange(0, 3).to(DType::f32);
  expect_one_recompile(
      f, [&] { return f(x); }, [&] { flag.fill_(-1); }, [&] { return fn(x); }, "tensor version");
  CHECK(f.stats().breaks == 0); // a concrete tensor's read is not a break
}

TEST_CASE("guards: captured tensor metadata") {
  nn::Linear lin(3, 2);
  auto fn = [&](const Tensor& x) { return linear(x, lin.weight, lin.bias); };
  auto f = compile(fn); // a lambda: parameters are captured tensors, guarded by metadata
  Tensor x = ones({1, 3});
  expect_one_recompile(
      f, [&] { return f(x); }, [&] { lin.weight.requires_grad_(false); }, [&] { return fn(x); },
      "captured tensor");
}

TEST_CASE("guards: recompile limit runs eagerly with one warning, or fails") {
  auto fn = [](const Tensor& x) { return x * 3; };
  CompileOptions o;
  o.recompile_limit = 2;
  auto f = compile(fn, o);
  for (int64_t n = 1; n <= 5; ++n) {
    Tensor x = ones({n});
    KILN_REQUIRE_BITWISE(f(x), fn(x));
  }
  CompileStats st = f.stats();
  CHECK(st.recompiles == 2);
  CHECK(st.traces == 3);
  CHECK(st.eager_calls == 2);
  // Shapes seen before the limit still replay.
  KILN_REQUIRE_BITWISE(f(ones({2})), full({2}, 3.0f));
  CHECK(f.stats().replays == 1);

  o.fail_on_recompile = true;
  auto g = compile(fn, o);
  g(ones({1}));
  g(ones({2}));
  g(ones({3}));
  REQUIRE_THROWS_WITH(g(ones({4})), Catch::Contains("recompile limit (2)") &&
                                        Catch::Contains("sizes [3] became [4]"));
}

TEST_CASE("guards: explain lists them") {
  Net net;
  net.eval();
  auto cm = compile(net);
  ExplainReport rep = explain(cm, ones({2, 3}));
  std::string all;
  for (const std::string& g : rep.guards)
    all += g + "\n";
  CHECK_THAT(all, Catch::Contains("grad mode is enabled") &&
                      Catch::Contains("module <root> and its 2 submodules are all in eval mode") &&
                      Catch::Contains("tensor argument 0: f32 sizes [2, 3]") &&
                      Catch::Contains("captured tensor fc.weight"));
  CHECK(cm.stats().calls == 0); // explain leaves the stats alone
}

TEST_CASE("guards: arguments that share memory") {
  // Traced with separate tensors, the graph reads b before a's write lands; called with one
  // tensor twice, eager code would read the written value, so the entry must not replay.
  auto fn = [](const Tensor& a, const Tensor& b) {
    Tensor t = a;
    t.add_(1);
    return b * 2;
  };
  auto f = compile(fn);
  Tensor x = zeros({3}), y = zeros({3});
  f(x, y);
  f(x, y);
  CHECK(f.stats().replays == 1);
  Tensor z = zeros({3});
  REQUIRE_THROWS_WITH(f(z, z), Catch::Contains("shares memory"));
  CompileStats st = f.stats();
  REQUIRE(st.recompile_reasons.size() == 1);
  CHECK_THAT(st.recompile_reasons[0],
             Catch::Contains("argument aliasing: tensor argument 1 had its own memory"));
  // Reading the same tensor twice without writing is fine (and replays).
  auto g = compile([](const Tensor& a, const Tensor& b) { return a + b; });
  g(z, z);
  KILN_REQUIRE_BITWISE(g(z, z), z + z);
  CHECK(g.stats().replays == 1);
}

TEST_CASE("guards: the mode of a module a lambda reaches is guarded when the code reads it") {
  Net net;
  net.eval();
  auto f = compile([&](const Tensor& x) { return net.forward(x); }); // no module given
  manual_seed(2);
  Tensor x = randn({4, 3});
  expect_one_recompile(
      f,
      [&] {
        manual_seed(3);
        return f(x);
      },
      [&] { net.train(); },
      [&] {
        manual_seed(3);
        return net.forward(x);
      },
      "module mode: Dropout was eval, now train");
}
