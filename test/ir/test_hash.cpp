// Structural hash and equality: equal structure is equal; every single difference is seen.
#include <catch2/catch.hpp>
#include <functional>

#include "ir/builder.h"
#include "ir/hash.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

/// The knobs of one small graph; each test flips one.
struct Spec {
  DType dtype = DType::f32;
  InputKind wkind = InputKind::parameter;
  double pad_value = 0.0;
  int64_t slice_step = 1;
  bool swap = false;
  float constant_last = 3.0f;
  bool swap_outputs = false;
  bool write = true;
  bool wrapped = true;
  std::vector<int64_t> perm{1, 0};
  Scalar fill = Scalar(2);
  bool names = false;
};

std::unique_ptr<Graph> build(const Spec& s) {
  auto g = std::make_unique<Graph>(s.names ? "other" : "main");
  Builder b(*g);
  if (s.names) b.set_location("model.cpp:7");
  Value* x = g->add_input(Type(s.dtype, {4, 4}), InputKind::user, s.names ? "input" : "x");
  Value* w = g->add_input(Type(s.dtype, {4, 4}), s.wkind, s.names ? "weight" : "w");
  Tensor c = kiln::full({4}, 1.0f);
  c.data_ptr<float>()[3] = s.constant_last;
  Value* k = g->add_constant(c.to(s.dtype), false, s.names ? "k" : "");
  Value* two = g->add_constant(wrap_scalar(Scalar(2.0)), s.wrapped);
  Value* p = b.create(Op::permute, {w}, {s.perm});
  Value* m = s.swap ? b.create(Op::sub, {p, x}) : b.create(Op::sub, {x, p});
  Value* a = b.create(Op::add, {m, k});
  Value* d = b.create(Op::mul, {a, two});
  Value* q = b.create(Op::pad, {d}, {std::vector<int64_t>{1, 1}, s.pad_value});
  Value* sl = b.create(Op::slice, {q}, {int64_t{1}, int64_t{0}, int64_t{6}, s.slice_step});
  Value* f = b.create(Op::full, {}, {std::vector<int64_t>{2}, s.fill, s.dtype});
  if (s.swap_outputs) {
    g->add_output(f);
    g->add_output(sl);
  } else {
    g->add_output(sl);
    g->add_output(f);
  }
  if (s.write) g->add_write(x, d);
  return g;
}

void differs(const std::function<void(Spec&)>& change) {
  auto a = build(Spec{});
  Spec s;
  change(s);
  auto b = build(s);
  CHECK_FALSE(structurally_equal(*a, *b));
  CHECK_FALSE(structurally_equal(*b, *a));
  CHECK(structural_hash(*a) != structural_hash(*b));
}

} // namespace

TEST_CASE("hash: equal graphs built two ways are equal and hash equal", "[ir][hash]") {
  auto a = build(Spec{});
  auto b = build(Spec{});
  CHECK(structurally_equal(*a, *b));
  CHECK(structural_hash(*a) == structural_hash(*b));
  auto c = a->clone();
  CHECK(structurally_equal(*a, *c));
  CHECK(structural_hash(*a) == structural_hash(*c));
  CHECK(structural_hash(*a) == structural_hash(*a)); // deterministic
}

TEST_CASE("hash: names, graph names and locations do not matter", "[ir][hash]") {
  Spec s;
  s.names = true;
  auto a = build(Spec{});
  auto b = build(s);
  CHECK(structurally_equal(*a, *b));
  CHECK(structural_hash(*a) == structural_hash(*b));
}

TEST_CASE("hash: each single difference makes graphs unequal", "[ir][hash]") {
  SECTION("an attribute value") {
    differs([](Spec& s) { s.slice_step = 2; });
  }
  SECTION("an int list attribute") {
    differs([](Spec& s) { s.perm = {0, 1}; });
  }
  SECTION("a dtype") {
    differs([](Spec& s) { s.dtype = DType::f64; });
  }
  SECTION("an input kind") {
    differs([](Spec& s) { s.wkind = InputKind::user; });
  }
  SECTION("swapped operands") {
    differs([](Spec& s) { s.swap = true; });
  }
  SECTION("a constant byte") {
    differs([](Spec& s) { s.constant_last = 3.5f; });
  }
  SECTION("output order") {
    differs([](Spec& s) { s.swap_outputs = true; });
  }
  SECTION("a write") {
    differs([](Spec& s) { s.write = false; });
  }
  SECTION("the wrapped flag") {
    differs([](Spec& s) { s.wrapped = false; });
  }
  SECTION("-0.0 vs 0.0 in a float attribute") {
    differs([](Spec& s) { s.pad_value = -0.0; });
  }
  SECTION("a scalar attribute's kind") {
    differs([](Spec& s) { s.fill = Scalar(2.0); });
  }
}

TEST_CASE("hash: strides and devices of input types take part", "[ir][hash]") {
  Graph a, b, c;
  a.add_output(a.add_input(Type(DType::f32, {4, 2}, {1, 4})));
  b.add_output(b.add_input(Type(DType::f32, {4, 2}, {2, 1})));
  c.add_output(c.add_input(Type(DType::f32, {4, 2}, {}, Device::cuda(0))));
  CHECK_FALSE(structurally_equal(a, b));
  CHECK(structural_hash(a) != structural_hash(b));
  CHECK_FALSE(structurally_equal(b, c));
  CHECK(structural_hash(b) != structural_hash(c));
  Graph d;
  d.add_output(d.add_input(Type(DType::f32, {4, 2}, {2, 1}))); // normalised to contiguous
  CHECK(structurally_equal(b, d));
}

TEST_CASE("hash: wiring through an extra node differs", "[ir][hash]") {
  Graph a, b;
  Builder ba(a), bb(b);
  Value* x = a.add_input(Type(DType::f32, {4}));
  a.add_output(ba.create(Op::exp, {ba.create(Op::exp, {x})}));
  Value* y = b.add_input(Type(DType::f32, {4}));
  Value* e = bb.create(Op::exp, {y});
  bb.create(Op::exp, {y});
  b.add_output(e);
  CHECK_FALSE(structurally_equal(a, b));
  CHECK(structural_hash(a) != structural_hash(b));
}

TEST_CASE("hash: a graph built with the builder equals its parsed text", "[ir][hash]") {
  auto a = build(Spec{});
  // The same structure written by hand, with other value names, names and a location.
  const char* text = R"(graph @other {
  %x : f32[4,4] = input "a"
  %w : f32[4,4] = param "b"
  %k : f32[4] = const [1.0, 1.0, 1.0, 3.0] "c"
  %two : f64 = const 2.0
  %p : f32[4,4]{1,4} = permute(%w) {dims = [1, 0]}
  %m : f32[4,4] = sub(%x, %p)  // at here.cpp:1
  %a : f32[4,4] = add(%m, %k)
  %d : f32[4,4] = mul(%a, %two)
  %q : f32[4,6] = pad(%d) {pads = [1, 1], value = 0.0}
  %s : f32[4,6] = slice(%q) {dim = 1, start = 0, end = 6, step = 1}
  %f : f32[2] = full() {sizes = [2], value = 2, dtype = f32}
  write %x, %d
  return %s, %f
})";
  auto b = parse_graph(text);
  REQUIRE(b);
  CHECK(structurally_equal(*a, **b));
  CHECK(structural_hash(*a) == structural_hash(**b));
  auto c = parse_graph(print(*a));
  REQUIRE(c);
  CHECK(structurally_equal(*a, **c));
  CHECK(structural_hash(*a) == structural_hash(**c));
}

TEST_CASE("hash: result types take part, strides included", "[ir][hash]") {
  auto a = build(Spec{});
  auto b = build(Spec{});
  // The permute's result, made contiguous: wrong for the verifier, but a different key.
  b->first_node()->output()->set_type(Type(DType::f32, {4, 4}));
  CHECK_FALSE(structurally_equal(*a, *b));
  CHECK(structural_hash(*a) != structural_hash(*b));
}

TEST_CASE("hash: node order takes part (a cache miss, never a false hit)", "[ir][hash]") {
  Graph a, b;
  Builder ba(a), bb(b);
  Value* x = a.add_input(Type(DType::f32, {4}));
  Value* ea = ba.create(Op::exp, {x});
  Value* na = ba.create(Op::neg, {x});
  a.add_output(ea);
  a.add_output(na);
  Value* y = b.add_input(Type(DType::f32, {4}));
  Value* nb = bb.create(Op::neg, {y});
  Value* eb = bb.create(Op::exp, {y});
  b.add_output(eb);
  b.add_output(nb);
  CHECK_FALSE(structurally_equal(a, b));
}
