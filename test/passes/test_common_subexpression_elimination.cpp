// common-subexpression-elimination: equal nodes and equal constants merge, nothing else does.
#include <catch2/catch.hpp>
#include <limits>

#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/passes.h"
#include "runtime/ops.h"

using namespace kiln;
using namespace kiln::ir;

namespace {
Type f32(Shape s) { return Type(DType::f32, std::move(s)); }

bool run_cse(Graph& g) {
  passes::PassContext ctx;
  REQUIRE(passes::common_subexpression_elimination(g, ctx));
  REQUIRE(verify(g));
  return ctx.changed;
}

Attrs full_attrs(Shape sizes, Scalar v, DType dt = DType::f32) {
  return {std::vector<int64_t>(sizes), v, dt};
}
} // namespace

TEST_CASE("cse: equal nodes merge into the first, operand order matters", "[passes][cse]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  Value* y = g.add_input(f32({4}), InputKind::user, "y");
  Value* a1 = b.create(Op::add, {x, y});
  Value* a2 = b.create(Op::add, {x, y});
  Value* a3 = b.create(Op::add, {y, x}); // not merged: other order
  // Users of the merged nodes become equal and merge too.
  Value* e1 = b.create(Op::exp, {a1});
  Value* e2 = b.create(Op::exp, {a2});
  g.add_output(b.create(Op::mul, {e1, e2}));
  g.add_output(a3);
  CHECK(run_cse(g));
  REQUIRE(g.num_nodes() == 4); // add, add(y, x), exp, mul
  Node* mul = g.output(0)->producer();
  CHECK(mul->input(0) == e1);
  CHECK(mul->input(1) == e1);
  CHECK(e1->producer()->input(0) == a1);
  CHECK(g.output(1) == a3);
  CHECK_FALSE(run_cse(g));
}

TEST_CASE("cse: attributes compare exactly, floats by their bits", "[passes][cse]") {
  Graph g;
  Builder b(g);
  double nan = std::numeric_limits<double>::quiet_NaN();
  Value* z1 = b.create(Op::full, {}, full_attrs({2}, Scalar(0.0)));
  Value* z2 = b.create(Op::full, {}, full_attrs({2}, Scalar(-0.0)));       // not merged
  Value* zi = b.create(Op::full, {}, full_attrs({2}, Scalar(int64_t{0}))); // integral kind
  Value* n1 = b.create(Op::full, {}, full_attrs({2}, Scalar(nan)));
  b.create(Op::full, {}, full_attrs({2}, Scalar(nan))); // same bits: merged into n1
  Value* x = g.add_input(f32({2, 3}), InputKind::user, "x");
  Value* s0 = b.create(Op::sum, {x}, {std::vector<int64_t>{0}, false, DType::f32});
  Value* s1 = b.create(Op::sum, {x}, {std::vector<int64_t>{1}, false, DType::f32});
  Value* p1 = b.create(Op::pad, {x}, {std::vector<int64_t>{1, 1}, 0.0});
  Value* p2 = b.create(Op::pad, {x}, {std::vector<int64_t>{1, 1}, -0.0}); // not merged
  // Unused nodes are fine here: CSE does not look at uses.
  CHECK(run_cse(g));
  // Only n2 went; every other node is still there.
  CHECK(g.num_nodes() == 8);
  std::vector<Value*> left;
  for (Node* n : g.nodes())
    left.push_back(n->output());
  CHECK(left == std::vector<Value*>{z1, z2, zi, n1, s0, s1, p1, p2});
}

TEST_CASE("cse: random ops and empty are never merged", "[passes][cse]") {
  Graph g;
  Builder b(g);
  Attrs r = {std::vector<int64_t>{4}, DType::f32};
  Value* r1 = b.create(Op::rand, {}, r);
  Value* r2 = b.create(Op::rand, {}, r);
  Value* e1 = b.create(Op::empty, {}, r);
  Value* e2 = b.create(Op::empty, {}, r);
  g.add_output(b.create(Op::sub, {r1, r2}));
  g.add_output(b.create(Op::sub, {e1, e2}));
  CHECK_FALSE(run_cse(g));
  CHECK(g.num_nodes() == 6);
}

TEST_CASE("cse: two graph outputs are not merged into one tensor", "[passes][cse]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  Value* a = b.create(Op::exp, {x});
  Value* c = b.create(Op::exp, {x});
  g.add_output(a);
  g.add_output(c);
  CHECK_FALSE(run_cse(g));
  CHECK(g.output(0) != g.output(1));
}

TEST_CASE("cse: constants merge by type, wrapped flag and bytes", "[passes][cse]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({3}), InputKind::user, "x");
  Value* c1 = g.add_constant(tensor<float>({1.0f, 2.0f, 3.0f}), false, "a");
  Value* c2 = g.add_constant(tensor<float>({1.0f, 2.0f, 3.0f}), false, "b"); // merged into c1
  Value* pz = g.add_constant(tensor<float>({0.0f, 0.0f, 0.0f}));
  Value* nz = g.add_constant(tensor<float>({-0.0f, 0.0f, 0.0f})); // differs from pz by a bit
  Value* w = b.scalar(2.0);                                       // wrapped f64
  Value* t = g.add_constant(scalar_tensor(2.0, DType::f64));      // 0-d f64, not wrapped
  Value* i32 = g.add_constant(tensor<int32_t>({1, 2, 3}));
  Value* i64 = g.add_constant(tensor<int64_t>({1, 2, 3}));
  Value* m1 = b.create(Op::mul, {x, c1});
  Value* m2 = b.create(Op::mul, {x, c2}); // equal to m1 once c2 is c1
  g.add_output(b.create(Op::add, {m1, m2}));
  for (Value* v : {pz, nz, w, t, i32, i64})
    g.add_output(b.create(Op::add, {x, v}));
  REQUIRE(g.num_inputs() == 9);
  CHECK(run_cse(g));
  CHECK(g.num_inputs() == 8);
  for (Value* in : g.inputs())
    CHECK(in->name() != "b");
  Node* add = g.output(0)->producer();
  CHECK(add->input(0) == m1);
  CHECK(add->input(1) == m1);
  CHECK(m1->producer()->input(1) == c1);
  // The other six outputs still read six different constants.
  for (size_t i = 1; i < 7; ++i)
    for (size_t j = i + 1; j < 7; ++j)
      CHECK(g.output(i)->producer()->input(1) != g.output(j)->producer()->input(1));
}
