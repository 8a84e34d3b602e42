// constant-fold: nodes of constants become constants equal to the eager kernels' results.
#include <catch2/catch.hpp>
#include <cstring>

#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/passes.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"

using namespace kiln;
using namespace kiln::ir;

namespace {
Type f32(Shape s) { return Type(DType::f32, std::move(s)); }

bool run_fold(Graph& g) {
  passes::PassContext ctx;
  REQUIRE(passes::constant_fold(g, ctx));
  REQUIRE(verify(g));
  return ctx.changed;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(),
                     static_cast<size_t>(a.numel() * a.itemsize())) == 0;
}
} // namespace

TEST_CASE("constant-fold: a chain of constant nodes folds to the eager result",
          "[passes][constant-fold]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({2, 3}), InputKind::user, "x");
  Tensor ta = tensor<float>({1.5f, -2.0f, 0.25f, 3.0f, -0.0f, 7.0f}, {2, 3});
  Tensor tb = tensor<float>({0.5f, 4.0f, -1.0f});
  Value* a = g.add_constant(ta);
  Value* c = g.add_constant(tb);
  Value* s = b.create(Op::add, {a, c}); // [2,3] by broadcast
  Value* e = b.create(Op::exp, {s});    // a constant after s folds
  Value* r = b.create(Op::sum, {e}, {std::vector<int64_t>{1}, true, DType::f32});
  Value* m = b.create(Op::mul, {x, r});
  g.add_output(m);
  CHECK(run_fold(g));
  REQUIRE(g.num_nodes() == 1);
  Node* mul = g.first_node();
  CHECK(mul->op() == Op::mul);
  Value* folded = mul->input(1);
  REQUIRE(folded->is_constant());
  CHECK(folded->type() == f32({2, 1}));
  Tensor want = dispatch1(Op::sum, {dispatch1(Op::exp, {dispatch1(Op::add, {ta, tb})})},
                          {std::vector<int64_t>{1}, true, DType::f32});
  CHECK(same_bytes(folded->constant(), want));
  CHECK_FALSE(run_fold(g));
}

TEST_CASE("constant-fold: wrapped numbers keep their flag and promotion",
          "[passes][constant-fold]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(Type(DType::i32, {4}), InputKind::user, "x");
  Value* two = b.scalar(int64_t{2});
  Value* three = b.scalar(int64_t{3});
  Value* six = b.create(Op::mul, {two, three});
  Value* y = b.create(Op::mul, {x, six});
  g.add_output(y);
  Type before = six->type();
  CHECK(run_fold(g));
  Value* c = y->producer()->input(1);
  REQUIRE(c->is_constant());
  CHECK(c->type() == before);
  CHECK(c->constant().item<int64_t>() == 6);
  CHECK(y->type().dtype() == DType::i32); // still promotes as a wrapped number would
}

TEST_CASE("constant-fold: a kernel error leaves the node in place", "[passes][constant-fold]") {
  Graph g;
  Builder b(g);
  Value* a = g.add_constant(tensor<int64_t>({7, 8}));
  Value* z = g.add_constant(tensor<int64_t>({1, 0}));
  Value* x = g.add_input(Type(DType::i64, {2}), InputKind::user, "x");
  Value* q = b.create(Op::floor_divide, {a, z});
  g.add_output(b.create(Op::add, {x, q}));
  CHECK_FALSE(run_fold(g));
  CHECK(g.num_nodes() == 2);
}

TEST_CASE("constant-fold: random, empty, views, factories and big results are not folded",
          "[passes][constant-fold]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({64, 64}), InputKind::user, "x");
  Value* c = g.add_constant(tensor<float>({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2}));
  Value* r = b.create(Op::rand, {}, {std::vector<int64_t>{2, 2}, DType::f32});
  Value* e = b.create(Op::empty, {}, {std::vector<int64_t>{2, 2}, DType::f32});
  Value* f = b.create(Op::full, {}, {std::vector<int64_t>{2, 2}, Scalar(1.0), DType::f32});
  Value* v = b.create(Op::permute, {c}, {std::vector<int64_t>{1, 0}});
  Value* big = g.add_constant(ones({4097}));
  Value* bb = b.create(Op::neg, {big}); // 4097 elements: over the bound
  Value* ok = g.add_constant(ones({4096}));
  Value* oo = b.create(Op::neg, {ok}); // 4096: folded
  Value* sum = b.create(Op::add, {b.create(Op::add, {r, e}), b.create(Op::add, {f, v})});
  g.add_output(b.create(Op::mul, {b.create(Op::view, {x}, {std::vector<int64_t>{4096}}), oo}));
  g.add_output(bb);
  g.add_output(sum);
  size_t before = g.num_nodes();
  CHECK(run_fold(g));
  CHECK(g.num_nodes() == before - 1);
  for (Node* n : g.nodes())
    CHECK(n->output() != oo);
  CHECK(bb->producer()->op() == Op::neg);
  CHECK(v->producer()->op() == Op::permute);
  CHECK(f->producer()->op() == Op::full);
}

TEST_CASE("constant-fold: a graph output is not replaced by a constant input",
          "[passes][constant-fold]") {
  Graph g;
  Builder b(g);
  Value* a = g.add_constant(tensor<float>({1.0f, 2.0f}));
  Value* n = b.create(Op::neg, {a});
  g.add_output(n);
  CHECK_FALSE(run_fold(g));
  CHECK(g.output(0) == n);
}
