// kiln::compile on functions: capture, replay, in-place writes, results.
#include <limits>

#include "frontend_testing.h"

using namespace kiln;

TEST_CASE("compile: a pointwise function equals eager and replays") {
  auto fn = [](const Tensor& a, const Tensor& b) { return (a * 2 + b).relu() * b; };
  auto f = compile(fn);
  manual_seed(1);
  Tensor a = randn({4, 5}), b = randn({4, 5});
  KILN_REQUIRE_BITWISE(f(a, b), fn(a, b));
  KILN_REQUIRE_BITWISE(f(a, b), fn(a, b));
  CompileStats st = f.stats();
  CHECK(st.calls == 2);
  CHECK(st.traces == 1);
  CHECK(st.replays == 1);
  CHECK(st.compiles == 1);
  CHECK(st.graphs == 1);
  CHECK(st.breaks == 0);
  CHECK(st.recompiles == 0);
  CHECK(st.ops >= 4);
  // New data, same metadata: replayed on the new values.
  Tensor c = randn({4, 5});
  KILN_REQUIRE_BITWISE(f(c, b), fn(c, b));
  CHECK(f.stats().replays == 2);
}

TEST_CASE("compile: results of every supported kind") {
  manual_seed(2);
  Tensor a = randn({3, 4});
  auto pair = compile([](const Tensor& x) { return std::pair<Tensor, Tensor>{x.exp(), x.sum()}; });
  auto [e, s] = pair(a);
  auto exp_of = [](const Tensor& x) { return x.exp(); };
  auto sum_of = [](const Tensor& x) { return x.sum(); };
  KILN_REQUIRE_CLOSE(e, exp_of, a);
  KILN_REQUIRE_CLOSE(s, sum_of, a);
  auto tup = compile([](const Tensor& x) {
    return std::tuple<Tensor, Tensor, Tensor>{x, -x, x.t()};
  });
  for (int i = 0; i < 2; ++i) { // trace, then replay
    auto [x, n, t] = tup(a);
    KILN_REQUIRE_BITWISE(x, a);
    KILN_REQUIRE_BITWISE(n, -a);
    KILN_REQUIRE_BITWISE(t, a.t());
    CHECK(t.strides() == a.t().strides()); // a view stays a view of the argument
    CHECK(t.impl().storage == a.impl().storage);
  }
  auto vec = compile([](const Tensor& x) { return split(x, 2, 1); });
  std::vector<Tensor> parts = vec(a);
  REQUIRE(parts.size() == 2);
  KILN_REQUIRE_BITWISE(parts[1], a.slice(1, 2, 4));
  int calls = 0;
  auto side = compile([&](const Tensor& x) {
    ++calls; // a host side effect happens at trace time only (replay skips the C++)
    Tensor t = x;
    t.mul_(2);
  });
  Tensor y = ones({2});
  side(y);
  side(y);
  KILN_REQUIRE_BITWISE(y, full({2}, 4.0f));
  CHECK(calls == 1);
}

TEST_CASE("compile: scalar arguments are baked in and guarded by value") {
  auto f = compile([](const Tensor& x, double s, int64_t k, bool flip) {
    Tensor y = x * s + k;
    return flip ? -y : y;
  });
  Tensor x = arange(0, 6).to(DType::f32);
  KILN_REQUIRE_BITWISE(f(x, 0.5, int64_t{3}, false), x * 0.5 + 3);
  KILN_REQUIRE_BITWISE(f(x, 0.5, int64_t{3}, false), x * 0.5 + 3);
  CHECK(f.stats().recompiles == 0);
  KILN_REQUIRE_BITWISE(f(x, 0.25, int64_t{3}, false), x * 0.25 + 3);
  KILN_REQUIRE_BITWISE(f(x, 0.25, int64_t{3}, true), -(x * 0.25 + 3));
  CompileStats st = f.stats();
  CHECK(st.recompiles == 2);
  CHECK(st.traces == 3);
  REQUIRE(st.recompile_reasons.size() == 2);
  CHECK_THAT(st.recompile_reasons[0], Catch::Contains("scalar argument 1") &&
                                          Catch::Contains("0.5") && Catch::Contains("0.25"));
  CHECK_THAT(st.recompile_reasons[1], Catch::Contains("scalar argument 3"));
  // The earlier entries still answer their calls.
  KILN_REQUIRE_BITWISE(f(x, 0.5, int64_t{3}, false), x * 0.5 + 3);
  CHECK(f.stats().traces == 3);
}

TEST_CASE("compile: in-place writes to arguments happen as in eager code") {
  auto fn = [](const Tensor& x, const Tensor& y) {
    Tensor a = x;
    a.add_(y);                 // whole-tensor write to an argument
    a.slice(0, 1, 3).mul_(10); // write through a view
    Tensor t = a.t();
    t.select(0, 0).fill_(-1); // write through a transposed view: column 0 of a
    Tensor z = y.clone();
    z.relu_(); // write to an intermediate
    return z + a.sum({0});
  };
  manual_seed(3);
  Tensor x0 = randn({4, 3}), y = randn({4, 3});
  Tensor xe = x0.clone(), xc = x0.clone();
  Tensor want = fn(xe, y);
  Tensor x64 = x0.to(DType::f64);
  const Tensor want64 = fn(x64, y.to(DType::f64));
  auto f = compile(fn);
  // The result holds a sum, which compiled code may order otherwise: the f64 rule. The
  // written argument is elementwise work: bit for bit.
  KILN_REQUIRE_ACCURATE(f(xc, y), want, want64);
  KILN_REQUIRE_BITWISE(xc, xe);
  // Replayed: the same writes again.
  Tensor xe2 = x0.clone(), xc2 = x0.clone();
  Tensor want2 = fn(xe2, y);
  KILN_REQUIRE_ACCURATE(f(xc2, y), want2, want64);
  KILN_REQUIRE_BITWISE(xc2, xe2);
  CHECK(f.stats().replays == 1);
  CHECK(xc2.version() > 0);
}

TEST_CASE("compile: a function returning its written argument returns the argument") {
  auto f = compile([](const Tensor& x) {
    Tensor y = x;
    y.add_(1);
    return y.view({-1});
  });
  Tensor x = zeros({2, 2});
  for (int i = 1; i <= 2; ++i) {
    Tensor r = f(x);
    KILN_REQUIRE_BITWISE(x, full({2, 2}, static_cast<float>(i)));
    CHECK(r.impl().storage == x.impl().storage); // aliases x, as in eager code
  }
}

TEST_CASE("compile: views of an argument written in place keep its layout") {
  // Found by kiln fuzz: after a whole-tensor write, a view of a strided argument was traced
  // with the written value's contiguous strides. Its reshape then aliased the argument where
  // eager code copies (the compiled call failed), and a contiguous() that copies eagerly was
  // a no-op, so a write to the copy reached the argument (test/fuzz/regressions/*.prog).
  auto reshape_after_write = [](const Tensor& x, const Tensor& y) {
    Tensor a = x;
    a.sub_(y);
    return a.reshape({-1}); // eagerly a copy: a is stored transposed
  };
  auto write_to_a_copy = [](const Tensor& x) {
    Tensor a = x;
    a.mul_(x);
    Tensor v = a.reshape({4, 1, 5});
    CHECK(!v.is_contiguous()); // as eagerly: a view of the transposed argument
    Tensor c = v.contiguous(); // so a copy
    c.fill_(7);
    return a + 1;
  };
  manual_seed(4);
  Tensor base = randn({5, 4}), y = randn({4, 5});
  auto f = compile(reshape_after_write);
  auto g = compile(write_to_a_copy);
  for (int call = 0; call < 2; ++call) { // traced, then replayed
    // [4, 5] arguments stored transposed, in fresh storage for each side.
    Tensor xe = base.clone().t(), xc = base.clone().t();
    REQUIRE(!xc.is_contiguous());
    KILN_REQUIRE_BITWISE(f(xc, y), reshape_after_write(xe, y));
    KILN_REQUIRE_BITWISE(xc, xe);
    Tensor we = base.clone().t(), wc = base.clone().t();
    KILN_REQUIRE_BITWISE(g(wc), write_to_a_copy(we));
    KILN_REQUIRE_BITWISE(wc, we); // the fill reached neither
  }
  CHECK(f.stats().replays == 1);
  CHECK(g.stats().replays == 1);
}

TEST_CASE("compile: writes into an argument that aliases another one are refused") {
  auto f = compile([](const Tensor& a, const Tensor& b) {
    Tensor t = a;
    t.add_(b);
    return t;
  });
  Tensor x = ones({4});
  Tensor v = x.view({4});
  REQUIRE_THROWS_WITH(f(x, v), Catch::Contains("shares memory"));
}

TEST_CASE("compile: parameters changed in place between calls are seen") {
  nn::Linear lin(4, 3);
  auto cm = compile(lin);
  manual_seed(4);
  Tensor x = randn({2, 4});
  KILN_REQUIRE_BITWISE(cm(x), lin.forward(x));
  {
    NoGradGuard g;
    lin.weight.mul_(0.5); // an optimizer-style step
    lin.bias.add_(1.0);
  }
  Tensor eager = lin.forward(x);
  KILN_REQUIRE_BITWISE(cm(x), eager); // replayed: reads the parameters as they are now
  CompileStats st = cm.stats();
  CHECK(st.replays == 1);
  CHECK(st.recompiles == 0);
  // load_state_dict writes in place too.
  nn::Linear other(4, 3);
  lin.load_state_dict(other.state_dict());
  KILN_REQUIRE_BITWISE(cm(x), other.forward(x));
}

TEST_CASE("compile: module buffers written in train mode match eager over several calls") {
  // bn_r is the f64 reference: the same module in f64, fed the same batches in f64.
  nn::BatchNorm2d bn_e(3), bn_c(3), bn_r(3);
  bn_c.load_state_dict(bn_e.state_dict());
  bn_r.load_state_dict(bn_e.state_dict());
  bn_r.to(DType::f64);
  bn_e.train();
  bn_c.train();
  bn_r.train();
  auto cm = compile(bn_c);
  for (int step = 0; step < 3; ++step) {
    manual_seed(10 + static_cast<uint64_t>(step));
    Tensor x = randn({2, 3, 4, 4}) * (step + 1);
    KILN_REQUIRE_ACCURATE(cm(x), bn_e.forward(x), bn_r.forward(x.to(DType::f64)));
    KILN_REQUIRE_ACCURATE(bn_c.running_mean, bn_e.running_mean, bn_r.running_mean);
    KILN_REQUIRE_ACCURATE(bn_c.running_var, bn_e.running_var, bn_r.running_var);
    KILN_REQUIRE_BITWISE(bn_c.num_batches_tracked, bn_e.num_batches_tracked);
  }
  CHECK(cm.stats().traces == 1);
  CHECK(cm.stats().replays == 2);
}

TEST_CASE("compile: random ops draw the same numbers as eager") {
  auto fn = [](const Tensor& x) {
    return x + randn(x.sizes()) + rand(x.sizes()) * dropout(x, 0.5, true);
  };
  auto f = compile(fn);
  Tensor x = ones({64});
  for (int i = 0; i < 3; ++i) { // trace, replay, replay
    manual_seed(99 + static_cast<uint64_t>(i));
    Tensor want = fn(x);
    manual_seed(99 + static_cast<uint64_t>(i));
    KILN_REQUIRE_BITWISE(f(x), want);
  }
  // Without reseeding, consecutive calls draw fresh numbers, as eager calls do.
  manual_seed(5);
  Tensor e1 = fn(x), e2 = fn(x);
  manual_seed(5);
  Tensor c1 = f(x), c2 = f(x);
  KILN_REQUIRE_BITWISE(c1, e1);
  KILN_REQUIRE_BITWISE(c2, e2);
}

TEST_CASE("compile: backends eager, interpreter and kiln agree bit for bit") {
  auto fn = [](const Tensor& x) {
    Tensor y = (x * 1 + 0).exp() - x.exp(); // canonicalize and cse have work here
    return softmax(x, -1) + y + full({1}, 2.0f) * 3;
  };
  manual_seed(6);
  Tensor x = randn({3, 7});
  Tensor want = fn(x);
  for (const char* backend : {"eager", "interpreter", "kiln"}) {
    CompileOptions o;
    o.backend = backend;
    auto f = compile(fn, o);
    INFO(backend);
    KILN_REQUIRE_BITWISE(f(x), want);
    KILN_REQUIRE_BITWISE(f(x), want);
  }
  CompileOptions bad;
  bad.backend = "tpu";
  REQUIRE_THROWS_WITH(compile(fn, bad), Catch::Contains("unknown backend 'tpu'"));
  CompileOptions dyn;
  dyn.dynamic = true;
  REQUIRE_THROWS_WITH(compile(fn, dyn), Catch::Contains("dynamic=true"));
}

TEST_CASE("compile: errors in traced code name the op, the shapes and the caller's line") {
  auto f = compile([](const Tensor& a, const Tensor& b) { return a.matmul(b); });
  Tensor a = ones({2, 3}), b = ones({4, 5});
  try {
    f(a, b);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.message(),
               Catch::Contains("matmul") && Catch::Contains("[2, 3]") && Catch::Contains("[4, 5]"));
    CHECK_THAT(e.location(), Catch::Contains("test_compile.cpp"));
  }
  // The function still works afterwards.
  KILN_REQUIRE_BITWISE(f(a, ones({3, 1})), a.matmul(ones({3, 1})));
}

TEST_CASE("compile: a compiled function called while another traces is inlined") {
  auto inner = compile([](const Tensor& x) { return x * 3; });
  auto outer = compile([&](const Tensor& x) { return inner(x) + 1; });
  Tensor x = arange(0, 4).to(DType::f32);
  KILN_REQUIRE_BITWISE(outer(x), x * 3 + 1);
  KILN_REQUIRE_BITWISE(outer(x), x * 3 + 1);
  CHECK(outer.stats().graphs == 1);
  CHECK(inner.stats().traces == 0);
}

TEST_CASE("compile: a traced tensor kept past its call is made concrete") {
  Tensor kept;
  auto f = compile([&](const Tensor& x) {
    Tensor y = x + 1;
    kept = y * 2; // escapes: made concrete with the call's outputs
    return y;
  });
  Tensor x = ones({2});
  f(x);
  KILN_REQUIRE_BITWISE(kept, full({2}, 4.0f));
  CHECK_FALSE(kept.is_traced());
}

TEST_CASE("compile: a traced tensor kept from a call that failed is a clear error later") {
  Tensor kept;
  auto f = compile([&](const Tensor& x) {
    kept = x * 2;
    return x.matmul(ones({7, 7})); // fails: [2] x [7, 7]
  });
  REQUIRE_THROWS(f(ones({2})));
  REQUIRE(kept.is_traced());
  REQUIRE_THROWS_WITH(kept.to_vector<float>(), Catch::Contains("traced tensor"));
  auto g = compile([&](const Tensor& x) { return x + kept; });
  REQUIRE_THROWS_WITH(g(ones({2})), Catch::Contains("another compiled call"));
}

TEST_CASE("compile: division by a loop-invariant divisor, normal or not, as eager divides") {
  // A generated loop multiplies by the reciprocal of a divisor computed outside it (a row's
  // sum) only while that divisor is a normal number with a normal reciprocal; rows whose
  // divisor is subnormal, huge, zero, infinite or NaN divide, exactly as eager code does.
  const int64_t n = 40;
  Tensor x = randn({7, n});
  auto row = [&](int64_t r, double v) { x.select(0, r).fill_(v); };
  row(1, 1e-41); // subnormal sum 4e-40: 1/s overflows to inf
  row(2, 8e36);  // sum 3.2e38: 1/s is subnormal
  row(3, 0.0);   // 0 / 0
  row(4, 0.0);   // one infinity: inf / inf and 0 / inf
  x.select(0, 4).select(0, 3).fill_(std::numeric_limits<double>::infinity());
  row(5, 1.0); // a sum of zero: +-1 / 0
  x.select(0, 5).narrow(0, 0, n / 2).fill_(-1.0);
  x.select(0, 6).select(0, 0).fill_(std::numeric_limits<double>::quiet_NaN());
  auto by_rows = [](const Tensor& a) { return a / a.sum({1}, true); };
  auto by_columns = [](const Tensor& a) { return a / a.sum({0}, true); };
  auto f = compile(by_rows);
  auto g = compile(by_columns);
  KILN_REQUIRE_CLOSE(f(x), by_rows, x);
  KILN_REQUIRE_CLOSE(g(x), by_columns, x);
  // The rows with a normal divisor multiply: within the rule, and not always bitwise.
  Tensor y = randn({64, n}) + 3.0;
  KILN_REQUIRE_CLOSE(f(y), by_rows, y);
  KILN_REQUIRE_CLOSE(g(y.t().contiguous()), by_columns, y.t().contiguous());
}
