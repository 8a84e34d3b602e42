// The pass manager: registration, pass lists, verification, logging, the default pipeline.
#include <catch2/catch.hpp>
#include <sstream>

#include "ir/builder.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "runtime/ops.h"

using namespace kiln;

TEST_CASE("pass manager: an unknown pass name lists the known ones", "[passes]") {
  CHECK_THROWS_WITH(passes::PassManager::parse("dead-code-elimination,no-such-pass"),
                    Catch::Contains("no-such-pass") && Catch::Contains("dead-code-elimination"));
}

TEST_CASE("pass manager: every registered pass can be found and the short names alias",
          "[passes]") {
  for (const char* name : {"dead-code-elimination", "common-subexpression-elimination",
                           "constant-fold", "canonicalize", "dce", "cse"}) {
    const passes::PassInfo* p = passes::find_pass(name);
    REQUIRE(p != nullptr);
    CHECK(p->name == name);
    CHECK_FALSE(p->summary.empty());
  }
  CHECK(passes::find_pass("no-such-pass") == nullptr);
  passes::PassManager pm = passes::default_pipeline();
  std::vector<std::string> names;
  for (const passes::PassInfo& p : pm.passes())
    names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"canonicalize", "constant-fold",
                                          "common-subexpression-elimination",
                                          "dead-code-elimination"});
}

namespace {
ir::Type f32(Shape s) { return ir::Type(DType::f32, std::move(s)); }

/// x, exp(x), return: a graph the passes below leave alone or change on purpose.
std::unique_ptr<ir::Graph> small_graph() {
  auto g = std::make_unique<ir::Graph>("small");
  ir::Builder b(*g);
  ir::Value* x = g->add_input(f32({4}), ir::InputKind::user, "x");
  g->add_output(b.create(Op::exp, {x}));
  return g;
}

passes::PassInfo ill_typed_pass() {
  // Adds a node whose declared result type is not what inference gives.
  return {"make-ill-typed", "test: breaks the graph", [](ir::Graph& g, passes::PassContext& ctx) {
            ir::Type wrong = f32({5});
            ir::Node* n = g.create_node(Op::neg, {g.input(0)}, {}, std::span(&wrong, 1));
            g.set_output(0, n->output());
            ctx.changed = true;
            return Expected<void>();
          }};
}
} // namespace

TEST_CASE("pass manager: verify_each catches a pass that breaks the graph", "[passes]") {
  auto g = small_graph();
  passes::PassManager pm;
  pm.add("canonicalize");
  pm.add(ill_typed_pass());
  pm.add("dce");
  passes::PassContext ctx;
  ctx.verify_each = true;
  Expected<void> r = pm.run(*g, ctx);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("make-ill-typed") && Catch::Contains("neg"));
}

TEST_CASE("pass manager: a failing pass stops the pipeline and is named", "[passes]") {
  auto g = small_graph();
  passes::PassManager pm;
  pm.add({"always-fails", "test", [](ir::Graph&, passes::PassContext&) -> Expected<void> {
            return Error::without_location("no luck");
          }});
  passes::PassContext ctx;
  Expected<void> r = pm.run(*g, ctx);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("always-fails") && Catch::Contains("no luck"));
}

TEST_CASE("pass manager: log_passes prints the IR after a changing pass only", "[passes]") {
  auto g = small_graph();
  ir::Builder b(*g);
  b.create(Op::neg, {g->input(0)}); // dead: dce changes the graph, canonicalize does not
  passes::PassManager pm = passes::PassManager::parse("canonicalize,dce,cse");
  passes::PassContext ctx;
  ctx.log_passes = true;
  std::ostringstream log;
  ctx.log = &log;
  REQUIRE(pm.run(*g, ctx));
  std::string s = log.str();
  CHECK(s.find("IR after canonicalize") == std::string::npos);
  CHECK(s.find("IR after cse") == std::string::npos);
  size_t at = s.find("IR after dce (changed, ");
  REQUIRE(at != std::string::npos);
  CHECK(s.find(" ms)", at) != std::string::npos);
  CHECK(s.find("graph @small {", at) != std::string::npos);
  CHECK(s.find("neg") == std::string::npos); // printed after the dead neg went
  CHECK(s.find("exp(") != std::string::npos);
  CHECK(g->num_nodes() == 1);
}

TEST_CASE("pass manager: print_after_all prints unchanged passes too", "[passes]") {
  auto g = small_graph();
  passes::PassManager pm = passes::PassManager::parse("dce");
  passes::PassContext ctx;
  ctx.print_after_all = true;
  std::ostringstream log;
  ctx.log = &log;
  REQUIRE(pm.run(*g, ctx));
  CHECK_THAT(log.str(), Catch::Contains("IR after dce (unchanged"));
}

TEST_CASE("pass manager: the default pipeline simplifies and keeps the numbers", "[passes]") {
  // return (x * 1.0 + exp(c1 + c2)) + (x * 1.0 + exp(c1 + c2)) with a dead node and a
  // duplicate constant.
  ir::Graph g;
  ir::Builder b(g);
  ir::Value* x = g.add_input(f32({3}), ir::InputKind::user, "x");
  Tensor t1 = tensor<float>({0.5f, -1.0f, 2.0f});
  ir::Value* c1 = g.add_constant(t1);
  ir::Value* c2 = g.add_constant(t1);
  auto branch = [&] {
    ir::Value* m = b.create(Op::mul, {x, b.scalar(1.0)});
    return b.create(Op::add, {m, b.create(Op::exp, {b.create(Op::add, {c1, c2})})});
  };
  ir::Value* l = branch();
  ir::Value* r = branch();
  b.create(Op::sin, {x});
  g.add_output(b.create(Op::add, {l, r}));
  passes::PassContext ctx;
  ctx.verify_each = true;
  REQUIRE(passes::default_pipeline().run(g, ctx));
  // add(x, K), add(that, that): everything else folded, merged or removed.
  REQUIRE(g.num_nodes() == 2);
  ir::Node* inner = g.first_node();
  CHECK(inner->op() == Op::add);
  CHECK(inner->input(0) == x);
  REQUIRE(inner->input(1)->is_constant());
  CHECK(inner->input(1)->constant().to_vector<float>() == exp(add(t1, t1)).to_vector<float>());
  CHECK(g.last_node()->input(0) == inner->output());
  CHECK(g.last_node()->input(1) == inner->output());
  CHECK(g.num_inputs() == 2);
}
