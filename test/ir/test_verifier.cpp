// The verifier: a well-formed graph passes; each kind of mistake gives its message and node.
#include <catch2/catch.hpp>

#include "ir/builder.h"
#include "ir/verifier.h"
#include "runtime/ops.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

Type f32(Shape s) { return Type(DType::f32, std::move(s)); }

std::string error_of(const Graph& g, const Node** failed = nullptr) {
  auto r = verify(g, failed);
  REQUIRE_FALSE(r);
  return r.error().message();
}

} // namespace

TEST_CASE("verifier: a graph built by the builder verifies", "[ir][verifier]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({8, 4}));
  Value* w = g.add_input(f32({4, 4}), InputKind::parameter);
  Value* y = b.create(Op::add, {b.create(Op::matmul, {x, w}), b.scalar(Scalar(1.0))});
  g.add_output(y);
  g.add_write(w, b.create(Op::permute, {w}, {std::vector<int64_t>{1, 0}}));
  g.add_write(w, b.create(Op::mul, {w, b.constant(kiln::full({4, 4}, 2.0f))}));
  const Node* failed = reinterpret_cast<const Node*>(&g);
  CHECK(verify(g, &failed));
  CHECK(failed == nullptr);
}

TEST_CASE("verifier: a wrong result type names the node and both types", "[ir][verifier]") {
  Graph g;
  Value* a = g.add_input(f32({8, 4}));
  Value* c = g.add_input(f32({4}));
  Type bad[] = {f32({8})};
  Node* n = g.create_node(Op::add, {a, c}, {}, bad);
  g.add_output(n->output());
  const Node* failed = nullptr;
  CHECK(error_of(g, &failed) == "%2 = add: result 0 has type f32[8] but add infers f32[8,4]");
  CHECK(failed == n);
}

TEST_CASE("verifier: a wrong stride or dtype or result count is caught", "[ir][verifier]") {
  Graph g;
  Value* a = g.add_input(f32({2, 3}));
  Type contiguous[] = {f32({3, 2})};
  g.create_node(Op::permute, {a}, {std::vector<int64_t>{1, 0}}, contiguous);
  CHECK(error_of(g) == "%1 = permute: result 0 has type f32[3,2] but permute infers f32[3,2]{1,3}");
  Graph h;
  Value* x = h.add_input(f32({2}));
  Type two[] = {f32({2}), f32({2})};
  h.create_node(Op::exp, {x}, {}, two);
  CHECK(error_of(h) == "%1, %2 = exp: has 2 results but exp infers 1");
  Graph k;
  Value* y = k.add_input(f32({2}));
  Type i32[] = {Type(DType::i32, {2})};
  k.create_node(Op::neg, {y}, {}, i32);
  CHECK(error_of(k) == "%1 = neg: result 0 has type i32[2] but neg infers f32[2]");
}

TEST_CASE("verifier: arity and attributes are checked before inference", "[ir][verifier]") {
  Graph g;
  Value* a = g.add_input(f32({2}));
  Type t[] = {f32({2})};
  g.create_node(Op::add, {a}, {}, t);
  CHECK(error_of(g) == "%1 = add: add: expects 2 operands, got 1");
  Graph h;
  Value* x = h.add_input(f32({2, 3}));
  h.create_node(Op::permute, {x}, {int64_t{1}}, t);
  CHECK(error_of(h) == "%1 = permute: permute: attribute 'dims' must be of kind ints");
  Graph k;
  Value* y = k.add_input(f32({2, 3}));
  k.create_node(Op::sum, {y}, {std::vector<int64_t>{0}}, t);
  CHECK(error_of(k) == "%1 = sum: sum: expects 3 attributes, got 1");
}

TEST_CASE("verifier: inference failures name the node", "[ir][verifier]") {
  Graph g;
  Value* a = g.add_input(f32({2, 3}));
  Value* b = g.add_input(f32({4, 5}));
  Type t[] = {f32({2, 5})};
  g.create_node(Op::matmul, {a, b}, {}, t);
  CHECK_THAT(error_of(g), Catch::StartsWith("%2 = matmul: inference fails: matmul:"));
}

TEST_CASE("verifier: an operand used before its definition", "[ir][verifier]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}));
  Value* e = b.create(Op::exp, {x});
  Value* m = b.create(Op::mul, {x, e});
  g.add_output(m);
  g.move_before(m->producer(), e->producer()); // mul now reads exp's result before it exists
  const Node* failed = nullptr;
  CHECK(error_of(g, &failed) == "%1 = mul: operand 1 (%2) is used before it is defined");
  CHECK(failed == m->producer());
}

TEST_CASE("verifier: writes must target user or parameter inputs of the same type",
          "[ir][verifier]") {
  {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({4}));
    Value* c = b.constant(kiln::full({4}, 1.0f));
    g.add_write(c, b.create(Op::exp, {x}));
    const Node* failed = reinterpret_cast<const Node*>(&g);
    CHECK(error_of(g, &failed) == "graph @main: write 0 targets %1, which is a constant");
    CHECK(failed == nullptr);
  }
  {
    Graph g;
    Builder b(g);
    Value* x = g.add_input(f32({4}));
    Value* e = b.create(Op::exp, {x});
    g.add_write(e, x);
    CHECK(error_of(g) ==
          "graph @main: write 0 targets %1, which is a node result, not a graph input");
  }
  {
    Graph g("step");
    Builder b(g);
    Value* x = g.add_input(f32({4}));
    Value* s = b.create(Op::sum, {x}, {std::vector<int64_t>{}, false, DType::f32});
    g.add_write(x, s);
    CHECK(error_of(g) == "graph @step: write 0 stores %1 of type f32[] into %0 of type f32[4]");
    Graph h;
    Builder hb(h);
    Value* y = h.add_input(f32({4}), InputKind::parameter);
    h.add_write(y, hb.create(Op::cast, {y}, {DType::f16}));
    CHECK(error_of(h) == "graph @main: write 0 stores %1 of type f16[4] into %0 of type f32[4]");
    Graph k;
    Value* z = k.add_input(f32({4}));
    Value* zc = k.add_input(Type(DType::f32, {4}, {}, Device::cuda(0)));
    k.add_write(z, zc);
    CHECK_THAT(error_of(k), Catch::Contains("write 0 stores %1 of type f32[4]@cuda:0"));
  }
}

TEST_CASE("verifier: the first error wins and later nodes are not inferred", "[ir][verifier]") {
  Graph g;
  Value* a = g.add_input(f32({2}));
  Type t[] = {f32({3})};
  g.create_node(Op::exp, {a}, {}, t);
  Node* second = g.create_node(Op::exp, {a}, {}, t);
  (void)second;
  const Node* failed = nullptr;
  CHECK(error_of(g, &failed) == "%1 = exp: result 0 has type f32[3] but exp infers f32[2]");
  CHECK(failed == g.first_node());
}

TEST_CASE("verifier: symbolic sizes are refused with the node named", "[ir][verifier]") {
  Graph g;
  Value* a = g.add_input(Type(DType::f32, {Type::symbol(0)}));
  Type t[] = {Type(DType::f32, {Type::symbol(0)})};
  g.create_node(Op::exp, {a}, {}, t);
  CHECK_THAT(error_of(g), Catch::Contains("%1 = exp: inference fails") &&
                              Catch::Contains("symbolic sizes are not inferred yet"));
}

TEST_CASE("verifier: verification is linear in practice (a long chain)", "[ir][verifier]") {
  Graph g;
  Builder b(g);
  Value* v = g.add_input(f32({2}));
  for (int i = 0; i < 20000; ++i)
    v = b.create(Op::neg, {v});
  g.add_output(v);
  CHECK(verify(g));
}

TEST_CASE("verifier: a constant's type must match its data", "[ir][verifier]") {
  Graph g;
  Value* c = g.add_constant(kiln::full({4}, 1.0f));
  g.add_output(c);
  CHECK(verify(g));
  c->set_type(Type(DType::f32, {3}));
  CHECK(error_of(g) == "graph @main: constant %0 has type f32[3] but holds a f32[4] tensor");
  c->set_type(Type(DType::f64, {4}));
  CHECK(error_of(g) == "graph @main: constant %0 has type f64[4] but holds a f32[4] tensor");
  c->set_type(Type(DType::f32, {4}, {}, Device::cuda(0)));
  CHECK(error_of(g) ==
        "graph @main: constant %0 has type f32[4]@cuda:0; constants are contiguous and on the cpu");
}

TEST_CASE("verifier: the wrapped-number flag of a result is part of its type", "[ir][verifier]") {
  Graph g;
  Builder b(g);
  Value* s = b.scalar(Scalar(2.0));
  Value* x = g.add_input(f32({3}));
  // A result is never a wrapped number: only a C++ scalar operand is.
  Type wrapped[] = {Type(DType::f64, {}, {}, Device::cpu(), true)};
  Node* n = g.create_node(Op::neg, {s}, {}, wrapped);
  const Node* failed = nullptr;
  CHECK(error_of(g, &failed) == "%2 = neg: result 0 has type f64 but neg infers f64[]");
  CHECK(failed == n);
  g.erase(n);
  Type ok[] = {f32({3})};
  g.create_node(Op::mul, {x, s}, {}, ok);
  CHECK(verify(g));
}
