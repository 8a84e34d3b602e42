// dead-code-elimination: what it removes, and what it must keep.
#include <catch2/catch.hpp>

#include "ir/builder.h"
#include "pass_testing.h"
#include "passes/passes.h"

using namespace kiln;
using namespace kiln::ir;

namespace {
Type f32(Shape s) { return Type(DType::f32, std::move(s)); }
} // namespace

TEST_CASE("dce: removes a dead chain transitively and unused constants", "[passes][dce]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  Value* c = b.constant(ones({4}));
  Value* used = b.constant(full({4}, 2.0));
  Value* e = b.create(Op::exp, {x});
  Value* m = b.create(Op::mul, {e, c}); // dead, and only it uses c
  b.create(Op::neg, {m});               // dead
  Value* keep = b.create(Op::add, {x, used});
  g.add_output(keep);
  REQUIRE(g.num_nodes() == 4);

  passes::PassContext ctx;
  REQUIRE(passes::dead_code_elimination(g, ctx));
  CHECK(ctx.changed);
  REQUIRE(g.num_nodes() == 1);
  CHECK(g.first_node()->op() == Op::add);
  REQUIRE(g.num_inputs() == 2); // x and the used constant
  CHECK(g.input(0) == x);
  CHECK(g.input(1) == used);
  CHECK(used->index() == 1);
  CHECK(testing::verifies(g));

  // Nothing left to remove: unchanged.
  passes::PassContext again;
  REQUIRE(passes::dead_code_elimination(g, again));
  CHECK_FALSE(again.changed);
}

TEST_CASE("dce: keeps user and parameter inputs, outputs and the sources of writes",
          "[passes][dce]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  g.add_input(f32({4}), InputKind::user, "unused_arg");
  Value* buf = g.add_input(f32({4}), InputKind::parameter, "running_mean");
  g.add_input(f32({4}), InputKind::parameter, "unused_param");
  Value* upd = b.create(Op::mul, {buf, b.scalar(0.9)}); // read only by the write
  g.add_write(buf, upd);
  Value* out = b.create(Op::relu, {x});
  g.add_output(out);
  b.create(Op::sigmoid, {x}); // dead

  passes::PassContext ctx;
  REQUIRE(passes::dead_code_elimination(g, ctx));
  CHECK(ctx.changed);
  CHECK(g.num_inputs() == 5); // 4 arguments and the scalar 0.9
  REQUIRE(g.num_nodes() == 2);
  CHECK(g.first_node()->op() == Op::mul);
  CHECK(g.last_node()->op() == Op::relu);
  CHECK(g.writes()[0].source == upd);
  CHECK(testing::verifies(g));
}

TEST_CASE("dce: a dead random node is removed like any other", "[passes][dce]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  b.create(Op::rand, {}, {std::vector<int64_t>{4}, DType::f32});
  Value* r = b.create(Op::randn, {}, {std::vector<int64_t>{4}, DType::f32});
  g.add_output(b.create(Op::add, {x, r}));
  passes::PassContext ctx;
  REQUIRE(passes::dead_code_elimination(g, ctx));
  CHECK(ctx.changed);
  REQUIRE(g.num_nodes() == 2);
  CHECK(g.first_node()->op() == Op::randn);
}

TEST_CASE("dce: an empty graph and a graph without dead code are unchanged", "[passes][dce]") {
  Graph empty;
  passes::PassContext ctx;
  REQUIRE(passes::dead_code_elimination(empty, ctx));
  CHECK_FALSE(ctx.changed);

  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  Value* c = b.constant(ones({4}));
  g.add_output(b.create(Op::add, {x, c}));
  g.add_output(c); // a constant returned directly is used
  REQUIRE(passes::dead_code_elimination(g, ctx));
  CHECK_FALSE(ctx.changed);
  CHECK(g.num_nodes() == 1);
  CHECK(g.num_inputs() == 2);
}
