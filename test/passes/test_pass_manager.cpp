// The pass manager: registration, parsing of pass lists, verifying, logging, the pipeline.
#include <catch2/catch.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "pass_testing.h"
#include "passes/fusion.h"
#include "passes/passes.h"

using namespace kiln;
using namespace kiln::ir;

namespace {
Type f32(Shape s) { return Type(DType::f32, std::move(s)); }

/// x -> mul(x, 1) -> exp: canonicalize changes it, dead-code-elimination does not.
std::unique_ptr<Graph> small_graph() {
  auto g = std::make_unique<Graph>("small");
  Builder b(*g);
  Value* x = g->add_input(f32({4}), InputKind::user, "x");
  g->add_output(b.create(Op::exp, {b.create(Op::mul, {x, b.scalar(1)})}));
  return g;
}

passes::PassInfo custom(std::string name, passes::PassFn fn) {
  return {std::move(name), "a pass made by the test", std::move(fn)};
}
} // namespace

TEST_CASE("pass manager: an unknown pass name lists the known ones", "[passes]") {
  CHECK_THROWS_WITH(passes::PassManager::parse("dead-code-elimination,no-such-pass"),
                    Catch::Contains("no-such-pass") && Catch::Contains("dead-code-elimination") &&
                        Catch::Contains("common-subexpression-elimination") &&
                        Catch::Contains("constant-fold") && Catch::Contains("canonicalize"));
}

TEST_CASE("pass manager: the registered passes have unique kebab-case names", "[passes]") {
  std::set<std::string> names;
  const std::regex kebab("[a-z]+(-[a-z]+)*");
  for (const passes::PassInfo& p : passes::registered_passes()) {
    INFO(p.name);
    CHECK(std::regex_match(p.name, kebab));
    CHECK_FALSE(p.summary.empty());
    CHECK(static_cast<bool>(p.run));
    CHECK(names.insert(p.name).second);
    CHECK(passes::find_pass(p.name) == &p);
  }
  for (const char* n : {"dead-code-elimination", "common-subexpression-elimination",
                        "constant-fold", "canonicalize", "dce", "cse", "fuse"})
    CHECK(names.count(n) == 1);
  CHECK(passes::find_pass("fusion") == nullptr);
}

TEST_CASE("pass manager: fuse leaves its groups in the context and comes last", "[passes]") {
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(R"(graph @g {
  %x : f32[4] = input "x"
  %n : f32[4] = neg(%x)
  %e : f32[4] = exp(%n)
  return %e
})");
  REQUIRE(g);
  const std::string before = ir::print(**g);
  passes::PassContext ctx;
  REQUIRE(passes::PassManager::parse("cse,fuse").run(**g, ctx));
  REQUIRE(ctx.fusion != nullptr);
  CHECK(ctx.fusion->groups.size() == 1);
  CHECK(ctx.fusion->groups[0].nodes.size() == 2);
  CHECK(ir::print(**g) == before); // an analysis: the graph is as it was
  passes::PassContext again;
  Expected<void> r = passes::PassManager::parse("fuse,dce").run(**g, again);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("pass 'dce' after 'fuse'"));
}

TEST_CASE("pass manager: pass lists parse in order and short names alias", "[passes]") {
  passes::PassManager pm = passes::PassManager::parse("cse,,dce,canonicalize");
  REQUIRE(pm.passes().size() == 3);
  CHECK(pm.passes()[0].name == "cse");
  CHECK(pm.passes()[1].name == "dce");
  CHECK(pm.passes()[2].name == "canonicalize");
  CHECK(passes::PassManager::parse("").passes().empty());

  // cse,dce and the long names give the same graph.
  auto build = [] {
    auto g = std::make_unique<Graph>();
    Builder b(*g);
    Value* x = g->add_input(f32({4}), InputKind::user, "x");
    Value* a = b.create(Op::exp, {x});
    Value* c = b.create(Op::exp, {x});
    g->add_output(b.create(Op::add, {a, c}));
    return g;
  };
  auto g1 = build(), g2 = build();
  passes::PassContext ctx;
  REQUIRE(passes::PassManager::parse("cse,dce").run(*g1, ctx));
  REQUIRE(passes::PassManager::parse("common-subexpression-elimination,dead-code-elimination")
              .run(*g2, ctx));
  CHECK(g1->num_nodes() == 2);
  CHECK(print(*g1) == print(*g2));
}

TEST_CASE("pass manager: --verify-each catches a pass that breaks the graph", "[passes]") {
  passes::PassManager pm;
  pm.add("canonicalize");
  pm.add(custom("break-types", [](Graph& g, passes::PassContext& ctx) -> Expected<void> {
    // Claims exp gives f64: the verifier's inference says f32.
    g.last_node()->output()->set_type(Type(DType::f64, {4}));
    ctx.changed = true;
    return {};
  }));
  pm.add("dead-code-elimination");
  auto g = small_graph();
  passes::PassContext ctx;
  ctx.verify_each = true;
  Expected<void> r = pm.run(*g, ctx);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("verifier failed after pass 'break-types'"));
  CHECK_THAT(r.error().message(), Catch::Contains("exp"));
#ifdef NDEBUG
  // Release builds verify only on request.
  auto h = small_graph();
  passes::PassContext quiet;
  CHECK(pm.run(*h, quiet));
#endif
}

TEST_CASE("pass manager: a failing pass stops the pipeline with its name", "[passes]") {
  bool ran_after = false;
  passes::PassManager pm;
  pm.add(custom("refuse", [](Graph&, passes::PassContext&) -> Expected<void> {
    return Error::without_location("this graph is not supported");
  }));
  pm.add(custom("after", [&](Graph&, passes::PassContext&) -> Expected<void> {
    ran_after = true;
    return {};
  }));
  auto g = small_graph();
  passes::PassContext ctx;
  Expected<void> r = pm.run(*g, ctx);
  REQUIRE_FALSE(r);
  CHECK(r.error().message() == "pass 'refuse': this graph is not supported");
  CHECK_FALSE(ran_after);
}

TEST_CASE("pass manager: logs print the IR after a pass that changed it, with its time",
          "[passes]") {
  passes::PassManager pm = passes::PassManager::parse("dce,canonicalize");
  auto g = small_graph();
  std::ostringstream log;
  passes::PassContext ctx;
  ctx.log_passes = true;
  ctx.log = &log;
  REQUIRE(pm.run(*g, ctx));
  const std::string s = log.str();
  INFO(s);
  // dead-code-elimination found nothing to remove: no IR after it.
  CHECK(s.find("after dce") == std::string::npos);
  CHECK(std::regex_search(s, std::regex("IR after canonicalize \\(changed, [0-9.e+-]+ ms\\)")));
  // The IR printed is the graph after the pass: the mul is gone.
  CHECK_THAT(s, Catch::Contains("graph @small") && Catch::Contains("exp(%0)"));
  CHECK(s.find("mul(") == std::string::npos);
  CHECK(s.find("graph @small") == s.rfind("graph @small")); // printed once

  // Without logging, nothing is written.
  auto h = small_graph();
  std::ostringstream silent;
  passes::PassContext off;
  off.log = &silent;
  REQUIRE(pm.run(*h, off));
  CHECK(silent.str().empty());
}

TEST_CASE("pass manager: --print-after-all prints after every pass", "[passes]") {
  passes::PassManager pm = passes::PassManager::parse("dce,canonicalize");
  auto g = small_graph();
  std::ostringstream log;
  passes::PassContext ctx;
  ctx.print_after_all = true;
  ctx.log = &log;
  REQUIRE(pm.run(*g, ctx));
  const std::string s = log.str();
  INFO(s);
  CHECK(std::regex_search(s, std::regex("IR after dce \\(unchanged, [0-9.e+-]+ ms\\)")));
  CHECK(std::regex_search(s, std::regex("IR after canonicalize \\(changed, [0-9.e+-]+ ms\\)")));
  CHECK(s.find("mul(") < s.find("IR after canonicalize")); // dce's print still has the mul
}

TEST_CASE("pass manager: the default pipeline simplifies, folds, merges and cleans up",
          "[passes]") {
  passes::PassManager pm = passes::default_pipeline();
  std::vector<std::string> names;
  for (const passes::PassInfo& p : pm.passes())
    names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"canonicalize", "constant-fold",
                                          "common-subexpression-elimination",
                                          "dead-code-elimination"});

  Graph g;
  Builder b(g);
  Value* x = g.add_input(f32({3}), InputKind::user, "x");
  Value* c = b.create(Op::add, {b.constant(tensor<float>({1, 2, 3})), b.scalar(1)}); // folds
  Value* y1 = b.create(Op::mul, {b.create(Op::mul, {x, b.scalar(1)}), c});
  Value* y2 = b.create(Op::mul, {x, b.constant(tensor<float>({2, 3, 4}))}); // equal to y1
  b.create(Op::exp, {x});                                                   // dead
  g.add_output(b.create(Op::sub, {y1, y2}));
  std::unique_ptr<Graph> before = g.clone();
  passes::PassContext ctx;
  ctx.verify_each = true;
  REQUIRE(pm.run(g, ctx));
  INFO(print(g));
  REQUIRE(g.num_nodes() == 2); // mul(x, [2, 3, 4]) and sub(it, it): floats, so it stays
  CHECK(g.first_node()->op() == Op::mul);
  CHECK(g.last_node()->input(0) == g.last_node()->input(1));
  CHECK(g.num_inputs() == 2);
  CHECK(testing::same_results(*before, g, {testing::hostile_f32({3})}));
}
