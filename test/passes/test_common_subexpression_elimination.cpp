// common-subexpression-elimination: what merges, and what must stay apart.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "pass_testing.h"
#include "passes/passes.h"

using namespace kiln;
using namespace kiln::ir;

namespace {
Type f32(Shape s) { return Type(DType::f32, std::move(s)); }

/// abs(v): keeps v from being a graph output itself (outputs have their own rule).
Value* sink(Builder& b, Value* v) { return b.create(Op::abs, {v}); }

bool cse(Graph& g) {
  passes::PassContext ctx;
  REQUIRE(passes::common_subexpression_elimination(g, ctx));
  CHECK(testing::verifies(g));
  return ctx.changed;
}
} // namespace

TEST_CASE("cse: equal nodes merge into the first, uses and writes follow", "[passes][cse]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  Value* y = g.add_input(f32({4}), InputKind::user, "y");
  Value* a1 = b.create(Op::add, {x, y});
  Value* a2 = b.create(Op::add, {x, y});
  Value* e1 = b.create(Op::exp, {a1});
  Value* e2 = b.create(Op::exp, {a2}); // equal once a2 is a1
  Value* m = b.create(Op::mul, {e1, e2});
  g.add_output(m);
  g.add_write(y, a2);
  CHECK(cse(g));
  REQUIRE(g.num_nodes() == 3);
  CHECK(m->producer()->input(0) == e1);
  CHECK(m->producer()->input(1) == e1);
  CHECK(g.writes()[0].source == a1);
  CHECK_FALSE(cse(g)); // a fixed point
}

TEST_CASE("cse: two graph outputs do not become one tensor", "[passes][cse]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({2, 3}), InputKind::user, "x");
  Value* e1 = b.create(Op::exp, {x});
  Value* e2 = b.create(Op::exp, {x});
  Value* n1 = b.create(Op::neg, {x});
  Value* n2 = b.create(Op::neg, {x});
  Value* r1 = b.create(Op::relu, {x});
  Value* r2 = b.create(Op::relu, {x});
  Value* t1 = b.create(Op::permute, {x}, {std::vector<int64_t>{1, 0}});
  Value* t2 = b.create(Op::permute, {x}, {std::vector<int64_t>{1, 0}});
  g.add_output(e1);
  g.add_output(e2); // both outputs: stays
  g.add_output(b.create(Op::view, {n1}, {std::vector<int64_t>{6}}));
  g.add_output(n2);                          // n1 reaches an output through a view: stays
  g.add_output(b.create(Op::add, {r1, r2})); // not outputs themselves: merge
  g.add_output(t1);
  g.add_output(t2); // views of x alias each other already: merge
  CHECK(cse(g));
  CHECK(g.output(0) == e1);
  CHECK(g.output(1) == e2);
  CHECK(g.output(3) == n2);
  CHECK(g.output(4)->producer()->input(1) == r1);
  CHECK(g.output(6) == t1);
  CHECK(g.num_nodes() == 8);
}

TEST_CASE("cse: operand order, attributes and result types must match exactly", "[passes][cse]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({2, 3}), InputKind::user, "x");
  Value* y = g.add_input(f32({2, 3}), InputKind::user, "y");
  g.add_output(sink(b, b.create(Op::sub, {x, y})));
  g.add_output(sink(b, b.create(Op::sub, {y, x}))); // other operand order
  g.add_output(sink(b, b.create(Op::sum, {x}, {std::vector<int64_t>{0}, false, DType::f32})));
  g.add_output(sink(b, b.create(Op::sum, {x}, {std::vector<int64_t>{1}, false, DType::f32})));
  g.add_output(sink(b, b.create(Op::sum, {x}, {std::vector<int64_t>{1}, true, DType::f32})));
  g.add_output(sink(b, b.create(Op::sum, {x}, {std::vector<int64_t>{1}, true, DType::f64})));
  // Float attributes by their bits: 0.0 and -0.0 are different padding values.
  g.add_output(sink(b, b.create(Op::pad, {x}, {std::vector<int64_t>{1, 1}, 0.0})));
  g.add_output(sink(b, b.create(Op::pad, {x}, {std::vector<int64_t>{1, 1}, -0.0})));
  // Scalars by kind and bits: 1, 1.0 and true are different attributes (the pass does not
  // reason about what a kernel makes of them); 0.0 and -0.0 fill differently.
  g.add_output(sink(b, b.create(Op::full, {}, {std::vector<int64_t>{2}, Scalar(1), DType::f32})));
  g.add_output(sink(b, b.create(Op::full, {}, {std::vector<int64_t>{2}, Scalar(1.0), DType::f32})));
  g.add_output(
      sink(b, b.create(Op::full, {}, {std::vector<int64_t>{2}, Scalar(true), DType::f32})));
  g.add_output(sink(b, b.create(Op::full, {}, {std::vector<int64_t>{2}, Scalar(0.0), DType::f32})));
  g.add_output(
      sink(b, b.create(Op::full, {}, {std::vector<int64_t>{2}, Scalar(-0.0), DType::f32})));
  const size_t before = g.num_nodes();
  CHECK_FALSE(cse(g));
  CHECK(g.num_nodes() == before);
}

TEST_CASE("cse: a NaN attribute equals the same NaN bits", "[passes][cse]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({3}), InputKind::user, "x");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Value* p1 = b.create(Op::pad, {x}, {std::vector<int64_t>{1, 0}, nan});
  Value* p2 = b.create(Op::pad, {x}, {std::vector<int64_t>{1, 0}, nan});
  Value* f1 = b.create(Op::full, {}, {std::vector<int64_t>{4}, Scalar(nan), DType::f32});
  Value* f2 = b.create(Op::full, {}, {std::vector<int64_t>{4}, Scalar(nan), DType::f32});
  Value* s = b.create(Op::add, {b.create(Op::add, {p1, p2}), b.create(Op::add, {f1, f2})});
  g.add_output(s);
  CHECK(cse(g));
  CHECK(g.num_nodes() == 5);
  CHECK(p1->uses().size() == 2);
  CHECK(f1->uses().size() == 2);
}

TEST_CASE("cse: random ops and empty are never merged", "[passes][cse]") {
  Graph g;
  Builder b(g);
  const Attrs sized{std::vector<int64_t>{4}, DType::f32};
  g.add_output(sink(b, b.create(Op::rand, {}, sized)));
  g.add_output(sink(b, b.create(Op::rand, {}, sized)));
  g.add_output(sink(b, b.create(Op::randn, {}, sized)));
  g.add_output(sink(b, b.create(Op::randn, {}, sized)));
  const Attrs ints{int64_t{0}, int64_t{10}, std::vector<int64_t>{4}, DType::i64};
  g.add_output(sink(b, b.create(Op::randint, {}, ints)));
  g.add_output(sink(b, b.create(Op::randint, {}, ints)));
  g.add_output(sink(b, b.create(Op::empty, {}, sized)));
  g.add_output(sink(b, b.create(Op::empty, {}, sized)));
  CHECK_FALSE(cse(g));
  CHECK(g.num_nodes() == 16);
}

TEST_CASE("cse: constants merge by type and bytes, then their users merge", "[passes][cse]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({3}), InputKind::user, "x");
  Value* c1 = g.add_constant(tensor<float>({1, 2, 3}), false, "first");
  Value* c2 = g.add_constant(tensor<float>({1, 2, 3}), false, "second"); // names do not count
  Value* m1 = b.create(Op::mul, {x, c1});
  Value* m2 = b.create(Op::mul, {x, c2});
  Node* use = b.create_node(Op::sub, {m1, m2});
  g.add_output(use->output());
  CHECK(cse(g));
  CHECK(g.num_inputs() == 2);
  CHECK(g.input(1) == c1);
  CHECK(g.num_nodes() == 2);
  CHECK(use->input(1) == m1);
}

TEST_CASE("cse: constants that differ in sign of zero, dtype, shape or wrapping stay apart",
          "[passes][cse]") {
  Graph g;
  Builder b(g);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  g.add_output(b.constant(scalar_tensor(0.0, DType::f32)));
  g.add_output(b.constant(scalar_tensor(-0.0, DType::f32))); // other bits
  g.add_output(b.constant(scalar_tensor(0.0, DType::f64)));  // other dtype
  g.add_output(b.constant(zeros({1}, DType::f32)));          // other shape
  g.add_output(b.scalar(0.0));                               // a wrapped f64 ...
  g.add_output(b.constant(scalar_tensor(0.0, DType::f64)));  // ... is not an f64 0-d tensor
  g.add_output(b.constant(scalar_tensor(nan, DType::f32)));  // NaN: merges with its bits
  g.add_output(b.constant(scalar_tensor(nan, DType::f32)));
  CHECK(cse(g));
  CHECK(g.num_inputs() == 6); // the second f64 0-d tensor and the second NaN merged
  CHECK(g.output(5) == g.output(2));
  CHECK(g.output(7) == g.output(6));
  CHECK(g.output(4) != g.output(2));
  CHECK(g.output(1) != g.output(0));
}

TEST_CASE("cse: merging keeps the results bit-identical", "[passes][cse]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({8}), InputKind::user, "x");
  Value* c1 = b.constant(full({8}, -0.0));
  Value* c2 = b.constant(full({8}, -0.0));
  Value* a = b.create(Op::sub, {b.create(Op::add, {x, c1}), b.create(Op::add, {x, c2})});
  Value* m =
      b.create(Op::mul, {b.create(Op::mul, {x, b.scalar(3)}), b.create(Op::mul, {x, b.scalar(3)})});
  g.add_output(a);
  g.add_output(m);
  std::unique_ptr<Graph> before = g.clone();
  CHECK(cse(g));
  CHECK(g.num_nodes() == 4);
  CHECK(testing::same_results(*before, g, {testing::hostile_f32()}));
}
