// canonicalize: each rewrite, checked bit for bit on hostile values, and each case where a
// rewrite would give a wrong answer or a wrong type and so must not happen.
#include <catch2/catch.hpp>
#include <optional>

#include "ir/builder.h"
#include "pass_testing.h"
#include "passes/passes.h"

using namespace kiln;
using namespace kiln::ir;

namespace {
Type f32(Shape s) { return Type(DType::f32, std::move(s)); }
Type i32(Shape s) { return Type(DType::i32, std::move(s)); }
using Dims = std::vector<int64_t>;

struct Outcome {
  Value* operand; // what the consumer of r reads after the pass
  bool changed;
};

/// Makes r the operand of abs(r), the graph's output (so that r itself is no output), runs
/// canonicalize, checks that the graph verifies and, when args are given, that it computes
/// bit-identical results on them.
Outcome simplify(Graph& g, Value* r, std::optional<std::vector<Tensor>> args) {
  Builder b(g);
  Node* sink = b.create_node(Op::abs, {r});
  g.add_output(sink->output());
  std::unique_ptr<Graph> before = g.clone();
  passes::PassContext ctx;
  REQUIRE(passes::canonicalize(g, ctx));
  CHECK(testing::verifies(g));
  if (args) CHECK(testing::same_results(*before, g, *args));
  return {sink->input(0), ctx.changed};
}

/// The eager value of r's node on args (to show what a wrong rewrite would have broken).
Tensor eager(const Graph& g, Value* r, const std::vector<Tensor>& args) {
  std::unique_ptr<Graph> c = g.clone();
  // r is the last node's result in these tests: return it.
  REQUIRE(g.last_node()->output() == r);
  c->add_output(c->last_node()->output());
  return testing::run_graph(*c, args).back();
}
} // namespace

// ---------------------------------------------------------------- rewrites

TEST_CASE("canonicalize: x * 1 and 1 * x are x", "[passes][canonicalize]") {
  const std::vector<Tensor> args{testing::hostile_f32()};
  SECTION("wrapped int 1") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({8}), InputKind::user, "x");
    Outcome o = simplify(g, b.create(Op::mul, {x, b.scalar(1)}), args);
    CHECK(o.changed);
    CHECK(o.operand == x);
    CHECK(g.num_nodes() == 1); // the mul is gone
  }
  SECTION("wrapped float 1 on the left") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({8}), InputKind::user, "x");
    CHECK(simplify(g, b.create(Op::mul, {b.scalar(1.0), x}), args).operand == x);
  }
  SECTION("a constant tensor of ones, of another dtype that does not promote") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({8}), InputKind::user, "x");
    CHECK(simplify(g, b.create(Op::mul, {x, b.constant(ones({8}, DType::i64))}), args).operand ==
          x);
  }
  SECTION("a full node of ones") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({8}), InputKind::user, "x");
    Value* one = b.create(Op::full, {}, {Dims{8}, Scalar(1.0), DType::f32});
    CHECK(simplify(g, b.create(Op::mul, {one, x}), args).operand == x);
  }
  SECTION("integers, and a full whose value the kernel truncates to 1") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(i32({6}), InputKind::user, "x");
    Value* one = b.create(Op::full, {}, {Dims{6}, Scalar(1.5), DType::i32});
    Value* m = b.create(Op::mul, {b.create(Op::mul, {x, b.scalar(1)}), one});
    CHECK(simplify(g, m, std::vector<Tensor>{testing::hostile_i32()}).operand == x);
  }
}

TEST_CASE("canonicalize: x + 0 is x for integers and x + (-0.0) for floats",
          "[passes][canonicalize]") {
  SECTION("integers: any zero") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(i32({6}), InputKind::user, "x");
    Value* zero0d = b.constant(zeros({}, DType::i64)); // a 0-d tensor does not promote i32
    Value* a = b.create(Op::add, {b.create(Op::add, {x, b.scalar(0)}), zero0d});
    CHECK(simplify(g, a, std::vector<Tensor>{testing::hostile_i32()}).operand == x);
  }
  SECTION("floats: -0.0 on either side") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({8}), InputKind::user, "x");
    Value* negzero = b.create(Op::full, {}, {Dims{8}, Scalar(-0.0), DType::f32});
    Value* a = b.create(Op::add, {negzero, b.create(Op::add, {x, b.scalar(-0.0)})});
    CHECK(simplify(g, a, std::vector<Tensor>{testing::hostile_f32()}).operand == x);
  }
}

TEST_CASE("canonicalize: x - 0 is x for integers and x - (+0.0) for floats",
          "[passes][canonicalize]") {
  SECTION("floats: +0.0, or an integer zero (it converts to +0.0)") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({8}), InputKind::user, "x");
    Value* s = b.create(
        Op::sub, {b.create(Op::sub, {x, b.scalar(0.0)}), b.constant(zeros({8}, DType::i32))});
    CHECK(simplify(g, s, std::vector<Tensor>{testing::hostile_f32()}).operand == x);
  }
  SECTION("integers") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(i32({6}), InputKind::user, "x");
    CHECK(simplify(g, b.create(Op::sub, {x, b.scalar(0)}),
                   std::vector<Tensor>{testing::hostile_i32()})
              .operand == x);
  }
}

TEST_CASE("canonicalize: x - x is a full of zeros for integers", "[passes][canonicalize]") {
  SECTION("contiguous") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(i32({6}), InputKind::user, "x");
    Value* s = b.create(Op::sub, {x, x});
    Outcome o = simplify(g, s, std::vector<Tensor>{testing::hostile_i32()});
    REQUIRE(o.operand->producer() != nullptr);
    const Node* f = o.operand->producer();
    CHECK(f->op() == Op::full);
    CHECK(f->attrs().ints(0) == Dims{6});
    CHECK(f->attrs().scalar(1).is_integral());
    CHECK(f->attrs().scalar(1).to_int() == 0);
    CHECK(f->attrs().dtype(2) == DType::i32);
    CHECK(o.operand->type() == i32({6}));
  }
  SECTION("a strided x: the result is contiguous, as full's") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(Type(DType::i32, {3, 2}, {1, 3}), InputKind::user, "x");
    Outcome o = simplify(g, b.create(Op::sub, {x, x}),
                         std::vector<Tensor>{testing::hostile_i32({2, 3}).permute({1, 0})});
    REQUIRE(o.operand->producer() != nullptr);
    CHECK(o.operand->producer()->op() == Op::full);
  }
}

TEST_CASE("canonicalize: neg(neg(x)) is x", "[passes][canonicalize]") {
  SECTION("floats (NaN's sign flips twice)") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({8}), InputKind::user, "x");
    Value* n = x;
    for (int k = 0; k < 4; ++k)
      n = b.create(Op::neg, {n});
    Outcome o = simplify(g, n, std::vector<Tensor>{testing::hostile_f32()});
    CHECK(o.operand == x);
    CHECK(g.num_nodes() == 3); // the dead inner negations are left for DCE
  }
  SECTION("integers (INT_MIN wraps twice)") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(i32({6}), InputKind::user, "x");
    Value* n = b.create(Op::neg, {b.create(Op::neg, {x})});
    CHECK(simplify(g, n, std::vector<Tensor>{testing::hostile_i32()}).operand == x);
  }
}

TEST_CASE("canonicalize: permute of permute composes, or vanishes", "[passes][canonicalize]") {
  const std::vector<Tensor> args{testing::hostile_f32({2, 3, 4})};
  SECTION("to the identity") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({2, 3, 4}), InputKind::user, "x");
    Value* p = b.create(Op::permute, {x}, {Dims{1, 2, 0}});
    Value* q = b.create(Op::permute, {p}, {Dims{2, 0, 1}});
    CHECK(simplify(g, q, args).operand == x);
  }
  SECTION("to one permute, negative dims wrapped") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({2, 3, 4}), InputKind::user, "x");
    Value* p = b.create(Op::permute, {x}, {Dims{1, 0, -1}});
    Value* q = b.create(Op::permute, {p}, {Dims{0, -1, 1}});
    Outcome o = simplify(g, q, args);
    REQUIRE(o.operand->producer() != nullptr);
    const Node* r = o.operand->producer();
    CHECK(r->op() == Op::permute);
    CHECK(r->input(0) == x);
    CHECK(r->attrs().ints(0) == Dims{1, 2, 0});
  }
  SECTION("three transposes are one") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({2, 3, 4}), InputKind::user, "x");
    Value* t = x;
    for (int k = 0; k < 3; ++k)
      t = b.create(Op::permute, {t}, {Dims{1, 0, 2}});
    Outcome o = simplify(g, t, args);
    REQUIRE(o.operand->producer() != nullptr);
    CHECK(o.operand->producer()->input(0) == x);
    CHECK(o.operand->producer()->attrs().ints(0) == Dims{1, 0, 2});
  }
  SECTION("the identity permutation alone") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({2, 3, 4}), InputKind::user, "x");
    CHECK(simplify(g, b.create(Op::permute, {x}, {Dims{0, 1, 2}}), args).operand == x);
  }
}

TEST_CASE("canonicalize: view of view is one view, or nothing", "[passes][canonicalize]") {
  const std::vector<Tensor> args{testing::hostile_f32({2, 6})};
  SECTION("to another shape") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({2, 6}), InputKind::user, "x");
    Value* v = b.create(Op::view, {b.create(Op::view, {x}, {Dims{3, 4}})}, {Dims{-1}});
    Outcome o = simplify(g, v, args);
    REQUIRE(o.operand->producer() != nullptr);
    CHECK(o.operand->producer()->op() == Op::view);
    CHECK(o.operand->producer()->input(0) == x);
    CHECK(o.operand->type() == f32({12}));
  }
  SECTION("back to x's shape") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({2, 6}), InputKind::user, "x");
    Value* v = b.create(Op::view, {b.create(Op::view, {x}, {Dims{12}})}, {Dims{2, -1}});
    CHECK(simplify(g, v, args).operand == x);
  }
  SECTION("a view to its own shape") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({2, 6}), InputKind::user, "x");
    CHECK(simplify(g, b.create(Op::view, {x}, {Dims{2, 6}}), args).operand == x);
  }
}

TEST_CASE("canonicalize: expand to x's own shape and cast to x's dtype are x",
          "[passes][canonicalize]") {
  const std::vector<Tensor> args{testing::hostile_f32({2, 4})};
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({2, 4}), InputKind::user, "x");
  Value* e = b.create(Op::expand, {x}, {Dims{-1, 4}});
  Value* c = b.create(Op::cast, {e}, {DType::f32});
  CHECK(simplify(g, c, args).operand == x);
  CHECK(g.num_nodes() == 1);
}

// ---------------------------------------------------------------- blocked rewrites

TEST_CASE("canonicalize: x + 0.0 is not x for floats (-0.0 + 0.0 = +0.0)",
          "[passes][canonicalize]") {
  const std::vector<Tensor> args{testing::hostile_f32()};
  for (int variant = 0; variant < 3; ++variant) {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({8}), InputKind::user, "x");
    Value* zero = variant == 0   ? b.scalar(0.0)
                  : variant == 1 ? b.constant(zeros({8}, DType::i64)) // converts to +0.0
                                 : b.create(Op::full, {}, {Dims{8}, Scalar(0), DType::f32});
    Value* a = b.create(Op::add, {x, zero});
    // The rewrite would be wrong: eager gives +0.0 where x is -0.0.
    CHECK_FALSE(testing::bitwise_equal(eager(g, a, args), args[0]));
    Outcome o = simplify(g, a, args);
    CHECK_FALSE(o.changed);
    CHECK(o.operand == a);
  }
}

TEST_CASE("canonicalize: x - (-0.0) is not x for floats", "[passes][canonicalize]") {
  const std::vector<Tensor> args{testing::hostile_f32()};
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({8}), InputKind::user, "x");
  Value* s = b.create(Op::sub, {x, b.scalar(-0.0)});
  CHECK_FALSE(testing::bitwise_equal(eager(g, s, args), args[0]));
  CHECK_FALSE(simplify(g, s, args).changed);
}

TEST_CASE("canonicalize: x - x is not zero for floats, nor 0 - x rewritten",
          "[passes][canonicalize]") {
  const std::vector<Tensor> args{testing::hostile_f32()};
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({8}), InputKind::user, "x");
  Value* s = b.create(Op::sub, {x, x});
  // NaN - NaN and Inf - Inf are NaN.
  std::vector<float> v = eager(g, s, args).to_vector<float>();
  CHECK(std::isnan(v[2]));
  CHECK(std::isnan(v[3]));
  Value* r = b.create(Op::sub, {b.scalar(0), s});
  CHECK_FALSE(simplify(g, r, args).changed);
}

TEST_CASE("canonicalize: x - x on a CUDA device stays (full would be on the CPU)",
          "[passes][canonicalize]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(Type(DType::i32, {4}, {}, Device::cuda(0)), InputKind::user, "x");
  Outcome o = simplify(g, b.create(Op::sub, {x, x}), std::nullopt);
  CHECK_FALSE(o.changed);
  CHECK(o.operand->producer()->op() == Op::sub);
}

TEST_CASE("canonicalize: promotion blocks x * 1", "[passes][canonicalize]") {
  SECTION("i32 * 1.0 is f32") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(i32({6}), InputKind::user, "x");
    Value* m = b.create(Op::mul, {x, b.scalar(1.0)});
    REQUIRE(m->type().dtype() == DType::f32);
    CHECK_FALSE(simplify(g, m, std::vector<Tensor>{testing::hostile_i32()}).changed);
  }
  SECTION("f32 * ones(f64) is f64") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({8}), InputKind::user, "x");
    Value* m = b.create(Op::mul, {x, b.constant(ones({8}, DType::f64))});
    CHECK_FALSE(simplify(g, m, std::vector<Tensor>{testing::hostile_f32()}).changed);
  }
  SECTION("f16 * ones(f32) is f32") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(Type(DType::f16, {8}), InputKind::user, "x");
    Value* m = b.create(Op::mul, {x, b.constant(ones({8}))});
    CHECK_FALSE(simplify(g, m, std::vector<Tensor>{testing::hostile_f32().to(DType::f16)}).changed);
  }
  SECTION("i32 + 0.0 and i32 + zeros(f32) are f32") {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(i32({6}), InputKind::user, "x");
    Value* a = b.create(Op::add, {x, b.scalar(-0.0)});
    Value* c = b.create(Op::add, {b.constant(full({6}, -0.0)), x});
    REQUIRE(a->type().dtype() == DType::f32);
    REQUIRE(c->type().dtype() == DType::f32);
    CHECK_FALSE(simplify(g, b.create(Op::mul, {a, c}), std::vector<Tensor>{testing::hostile_i32()})
                    .changed);
  }
  SECTION("a wrapped number times 1 is a 0-d tensor, not a wrapped number") {
    Graph g;
    Builder b(g);
    Value* m = b.create(Op::mul, {b.scalar(2.0), b.scalar(1.0)});
    REQUIRE_FALSE(m->type().wrapped_number());
    CHECK_FALSE(simplify(g, m, std::vector<Tensor>{}).changed);
  }
}

TEST_CASE("canonicalize: broadcasting blocks x * 1 and x + 0", "[passes][canonicalize]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({3}), InputKind::user, "x");
  Value* k = g.add_input(i32({3}), InputKind::user, "k");
  Value* m = b.create(Op::mul, {x, b.constant(ones({4, 3}))});
  Value* a = b.create(Op::add, {k, b.constant(zeros({2, 3}, DType::i32))});
  Value* both = b.create(Op::add, {b.create(Op::sum, {m}, {Dims{}, false, DType::f32}),
                                   b.create(Op::sum, {a}, {Dims{}, false, DType::f32})});
  Outcome o =
      simplify(g, both, std::vector<Tensor>{tensor<float>({1, 2, 3}), tensor<int32_t>({1, 2, 3})});
  CHECK_FALSE(o.changed);
}

TEST_CASE("canonicalize: a strided x blocks rewrites whose result is contiguous",
          "[passes][canonicalize]") {
  const std::vector<Tensor> args{testing::hostile_f32({2, 4}).permute({1, 0})};
  for (int variant = 0; variant < 4; ++variant) {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(Type(DType::f32, {4, 2}, {1, 4}), InputKind::user, "x");
    Value* r = variant == 0   ? b.create(Op::mul, {x, b.scalar(1)})
               : variant == 1 ? b.create(Op::neg, {b.create(Op::neg, {x})})
               : variant == 2 ? b.create(Op::cast, {x}, {DType::f32})
                              : b.create(Op::add, {x, b.scalar(-0.0)});
    REQUIRE(r->type() == f32({4, 2}));
    CHECK_FALSE(simplify(g, r, args).changed);
  }
}

TEST_CASE("canonicalize: only identities are rewritten", "[passes][canonicalize]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({3}), InputKind::user, "x");
  Value* r = b.create(Op::mul, {x, b.scalar(2)});
  r = b.create(Op::mul, {r, b.constant(tensor<float>({1, 1, 2}))}); // not every element 1
  r = b.create(Op::add, {r, b.constant(tensor<float>({-0.0f, -0.0f, 0.0f}))});
  r = b.create(Op::cast, {r}, {DType::f64});
  r = b.create(Op::expand, {b.create(Op::sum, {r}, {Dims{}, true, DType::f64})}, {Dims{5}});
  r = b.create(Op::permute, {b.create(Op::view, {r}, {Dims{5, 1}})}, {Dims{1, 0}});
  CHECK_FALSE(
      simplify(g, b.create(Op::neg, {r}), std::vector<Tensor>{tensor<float>({1, 2, 3})}).changed);
}

TEST_CASE("canonicalize: view ops of a wrapped number keep their type", "[passes][canonicalize]") {
  // A view of a wrapped number is a plain 0-d tensor: the chain becomes one view, never w.
  Graph g;
  Builder b(g);
  Value* w = b.scalar(2.5);
  Value* p = b.create(Op::permute, {b.create(Op::permute, {w}, {Dims{}})}, {Dims{}});
  Value* v = b.create(Op::view, {b.create(Op::view, {w}, {Dims{1}})}, {Dims{}});
  Value* e = b.create(Op::expand, {w}, {Dims{}});
  Value* sum = b.create(Op::add, {b.create(Op::add, {p, v}), e});
  Outcome o = simplify(g, sum, std::vector<Tensor>{});
  CHECK(o.changed);
  const Node* add = o.operand->producer();
  REQUIRE(add->op() == Op::add);
  const Node* inner = add->input(0)->producer();
  REQUIRE(inner->op() == Op::add);
  REQUIRE(inner->input(0)->producer() != nullptr);
  CHECK(inner->input(0)->producer()->op() == Op::permute);
  CHECK(inner->input(0)->producer()->input(0) == w);
  REQUIRE(inner->input(1)->producer() != nullptr);
  CHECK(inner->input(1)->producer()->op() == Op::view);
  CHECK(inner->input(1)->producer()->input(0) == w);
  CHECK(add->input(1) == e); // expand of a wrapped number: not w
}

// ---------------------------------------------------------------- outputs and aliases

TEST_CASE("canonicalize: a graph output never becomes an alias of an input",
          "[passes][canonicalize]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({2, 4}), InputKind::user, "x");
  Value* flat = b.create(Op::view, {x}, {Dims{8}}); // still x's storage
  g.add_output(b.create(Op::mul, {x, b.scalar(1)}));
  g.add_output(b.create(Op::cast, {x}, {DType::f32}));
  g.add_output(b.create(Op::neg, {b.create(Op::neg, {x})}));
  g.add_output(b.create(Op::mul, {flat, b.scalar(1)}));
  g.add_output(b.create(Op::add, {b.constant(ones({8})), b.scalar(-0.0)})); // a constant
  passes::PassContext ctx;
  REQUIRE(passes::canonicalize(g, ctx));
  CHECK_FALSE(ctx.changed);
}

TEST_CASE("canonicalize: a graph output never becomes an alias of another output",
          "[passes][canonicalize]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  Value* e = b.create(Op::exp, {x});
  g.add_output(e);
  g.add_output(b.create(Op::mul, {e, b.scalar(1)}));
  passes::PassContext ctx;
  REQUIRE(passes::canonicalize(g, ctx));
  CHECK_FALSE(ctx.changed);
}

TEST_CASE("canonicalize: an output may become a fresh result, or an alias it already was",
          "[passes][canonicalize]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({2, 4}), InputKind::user, "x");
  Value* e = b.create(Op::exp, {x});
  g.add_output(b.create(Op::mul, {e, b.scalar(1)}));
  // A view of x is x's storage already: returning x itself aliases no more.
  Value* t = b.create(Op::permute, {x}, {Dims{1, 0}});
  g.add_output(b.create(Op::permute, {t}, {Dims{1, 0}}));
  passes::PassContext ctx;
  REQUIRE(passes::canonicalize(g, ctx));
  CHECK(ctx.changed);
  CHECK(g.output(0) == e);
  CHECK(g.output(1) == x);
}
