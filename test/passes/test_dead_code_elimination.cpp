// dead-code-elimination: unused nodes and constants go, the signature, outputs and writes stay.
#include <catch2/catch.hpp>

#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/passes.h"
#include "runtime/ops.h"

using namespace kiln;
using namespace kiln::ir;

namespace {
Type f32(Shape s) { return Type(DType::f32, std::move(s)); }

bool run_dce(Graph& g) {
  passes::PassContext ctx;
  REQUIRE(passes::dead_code_elimination(g, ctx));
  REQUIRE(verify(g));
  return ctx.changed;
}
} // namespace

TEST_CASE("dce: removes a dead chain transitively, keeps what outputs read", "[passes][dce]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  Value* e = b.create(Op::exp, {x});
  Value* dead1 = b.create(Op::neg, {e});
  b.create(Op::abs, {dead1}); // dead2 uses dead1: both go
  Value* m = b.create(Op::mul, {e, e});
  g.add_output(m);
  REQUIRE(g.num_nodes() == 4);
  CHECK(run_dce(g));
  REQUIRE(g.num_nodes() == 2);
  CHECK(g.first_node()->op() == Op::exp);
  CHECK(g.last_node()->op() == Op::mul);
  CHECK(g.output(0) == m);
  // A fixed point: a second run changes nothing.
  CHECK_FALSE(run_dce(g));
}

TEST_CASE("dce: removes unused constants, keeps unused user and parameter inputs",
          "[passes][dce]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  g.add_input(f32({4}), InputKind::parameter, "unused.weight");
  g.add_input(f32({2}), InputKind::user, "unused");
  Value* c = g.add_constant(ones({4}), false, "c");
  Value* used = g.add_constant(full({4}, 2.0f), false, "two");
  b.create(Op::add, {x, c}); // dead: c loses its only use
  g.add_output(b.create(Op::mul, {x, used}));
  CHECK(run_dce(g));
  REQUIRE(g.num_inputs() == 4);
  CHECK(g.input(0)->name() == "x");
  CHECK(g.input(1)->name() == "unused.weight");
  CHECK(g.input(2)->name() == "unused");
  CHECK(g.input(3)->name() == "two");
  CHECK(g.input(3)->index() == 3);
  CHECK(g.num_nodes() == 1);
}

TEST_CASE("dce: an in-place write keeps its source alive", "[passes][dce]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  Value* buf = g.add_input(f32({4}), InputKind::parameter, "running_mean");
  Value* upd = b.create(Op::mul, {x, b.scalar(0.5)});
  b.create(Op::sigmoid, {x}); // dead
  g.add_write(buf, upd);
  CHECK(run_dce(g));
  REQUIRE(g.num_nodes() == 1);
  CHECK(g.first_node()->op() == Op::mul);
  CHECK(g.writes()[0].source == upd);
  CHECK(g.num_inputs() == 3); // the 0.5 is still used
}

TEST_CASE("dce: an unchanged graph reports no change", "[passes][dce]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  g.add_output(b.create(Op::relu, {x}));
  CHECK_FALSE(run_dce(g));
  CHECK(g.num_nodes() == 1);
}
