// The lowering pipeline (codegen/lower.h): its stages in order, stopping early, and the
// Target seam: another target plugs in, and one that cannot compile sends the graph to the
// interpreter with the reason.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "codegen/counting_target.h"
#include "codegen/cpu/jit_target.h"
#include "codegen/lower.h"
#include "codegen/target.h"
#include "frontend/frontend_testing.h"
#include "ir/parser.h"

using namespace kiln;
using codegen::Stage;
using kiln::testing::CountingTarget;

namespace {

// Softmax over rows beside a matmul: a reduction group, a library call, a pointwise group.
constexpr const char* kGraph = R"(graph @g {
  %x : f32[4,16] = input "x"
  %w : f32[16,8] = input "w"
  %m : f32[4,1] = amax(%x) {dims = [1], keepdim = true}
  %d : f32[4,16] = sub(%x, %m)
  %e : f32[4,16] = exp(%d)
  %s : f32[4,1] = sum(%e) {dims = [1], keepdim = true, dtype = f32}
  %p : f32[4,16] = div(%e, %s)
  %y : f32[4,8] = matmul(%p, %w)
  %t : f32[4,8] = tanh(%y)
  return %t
})";

std::unique_ptr<ir::Graph> graph() {
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(kGraph);
  REQUIRE(g);
  return std::move(*g);
}

Tensor eager(const Tensor& x, const Tensor& w) { return tanh(matmul(softmax(x, 1), w)); }

} // namespace

TEST_CASE("the pipeline prints its stages in order, and stops where asked", "[lower][llvm]") {
  std::unique_ptr<ir::Graph> g = graph();
  std::vector<Stage> seen;
  std::vector<std::string> texts;
  codegen::LowerOptions o;
  o.print_stages = {Stage::simplified, Stage::fused, Stage::kernels, Stage::source, Stage::plan};
  o.print = [&](Stage s, const std::string& text) {
    seen.push_back(s);
    texts.push_back(text);
  };
  Expected<codegen::CompiledGraph> all = codegen::lower(g->clone(), o);
  REQUIRE(all);
  REQUIRE(seen == o.print_stages);
  CHECK_THAT(texts[0], Catch::Contains("graph @g"));
  CHECK_THAT(texts[1], Catch::Contains("library") && Catch::Contains("group 0 (reduction)"));
  CHECK_THAT(texts[2], Catch::Contains("// schedule") && Catch::Contains("reduce.amax"));
  CHECK_THAT(texts[3], Catch::Contains("define") && Catch::Contains("kiln_k0"));
  CHECK_THAT(texts[4], Catch::Contains("call matmul + tanh") && Catch::Contains("memory arena"));
  std::vector<std::string_view> stage_names;
  for (const auto& t : all->times)
    stage_names.push_back(t.stage);
  CHECK(stage_names == std::vector<std::string_view>{"simplify", "layout", "fuse", "lower",
                                                     "schedule", "emit", "plan"});
  CHECK(all->generated_kernels() == 1);
  CHECK(all->fallback.empty());

  seen.clear();
  o.stop_after = Stage::kernels;
  Expected<codegen::CompiledGraph> early = codegen::lower(g->clone(), o);
  REQUIRE(early);
  CHECK(seen == std::vector<Stage>{Stage::simplified, Stage::fused, Stage::kernels});
  CHECK(early->plan.steps().empty()); // nothing emitted, no plan
  CHECK(early->times.back().stage == "schedule");
}

TEST_CASE("stage names parse, llvm naming the CPU's source", "[lower]") {
  for (Stage s : {Stage::simplified, Stage::fused, Stage::kernels, Stage::source, Stage::plan})
    CHECK(codegen::parse_stage(codegen::stage_name(s)) == s);
  CHECK(codegen::parse_stage("llvm") == Stage::source);
  CHECK(!codegen::parse_stage("traced"));
}

TEST_CASE("another target plugs into the pipeline", "[lower][llvm]") {
  std::unique_ptr<ir::Graph> g = graph();
  manual_seed(5);
  Tensor x = randn({4, 16}), w = randn({16, 8});
  CountingTarget target("plug");
  codegen::LowerOptions o;
  o.target = &target;
  Expected<codegen::CompiledGraph> c = codegen::lower(g->clone(), o);
  REQUIRE(c);
  CHECK(target.compiles <= 1); // 0 when an earlier run cached this very object
  CHECK(c->generated_kernels() == 1);
  std::vector<Tensor> got = c->run(std::vector<Tensor>{x, w});
  REQUIRE(got.size() == 1);
  KILN_REQUIRE_CLOSE(got[0], eager, x, w);
}

TEST_CASE("a target that cannot compile sends the graph to the interpreter, saying why",
          "[lower]") {
  std::unique_ptr<ir::Graph> g = graph();
  manual_seed(6);
  Tensor x = randn({4, 16}), w = randn({16, 8});
  CountingTarget target("failing", /*fail=*/true);
  codegen::LowerOptions o;
  o.target = &target;
  std::string plan;
  o.print_stages = {Stage::plan};
  o.print = [&](Stage, const std::string& text) { plan = text; };
  Expected<codegen::CompiledGraph> c = codegen::lower(g->clone(), o);
  REQUIRE(c);
  CHECK(target.compiles == 1);
  CHECK_THAT(c->fallback, Catch::Contains("this target has no code for kiln_k0"));
  CHECK_THAT(plan, Catch::Contains("fallback: this target has no code"));
  CHECK(c->generated_kernels() == 0);
  CHECK(c->code == nullptr);
  // The interpreter runs the eager kernels: the eager result, bit for bit.
  std::vector<Tensor> got = c->run(std::vector<Tensor>{x, w});
  REQUIRE(got.size() == 1);
  CHECK(kiln::testing::bitwise_equal(got[0], eager(x, w)));
}

TEST_CASE("without simplification and code generation, every node is an eager call", "[lower]") {
  std::unique_ptr<ir::Graph> g = graph();
  codegen::LowerOptions o;
  o.simplify = false;
  o.generate_code = false;
  Expected<codegen::CompiledGraph> c = codegen::lower(g->clone(), o);
  REQUIRE(c);
  CHECK(c->graph->num_nodes() == g->num_nodes());
  CHECK(c->generated_kernels() == 0);
  CHECK(c->launches == static_cast<int64_t>(g->num_nodes()));
}
