// The min-cut partition of a forward graph for its backward: what is kept, what is computed
// again, and what must never be (random draws, reductions, contractions).
#include <catch2/catch.hpp>

#include "ir/builder.h"
#include "pass_testing.h"
#include "passes/partition.h"

using namespace kiln;
using namespace kiln::ir;

namespace {
Type f32(Shape s) { return Type(DType::f32, std::move(s)); }
using Dims = std::vector<int64_t>;

std::vector<const Value*> values(std::initializer_list<const Value*> vs) { return vs; }

} // namespace

TEST_CASE("partition: a pointwise value of a kept one is computed again", "[passes][partition]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({8, 16}), InputKind::user, "x");
  Value* w = g.add_input(f32({16, 32}), InputKind::parameter, "w");
  Value* h = b.create(Op::matmul, {x, w});
  Value* t = b.create(Op::tanh, {h});
  Value* y = b.create(Op::mul, {t, b.scalar(2.0)});
  g.add_output(y);
  // A tanh backward reads t; a matmul backward reads x (and w). Keeping h instead of t
  // costs the same, and t comes back from h: x and h, or x and t. Equal bytes: the cut
  // nearest the backward keeps t and recomputes nothing.
  SECTION("equal bytes: nothing is recomputed") {
    const passes::SavePartition p = passes::partition_for_backward(g, values({t, x}), {});
    CHECK(p.recompute.empty());
    CHECK(p.saved == values({x, t}));
    CHECK(p.saved_bytes == p.needed_bytes);
    CHECK(p.needed_bytes == (8 * 16 + 8 * 32) * 4);
  }
  SECTION("two needed values of one: the one is kept, the other recomputed") {
    // The backward reads both h and t (as gelu's does): keeping h alone is enough.
    const passes::SavePartition p = passes::partition_for_backward(g, values({h, t, x}), {});
    CHECK(p.saved == values({x, h}));
    REQUIRE(p.recompute.size() == 1);
    CHECK(p.recompute[0] == t->producer());
    CHECK(p.needed_bytes == (8 * 16 + 2 * 8 * 32) * 4);
    CHECK(p.saved_bytes == (8 * 16 + 8 * 32) * 4);
  }
  SECTION("a value the call returns costs nothing to keep") {
    const passes::SavePartition p = passes::partition_for_backward(g, values({h, y}), values({y}));
    CHECK(p.saved == values({h, y}));
    CHECK(p.recompute.empty());
  }
}

TEST_CASE("partition: a small value broadcast into a large one is kept small",
          "[passes][partition]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({64, 16}), InputKind::user, "x");
  Value* v = g.add_input(f32({16, 1}), InputKind::parameter, "v");
  Value* h = b.create(Op::matmul, {x, v});               // [64, 1]
  Value* e = b.create(Op::expand, {h}, {Dims{64, 128}}); // a view, [64, 128]
  Value* z = b.create(Op::exp, {e});                     // [64, 128]
  Value* s = b.create(Op::sum, {z}, {Dims{1}, false, DType::f32});
  g.add_output(s);
  const passes::SavePartition p = passes::partition_for_backward(g, values({z}), {});
  CHECK(p.saved == values({h}));
  REQUIRE(p.recompute.size() == 2);
  CHECK(p.recompute[0] == e->producer());
  CHECK(p.recompute[1] == z->producer());
  CHECK(p.needed_bytes == 64 * 128 * 4);
  CHECK(p.saved_bytes == 64 * 4);
}

TEST_CASE("partition: random draws, reductions and contractions are never computed again",
          "[passes][partition]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({32, 32}), InputKind::user, "x");
  // A dropout mask drawn in the forward: its bits must be the forward's. Cheaper to keep
  // the mask's source (r) than its result, but r is a draw: keep what the backward reads.
  Value* r = b.create(Op::rand, {}, {Dims{32, 32}, DType::f32});
  Value* keep = b.create(Op::ge, {r, b.scalar(0.5)}); // bool: a quarter of r's bytes
  Value* m = b.create(Op::mul, {x, keep});
  Value* s = b.create(Op::sum, {m}, {Dims{1}, true, DType::f32}); // [32, 1]
  Value* q = b.create(Op::div, {m, s});                           // [32, 32]
  g.add_output(q);
  const passes::SavePartition p = passes::partition_for_backward(g, values({keep, s, q}), {});
  for (const Node* n : p.recompute) {
    INFO("recomputed " << n->name());
    CHECK(passes::is_recomputable(*n));
  }
  // The mask is recomputed from r only if r is kept; keeping keep (1 byte an element) is
  // cheaper. q (4 bytes an element) comes back from x, keep and s: x is kept, s is kept.
  CHECK(std::find(p.saved.begin(), p.saved.end(), r) == p.saved.end());
  CHECK(std::find(p.saved.begin(), p.saved.end(), keep) != p.saved.end());
  CHECK(std::find(p.saved.begin(), p.saved.end(), s) != p.saved.end());
  CHECK(p.saved_bytes <= p.needed_bytes);
  CHECK_FALSE(passes::is_recomputable(*r->producer()));
  CHECK_FALSE(passes::is_recomputable(*s->producer()));
}

TEST_CASE("partition: a view of a parameter is computed again from it, for free",
          "[passes][partition]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4, 6}), InputKind::user, "x");
  Value* w = g.add_input(f32({3, 6}), InputKind::parameter, "w");
  Value* wt = b.create(Op::permute, {w}, {Dims{1, 0}});
  Value* y = b.create(Op::matmul, {x, wt});
  g.add_output(y);
  const passes::SavePartition p = passes::partition_for_backward(g, values({x, wt}), {});
  CHECK(p.saved == values({x, w}));
  REQUIRE(p.recompute.size() == 1);
  CHECK(p.recompute[0] == wt->producer());
  CHECK(p.needed_bytes == 4 * 6 * 4); // the parameter counts nothing
  CHECK(p.saved_bytes == 4 * 6 * 4);
}
