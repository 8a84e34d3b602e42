// constant-fold: folds with the eager kernels, skips what must not be folded.
#include <catch2/catch.hpp>

#include "ir/builder.h"
#include "pass_testing.h"
#include "passes/passes.h"

using namespace kiln;
using namespace kiln::ir;

namespace {
Type f32(Shape s) { return Type(DType::f32, std::move(s)); }

bool fold(Graph& g) {
  passes::PassContext ctx;
  REQUIRE(passes::constant_fold(g, ctx));
  CHECK(testing::verifies(g));
  return ctx.changed;
}
} // namespace

TEST_CASE("constant-fold: a chain of constant nodes becomes one constant", "[passes][fold]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({3}), InputKind::user, "x");
  Value* c1 = b.constant(tensor<float>({1, 2, 3}));
  Value* c2 = b.constant(tensor<float>({10, 20, 30}));
  Value* s = b.create(Op::add, {c1, c2});
  Value* t = b.create(Op::mul, {s, b.scalar(2)}); // a wrapped int keeps f32
  Value* u = b.create(Op::sub, {x, t});
  g.add_output(u);
  std::unique_ptr<Graph> before = g.clone();

  CHECK(fold(g));
  REQUIRE(g.num_nodes() == 1);
  Node* sub = g.first_node();
  CHECK(sub->op() == Op::sub);
  Value* folded = sub->input(1);
  REQUIRE(folded->is_constant());
  CHECK(folded->type() == f32({3}));
  CHECK(folded->constant().to_vector<float>() == std::vector<float>{22, 44, 66});
  CHECK(testing::same_results(*before, g, {tensor<float>({1, 1, 1})}));
  CHECK_FALSE(fold(g));
}

TEST_CASE("constant-fold: wrapped numbers promote as in eager", "[passes][fold]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({2}), InputKind::user, "x");
  Value* k = g.add_input(Type(DType::i64, {}), InputKind::user, "k");
  Value* c = b.constant(tensor<int32_t>({1, 2}));
  Value* half = b.create(Op::mul, {c, b.scalar(0.5)});        // i32 * float scalar: f32
  Value* sum = b.create(Op::add, {b.scalar(1), b.scalar(2)}); // two wrapped: an i64 0-d tensor
  Node* use_half = b.create_node(Op::add, {x, half});
  Node* use_sum = b.create_node(Op::add, {k, sum});
  g.add_output(use_half->output());
  g.add_output(use_sum->output());
  CHECK(fold(g));
  CHECK(g.num_nodes() == 2);
  Value* h = use_half->input(1);
  REQUIRE(h->is_constant());
  CHECK(h->type() == f32({2}));
  CHECK(h->constant().to_vector<float>() == std::vector<float>{0.5f, 1.0f});
  Value* s = use_sum->input(1);
  REQUIRE(s->is_constant());
  CHECK(s->type() == Type(DType::i64, {}));
  CHECK_FALSE(s->type().wrapped_number());
  CHECK(s->constant().item<int64_t>() == 3);
}

TEST_CASE("constant-fold: a kernel error leaves the node for run time", "[passes][fold]") {
  Graph g;
  Builder b(g);
  Value* a = b.constant(tensor<int64_t>({7, 8}));
  Value* z = b.constant(tensor<int64_t>({2, 0}));
  Value* k = g.add_input(Type(DType::i64, {2}), InputKind::user, "k");
  g.add_output(b.create(Op::add, {k, b.create(Op::floor_divide, {a, z})})); // divides by zero
  g.add_output(b.create(Op::add, {k, b.create(Op::remainder, {a, z})}));
  CHECK_FALSE(fold(g));
  CHECK(g.num_nodes() == 4);
}

TEST_CASE("constant-fold: random, empty, factories, views and non-constant operands stay",
          "[passes][fold]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({2, 3}), InputKind::user, "x");
  Value* c = b.constant(ones({2, 3}));
  // Each is read by a node of x, so that none is a graph output (outputs are never folded).
  auto use = [&](Value* v) { g.add_output(b.create(Op::add, {x, v})); };
  use(b.create(Op::rand, {}, {std::vector<int64_t>{3}, DType::f32}));
  use(b.create(Op::empty, {}, {std::vector<int64_t>{3}, DType::f32}));
  use(b.create(Op::full, {}, {std::vector<int64_t>{3}, Scalar(1.0), DType::f32}));
  use(b.create(Op::view, {c}, {std::vector<int64_t>{2, 3}})); // aliases c
  use(b.create(Op::expand, {b.constant(ones({1, 3}))}, {std::vector<int64_t>{2, 3}}));
  use(b.create(Op::neg, {x}));
  const size_t before = g.num_nodes();
  CHECK_FALSE(fold(g));
  CHECK(g.num_nodes() == before);
}

TEST_CASE("constant-fold: results above the bound are not materialised", "[passes][fold]") {
  Graph g;
  Builder b(g);
  const int64_t big = passes::kMaxFoldedElements + 1;
  Value* x = g.add_input(f32({big}), InputKind::user, "x");
  Value* y = g.add_input(f32({big - 1}), InputKind::user, "y");
  g.add_output(b.create(Op::add, {x, b.create(Op::neg, {b.constant(ones({big}))})}));
  g.add_output(b.create(Op::add, {y, b.create(Op::neg, {b.constant(ones({big - 1}))})}));
  CHECK(fold(g));
  REQUIRE(g.num_nodes() == 3);
  CHECK(g.first_node()->op() == Op::neg);
  CHECK(g.first_node()->output()->type().numel() == big);
}

TEST_CASE("constant-fold: a reduction and a copy fold bit for bit", "[passes][fold]") {
  Graph g;
  Builder b(g);
  Value* c = b.constant(testing::hostile_f32({2, 4}));
  Value* x = g.add_input(f32({2, 4}), InputKind::user, "x");
  Value* m = b.create(Op::amax, {c}, {std::vector<int64_t>{1}, true});
  Value* n = b.create(Op::neg, {c});
  Value* k = b.create(Op::copy, {c});
  // where(x > 0, ...) passes the folded values through bit for bit (NaN and -0.0 included).
  Value* pos = b.create(Op::gt, {x, b.scalar(0)});
  g.add_output(b.create(Op::where, {pos, n, k}));
  g.add_output(b.create(Op::where, {pos, m, x}));
  std::unique_ptr<Graph> before = g.clone();
  CHECK(fold(g));
  CHECK(g.num_nodes() == 3);
  CHECK(testing::same_results(*before, g, {tensor<float>({1, -1, 1, -1, 1, -1, 1, -1}, {2, 4})}));
}

TEST_CASE("constant-fold: skips a node whose declared type a constant cannot have",
          "[passes][fold]") {
  // A node on a CUDA device reading CPU constants cannot verify, but the pass must not turn it
  // into a CPU constant even so: the new constant's type must equal the result type.
  Graph g;
  Value* c = g.add_constant(ones({2}));
  Type cuda(DType::f32, {2}, {}, Device::cuda(0));
  Node* n = g.create_node(Op::neg, {c}, {}, std::span<const Type>(&cuda, 1));
  g.add_output(n->output());
  passes::PassContext ctx;
  REQUIRE(passes::constant_fold(g, ctx));
  CHECK_FALSE(ctx.changed);
  CHECK(g.num_nodes() == 1);
}

TEST_CASE("constant-fold: a graph output is not replaced by a constant input", "[passes][fold]") {
  // The caller would get the graph's own constant storage, which every call reuses.
  Graph g;
  Builder b(g);
  Value* c = b.constant(tensor<float>({1, 2}));
  Value* n = b.create(Op::neg, {c});
  g.add_output(n);
  g.add_output(b.create(Op::exp, {n})); // reads n, which stays a node: not all-constant
  CHECK_FALSE(fold(g));
  CHECK(g.num_nodes() == 2);
  CHECK(g.output(0) == n);
}
