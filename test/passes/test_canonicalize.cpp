// canonicalize: each algebraic rewrite, and each case where it would change a bit or a type.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/passes.h"
#include "runtime/ops.h"

using namespace kiln;
using namespace kiln::ir;

namespace {
Type f32(Shape s) { return Type(DType::f32, std::move(s)); }

bool run_canon(Graph& g) {
  passes::PassContext ctx;
  REQUIRE(passes::canonicalize(g, ctx));
  REQUIRE(verify(g));
  return ctx.changed;
}

/// A graph `return exp(op(x, c))`: the exp keeps the result from being a graph output, so
/// only the algebra and the types decide.
struct Binary {
  Graph g;
  Value* x;
  Value* r;
  Binary(Op op, Type xt, const std::function<Value*(Builder&)>& c, bool c_first = false) {
    Builder b(g);
    x = g.add_input(std::move(xt), InputKind::user, "x");
    Value* k = c(b);
    r = b.create(op, c_first ? std::vector<Value*>{k, x} : std::vector<Value*>{x, k});
    g.add_output(b.create(Op::exp, {r}));
  }
  /// Runs the pass; true when the op was replaced by x.
  bool folds() {
    Node* user = r->producer()->next();
    bool changed = run_canon(g);
    bool gone = user->input(0) == x;
    CHECK(changed == gone);
    return gone;
  }
};

Value* scalar(Builder& b, Scalar s) { return b.scalar(s); }
} // namespace

TEST_CASE("canonicalize: x * 1 -> x, for wrapped numbers, splat tensors and full",
          "[passes][canonicalize]") {
  CHECK(Binary(Op::mul, f32({4}), [](Builder& b) { return scalar(b, 1.0); }).folds());
  CHECK(Binary(Op::mul, f32({4}), [](Builder& b) { return scalar(b, int64_t{1}); }).folds());
  CHECK(Binary(
            Op::mul, f32({4}), [](Builder& b) { return scalar(b, 1.0); }, true)
            .folds());
  CHECK(Binary(Op::mul, f32({2, 3}), [](Builder& b) {
          return b.constant(ones({3}));
        }).folds()); // broadcasts into x's shape: same type
  CHECK(Binary(Op::mul, Type(DType::i32, {4}), [](Builder& b) {
          return scalar(b, int64_t{1});
        }).folds());
  CHECK(Binary(Op::mul, f32({4}), [](Builder& b) {
          return b.create(Op::full, {}, {std::vector<int64_t>{4}, Scalar(1.0), DType::f32});
        }).folds());
}

TEST_CASE("canonicalize: x * 1 is kept when the type would change", "[passes][canonicalize]") {
  // i32 * 1.0 promotes to f32.
  CHECK_FALSE(
      Binary(Op::mul, Type(DType::i32, {4}), [](Builder& b) { return scalar(b, 1.0); }).folds());
  // x[3] * ones[4,3] broadcasts to [4,3].
  CHECK_FALSE(Binary(Op::mul, f32({3}), [](Builder& b) {
                return b.constant(ones({4, 3}));
              }).folds());
  // A strided x: the product is contiguous.
  CHECK_FALSE(Binary(Op::mul, Type(DType::f32, {3, 2}, {1, 3}), [](Builder& b) {
                return scalar(b, 1.0);
              }).folds());
  // Not all ones.
  CHECK_FALSE(Binary(Op::mul, f32({2}), [](Builder& b) {
                return b.constant(tensor<float>({1.0f, 2.0f}));
              }).folds());
  // f32 x times an f64 [4] tensor of ones promotes to f64.
  CHECK_FALSE(Binary(Op::mul, f32({4}), [](Builder& b) {
                return b.constant(ones({4}, DType::f64));
              }).folds());
}

TEST_CASE("canonicalize: x + 0 only where -0.0 survives", "[passes][canonicalize]") {
  // Integers: any zero.
  CHECK(Binary(Op::add, Type(DType::i64, {4}), [](Builder& b) {
          return scalar(b, int64_t{0});
        }).folds());
  CHECK(Binary(
            Op::add, Type(DType::i32, {4}),
            [](Builder& b) { return b.constant(zeros({4}, DType::i32)); }, true)
            .folds());
  // Floats: -0.0 is the identity of +.
  CHECK(Binary(Op::add, f32({4}), [](Builder& b) { return scalar(b, -0.0); }).folds());
  CHECK(Binary(
            Op::add, f32({4}), [](Builder& b) { return scalar(b, -0.0); }, true)
            .folds());
  // Floats: +0.0 is not (-0.0 + 0.0 = +0.0), nor an integer 0 (it converts to +0.0).
  CHECK_FALSE(Binary(Op::add, f32({4}), [](Builder& b) { return scalar(b, 0.0); }).folds());
  CHECK_FALSE(Binary(Op::add, f32({4}), [](Builder& b) { return scalar(b, int64_t{0}); }).folds());
  CHECK_FALSE(Binary(Op::add, f32({4}), [](Builder& b) { return b.constant(zeros({4})); }).folds());
  // Broadcast: x[3] + zeros[4,3] is [4,3].
  CHECK_FALSE(Binary(Op::add, Type(DType::i64, {3}), [](Builder& b) {
                return b.constant(zeros({4, 3}, DType::i64));
              }).folds());
  // Promotion: i32 + (-0.0) is f32.
  CHECK_FALSE(
      Binary(Op::add, Type(DType::i32, {3}), [](Builder& b) { return scalar(b, -0.0); }).folds());
}

TEST_CASE("canonicalize: the -0.0 rule matches the eager kernels", "[passes][canonicalize]") {
  Tensor x = tensor<float>({-0.0f, 0.0f, 1.0f});
  Tensor plus = add(x, scalar_tensor(0.0, DType::f32));
  CHECK_FALSE(std::signbit(plus.to_vector<float>()[0])); // why x + 0.0 is kept
  Tensor minus = add(x, scalar_tensor(-0.0, DType::f32));
  CHECK(std::signbit(minus.to_vector<float>()[0]));
  Tensor diff = sub(x, scalar_tensor(0.0, DType::f32));
  CHECK(std::signbit(diff.to_vector<float>()[0])); // why x - 0.0 folds
}

TEST_CASE("canonicalize: x - 0 -> x, x - (-0.0) kept for floats", "[passes][canonicalize]") {
  CHECK(Binary(Op::sub, f32({4}), [](Builder& b) { return scalar(b, 0.0); }).folds());
  CHECK(Binary(Op::sub, f32({4}), [](Builder& b) { return scalar(b, int64_t{0}); }).folds());
  CHECK(Binary(Op::sub, Type(DType::i64, {4}), [](Builder& b) {
          return scalar(b, int64_t{0});
        }).folds());
  CHECK_FALSE(Binary(Op::sub, f32({4}), [](Builder& b) { return scalar(b, -0.0); }).folds());
  // 0 - x is not x.
  CHECK_FALSE(
      Binary(
          Op::sub, Type(DType::i64, {4}), [](Builder& b) { return scalar(b, int64_t{0}); }, true)
          .folds());
}

TEST_CASE("canonicalize: x - x -> full(0) for integers only", "[passes][canonicalize]") {
  {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(Type(DType::i32, {2, 3}), InputKind::user, "x");
    Value* d = b.create(Op::sub, {x, x});
    g.add_output(b.create(Op::neg, {d}));
    CHECK(run_canon(g));
    Value* z = g.output(0)->producer()->input(0);
    REQUIRE(z->producer() != nullptr);
    CHECK(z->producer()->op() == Op::full);
    CHECK(z->type() == Type(DType::i32, {2, 3}));
    CHECK(z->producer()->attrs().scalar(1).to_int() == 0);
    CHECK(g.num_nodes() == 2);
  }
  {
    Graph g; // floats: NaN - NaN is NaN
    Builder b(g);
    Value* x = g.add_input(f32({3}), InputKind::user, "x");
    Value* d = b.create(Op::sub, {x, x});
    g.add_output(b.create(Op::neg, {d}));
    CHECK_FALSE(run_canon(g));
    CHECK(g.output(0)->producer()->input(0) == d);
  }
  {
    Graph g; // on a device full would be placed on the CPU: the type differs
    Builder b(g);
    Value* x = g.add_input(Type(DType::i64, {3}, {}, Device::cuda(0)), InputKind::user, "x");
    Value* d = b.create(Op::sub, {x, x});
    g.add_output(b.create(Op::neg, {d}));
    CHECK_FALSE(run_canon(g));
  }
}

TEST_CASE("canonicalize: neg(neg(x)) -> x unless the layout differs", "[passes][canonicalize]") {
  {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({4}), InputKind::user, "x");
    Value* n4 =
        b.create(Op::neg, {b.create(Op::neg, {b.create(Op::neg, {b.create(Op::neg, {x})})})});
    g.add_output(b.create(Op::exp, {n4}));
    CHECK(run_canon(g));
    CHECK(g.output(0)->producer()->input(0) == x);
    CHECK(g.num_nodes() == 3); // the first neg of each pair stays for DCE
  }
  {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(Type(DType::f32, {3, 2}, {1, 3}), InputKind::user, "x");
    Value* nn = b.create(Op::neg, {b.create(Op::neg, {x})});
    g.add_output(b.create(Op::exp, {nn}));
    CHECK_FALSE(run_canon(g));
  }
}

TEST_CASE("canonicalize: a fresh graph output is not replaced by an input or another output",
          "[passes][canonicalize]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  Value* e = b.create(Op::exp, {x});
  Value* m = b.create(Op::mul, {x, b.scalar(1.0)});                 // output: would return x itself
  Value* c = b.create(Op::cast, {e}, {DType::f32});                 // output: would alias output e
  Value* t = b.create(Op::permute, {x}, {std::vector<int64_t>{0}}); // a view aliases anyway
  Value* s = b.create(Op::sub, {b.create(Op::neg, {x}), b.scalar(0.0)}); // neg(x) is fresh
  g.add_output(m);
  g.add_output(e);
  g.add_output(c);
  g.add_output(t);
  g.add_output(s);
  CHECK(run_canon(g));
  CHECK(g.output(0) == m);
  CHECK(g.output(2) == c);
  CHECK(g.output(3) == x);
  CHECK(g.output(4)->producer()->op() == Op::neg);
}

TEST_CASE("canonicalize: permute of permute composes", "[passes][canonicalize]") {
  {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({2, 3, 4}), InputKind::user, "x");
    Value* p = b.create(Op::permute, {x}, {std::vector<int64_t>{1, 2, 0}});
    Value* q = b.create(Op::permute, {p}, {std::vector<int64_t>{2, 0, 1}}); // the inverse
    g.add_output(b.create(Op::exp, {q}));
    CHECK(run_canon(g));
    CHECK(g.output(0)->producer()->input(0) == x);
  }
  {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({2, 3, 4}), InputKind::user, "x");
    Value* p = b.create(Op::permute, {x}, {std::vector<int64_t>{1, 0, 2}});
    Value* q = b.create(Op::permute, {p}, {std::vector<int64_t>{0, -1, 1}});
    Type want = q->type();
    g.add_output(q);
    CHECK(run_canon(g));
    Value* r = g.output(0);
    REQUIRE(r->producer()->op() == Op::permute);
    CHECK(r->producer()->input(0) == x);
    // p = [1,0,2], q = [0,2,1]: r[i] = p[q[i]] = [1,2,0].
    CHECK(r->producer()->attrs().ints(0) == std::vector<int64_t>{1, 2, 0});
    CHECK(r->type() == want);
    // Numerics: the composed permute is the same view.
    Tensor t = arange(24, DType::f32).view({2, 3, 4});
    CHECK(t.permute({1, 0, 2}).permute({0, -1, 1}).contiguous().to_vector<float>() ==
          t.permute({1, 2, 0}).contiguous().to_vector<float>());
  }
  {
    Graph g; // identity permutation on its own
    Builder b(g);
    Value* x = g.add_input(f32({2, 3}), InputKind::user, "x");
    g.add_output(b.create(Op::permute, {x}, {std::vector<int64_t>{0, 1}}));
    CHECK(run_canon(g));
    CHECK(g.output(0) == x);
  }
}

TEST_CASE("canonicalize: view of view becomes one view", "[passes][canonicalize]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({2, 6}), InputKind::user, "x");
  Value* v1 = b.create(Op::view, {x}, {std::vector<int64_t>{3, 4}});
  Value* v2 = b.create(Op::view, {v1}, {std::vector<int64_t>{12}});
  Value* v3 = b.create(Op::view, {b.create(Op::view, {x}, {std::vector<int64_t>{12}})},
                       {std::vector<int64_t>{2, 6}});                 // back to x's shape
  Value* v4 = b.create(Op::view, {x}, {std::vector<int64_t>{2, -1}}); // x's own shape
  g.add_output(v2);
  g.add_output(v3);
  g.add_output(v4);
  CHECK(run_canon(g));
  Node* v = g.output(0)->producer();
  REQUIRE(v->op() == Op::view);
  CHECK(v->input(0) == x);
  CHECK(g.output(0)->type() == f32({12}));
  CHECK(g.output(1) == x);
  CHECK(g.output(2) == x);
}

TEST_CASE("canonicalize: views of a strided value keep its strides", "[passes][canonicalize]") {
  Graph g;
  Builder b(g);
  Value* y = g.add_input(Type(DType::f32, {4, 6}, {1, 4}), InputKind::user, "y");
  Value* v1 =
      b.create(Op::view, {y}, {std::vector<int64_t>{4, 2, 3}}); // splits the dim of stride 4
  Value* v2 = b.create(Op::view, {v1}, {std::vector<int64_t>{4, 6}});
  g.add_output(v2);
  run_canon(g);
  CHECK(g.output(0)->type() == Type(DType::f32, {4, 6}, {1, 4}));
  CHECK(g.output(0) == y); // its own type: the identity
}

TEST_CASE("canonicalize: expand to its own shape and cast to its own dtype vanish",
          "[passes][canonicalize]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({2, 3}), InputKind::user, "x");
  Value* i = g.add_input(Type(DType::i64, {3}), InputKind::user, "i");
  Value* e1 = b.create(Op::expand, {x}, {std::vector<int64_t>{2, 3}});
  Value* e2 = b.create(Op::expand, {x}, {std::vector<int64_t>{-1, 3}});
  Value* e3 = b.create(Op::expand, {x}, {std::vector<int64_t>{4, 2, 3}}); // a real broadcast
  Value* c1 = b.create(Op::cast, {x}, {DType::f32});
  Value* c2 = b.create(Op::cast, {i}, {DType::f32}); // a real conversion
  Value* c3 = b.create(Op::cast, {b.create(Op::permute, {x}, {std::vector<int64_t>{1, 0}})},
                       {DType::f32}); // a strided operand: the cast is a contiguous copy
  for (Value* v : {e1, e2, e3})
    g.add_output(b.create(Op::exp, {v}));
  g.add_output(b.create(Op::exp, {c1}));
  g.add_output(b.create(Op::exp, {c2}));
  g.add_output(b.create(Op::exp, {c3}));
  CHECK(run_canon(g));
  CHECK(g.output(0)->producer()->input(0) == x);
  CHECK(g.output(1)->producer()->input(0) == x);
  CHECK(g.output(2)->producer()->input(0) == e3);
  CHECK(g.output(3)->producer()->input(0) == x);
  CHECK(g.output(4)->producer()->input(0) == c2);
  CHECK(g.output(5)->producer()->input(0) == c3);
}
