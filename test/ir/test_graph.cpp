// The IR core: types, use lists, the builder, erasing, cloning.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>

#include "ir/builder.h"
#include "ir/graph.h"
#include "runtime/ops.h"

using namespace kiln;
using namespace kiln::ir;

namespace {
Type f32(Shape s) { return Type(DType::f32, std::move(s)); }
} // namespace

TEST_CASE("type: contiguous strides normalise to empty, others are kept", "[ir][type]") {
  Type a(DType::f32, {2, 3}, {3, 1});
  CHECK(a.is_contiguous());
  CHECK(a == f32({2, 3}));
  Type t(DType::f32, {3, 2}, {1, 3});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t != f32({3, 2}));
  CHECK(t.str() == "f32[3,2]{1,3}");
  CHECK(Type(DType::f64, {}, {}, Device::cpu(), true).str() == "f64");
  CHECK(Type(DType::i64, {}).str() == "i64[]");
  CHECK(Type(DType::f16, {4}, {}, Device::cuda(1)).str() == "f16[4]@cuda:1");
  Type sym(DType::f32, {Type::symbol(0), 16});
  CHECK_FALSE(sym.is_static());
  CHECK(sym.str() == "f32[s0,16]");
  CHECK(Type::from_meta(t.to_meta()) == t);
}

TEST_CASE("builder: results carry the inferred types", "[ir][builder]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({8, 1}), InputKind::user, "x");
  Value* y = g.add_input(f32({4}), InputKind::parameter, "w");
  Value* s = b.create(Op::add, {x, y});
  CHECK(s->type() == f32({8, 4}));
  Value* t = b.create(Op::permute, {s}, {std::vector<int64_t>{1, 0}});
  CHECK(t->type() == Type(DType::f32, {4, 8}, {1, 4}));
  Value* c = b.create(Op::mul, {t, b.scalar(2)});
  CHECK(c->type() == f32({4, 8})); // an int scalar does not promote f32
  Value* d = b.create(Op::mul, {t, b.scalar(2.5)});
  CHECK(d->type().dtype() == DType::f32);
  CHECK(g.num_nodes() == 4);
  // Bad operands are user errors naming the op.
  Value* z = g.add_input(f32({3, 2}), InputKind::user, "z");
  CHECK_THROWS_WITH(b.create(Op::add, {x, z}), Catch::Contains("add"));
  CHECK_THROWS_WITH(b.create(Op::add, {x}), Catch::Contains("expects 2 operands"));
  CHECK_THROWS_WITH(b.create(Op::sum, {x}, {int64_t{1}}), Catch::Contains("attributes"));
  CHECK(g.num_nodes() == 4);
}

TEST_CASE("use lists follow operands, outputs and writes", "[ir][uses]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({4}), InputKind::user, "x");
  Value* e = b.create(Op::exp, {x});
  Value* m = b.create(Op::mul, {e, e});
  g.add_output(m);
  g.add_write(x, e);
  REQUIRE(e->uses().size() == 3); // two operands of mul + the write's source
  CHECK(e->num_operand_uses() == 2);
  CHECK(x->uses().size() == 2); // exp's operand + the write's target
  CHECK(m->uses().size() == 1);
  CHECK(m->uses()[0].kind == Use::Kind::graph_output);

  // RAUW moves operand, output and write uses.
  Value* n = b.create(Op::neg, {x});
  e->replace_all_uses_with(n);
  CHECK_FALSE(e->has_uses());
  CHECK(m->producer()->input(0) == n);
  CHECK(m->producer()->input(1) == n);
  CHECK(g.writes()[0].source == n);
  CHECK(n->uses().size() == 3);
  g.erase(e->producer());
  CHECK(g.num_nodes() == 2);
  CHECK(x->uses().size() == 2); // exp's use is gone, neg's is there

  m->replace_all_uses_with(n);
  CHECK(g.output(0) == n);
  Node* mul = m->producer();
  mul->set_input(0, x);
  CHECK(x->uses().size() == 3);
  g.erase(mul);
  CHECK(x->uses().size() == 2);
}

TEST_CASE("node order: insertion points, move_before, erase", "[ir][graph]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({2}), InputKind::user);
  Value* a = b.create(Op::exp, {x});
  Value* c = b.create(Op::sin, {x});
  b.set_insertion_point(c->producer());
  Value* m = b.create(Op::cos, {a});
  std::vector<Op> order;
  for (Node* n : g.nodes())
    order.push_back(n->op());
  CHECK(order == std::vector<Op>{Op::exp, Op::cos, Op::sin});
  g.move_before(c->producer(), g.first_node());
  CHECK(g.first_node()->op() == Op::sin);
  CHECK(g.last_node()->op() == Op::cos);
  g.erase(m->producer());
  CHECK(g.last_node()->op() == Op::exp);
  CHECK(g.num_nodes() == 2);
  CHECK(g.first_node()->next() == g.last_node());
  CHECK(g.last_node()->prev() == g.first_node());
}

TEST_CASE("constants hold a private contiguous copy", "[ir][graph]") {
  Graph g;
  Tensor t = arange(0, 6).view({2, 3});
  Value* c = g.add_constant(t.t());
  CHECK(c->is_constant());
  CHECK(c->type() == Type(DType::i64, {3, 2}));
  CHECK(c->constant().is_contiguous());
  CHECK(c->constant().to_vector<int64_t>() == std::vector<int64_t>{0, 3, 1, 4, 2, 5});
  t.fill_(7);
  CHECK(c->constant().to_vector<int64_t>() == std::vector<int64_t>{0, 3, 1, 4, 2, 5});
  Value* x = g.add_input(f32({3}));
  CHECK(x->index() == 1);
  g.erase_input(c);
  CHECK(x->index() == 0);
  CHECK(g.num_inputs() == 1);
}

TEST_CASE("clone copies structure, names and locations", "[ir][graph]") {
  Graph g("f");
  Builder b(g);
  Value* x = g.add_input(f32({3}), InputKind::user, "x");
  Value* w = g.add_input(f32({3}), InputKind::parameter, "w");
  b.set_location("model.cpp:7");
  Value* s = b.create(Op::add, {x, w});
  g.add_output(s);
  g.add_write(w, s);
  auto c = g.clone();
  CHECK(c->name() == "f");
  REQUIRE(c->num_nodes() == 1);
  Node* n = c->first_node();
  CHECK(n->location() == "model.cpp:7");
  CHECK(n->input(0) == c->input(0));
  CHECK(n->input(1) == c->input(1));
  CHECK(c->input(1)->name() == "w");
  CHECK(c->input(1)->input_kind() == InputKind::parameter);
  CHECK(c->output(0) == n->output());
  CHECK(c->writes()[0].target == c->input(1));
  CHECK(c->writes()[0].source == n->output());
  CHECK(&n->graph() == c.get());
}

namespace {
/// Runs fn in a child process; returns what it wrote to stderr if it died of SIGABRT (the
/// way KILN_ASSERT stops), or "<no abort>".
template <typename Fn> std::string stderr_of_abort(Fn fn) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGABRT, SIG_DFL); // not Catch's handler: the child must just die
    dup2(fds[1], 2);
    close(fds[0]);
    fn();
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT ? out : "<no abort>";
}
} // namespace

TEST_CASE("erasing a node or input that is still used is an assert", "[ir][graph]") {
  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({2}), InputKind::user);
  Value* e = b.create(Op::exp, {x});
  Value* n = b.create(Op::neg, {e});
  g.add_output(n);
  CHECK_THAT(stderr_of_abort([&] { g.erase(e->producer()); }),
             Catch::Contains("kiln internal error") && Catch::Contains("still has 1 uses"));
  CHECK_THAT(stderr_of_abort([&] { g.erase(n->producer()); }), Catch::Contains("still has 1 uses"));
  CHECK_THAT(stderr_of_abort([&] { g.erase_input(x); }), Catch::Contains("still has"));
  // The parent's graph is untouched and erasing in use order works.
  CHECK(g.num_nodes() == 2);
  n->replace_all_uses_with(x);
  g.erase(n->producer());
  g.erase(e->producer());
  CHECK(g.num_nodes() == 0);
  CHECK(x->uses().size() == 1);
}
