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
                                                     "schedule", "foreach", "emit", "plan"});
  CHECK(all->generated_kernels() == 1);
  CHECK(all->fallback.empty());

  seen.clear();
  o.stop_after = Stage::kernels;
  Expected<codegen::CompiledGraph> early = codegen::lower(g->clone(), o);
  REQUIRE(early);
  CHECK(seen == std::vector<Stage>{Stage::simplified, Stage::fused, Stage::kernels});
  CHECK(early->plan.steps().empty());            // nothing emitted, no plan
  CHECK(early->times.back().stage == "foreach"); // the kernels print after it
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

namespace {

// An SGD-with-momentum update: the parameter and the buffer are written from one fused kernel
// that reads each only where it writes it. `%q` is written with its rows centred, which reads
// the whole row of q for each element written: in place only if the kernel allows it. `%u`'s
// new value reads u transposed (never in place); `%v` is read by a sum the plan may run after
// its write's kernel (in place only if it runs first).
constexpr const char* kUpdate = R"(graph @update {
  %p : f32[4,8] = input "p"
  %b : f32[4,8] = input "b"
  %g : f32[4,8] = input "g"
  %q : f32[4,8] = input "q"
  %u : f32[8,8] = input "u"
  %v : f32[8,8] = input "v"
  %m : f32[] = const 0.9
  %lr : f32[] = const -0.1
  %bm : f32[4,8] = mul(%b, %m)
  %nb : f32[4,8] = add(%bm, %g)
  %st : f32[4,8] = mul(%nb, %lr)
  %np : f32[4,8] = add(%p, %st)
  %s : f32[4,1] = sum(%q) {dims = [1], keepdim = true, dtype = f32}
  %nq : f32[4,8] = sub(%q, %s)
  %ut : f32[8,8]{1,8} = permute(%u) {dims = [1, 0]}
  %nu : f32[8,8] = add(%u, %ut)
  %nv : f32[8,8] = neg(%v)
  %sv : f32[] = sum(%v) {dims = [], keepdim = false, dtype = f32}
  write %p, %np
  write %b, %nb
  write %q, %nq
  write %u, %nu
  write %v, %nv
  return %s, %sv
})";

} // namespace

TEST_CASE("writes into inputs are computed in place when nothing reads the input after",
          "[lower][llvm]") {
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(kUpdate);
  REQUIRE(g);
  Expected<codegen::CompiledGraph> cg = codegen::lower(std::move(*g), codegen::LowerOptions{});
  REQUIRE(cg);
  REQUIRE(cg->fallback.empty());
  const Plan& plan = cg->plan;
  std::vector<size_t> targets;
  for (auto [source, target] : plan.in_place_writes())
    targets.push_back(target);
  for (const auto& [slot, index] : plan.inputs())
    if (index < 2) CHECK(std::find(targets.begin(), targets.end(), slot) != targets.end());
  manual_seed(3);
  Tensor p = randn({4, 8}), b = randn({4, 8}), gr = randn({4, 8}), q = randn({4, 8});
  Tensor u = randn({8, 8}), v = randn({8, 8});
  const Tensor p0 = p.clone(), b0 = b.clone(), q0 = q.clone(), u0 = u.clone(), v0 = v.clone();
  const void* p_data = p.raw_data();
  const uint64_t version = p.version();
  const std::vector<Tensor> out = cg->run(std::vector<Tensor>{p, b, gr, q, u, v});
  KILN_REQUIRE_ACCURATE(u, u0 + u0.t(), u0.to(DType::f64) + u0.t().to(DType::f64));
  KILN_REQUIRE_ACCURATE(v, -v0, -v0.to(DType::f64));
  KILN_REQUIRE_ACCURATE(out[1], sum(v0), sum(v0.to(DType::f64)));
  const Tensor nb = b0 * 0.9f + gr;
  const Tensor nb64 = b0.to(DType::f64) * 0.9 + gr.to(DType::f64);
  KILN_REQUIRE_ACCURATE(b, nb, nb64);
  KILN_REQUIRE_ACCURATE(p, p0 + nb * -0.1f, p0.to(DType::f64) + nb64 * -0.1);
  const Tensor s64 = sum(q0.to(DType::f64), {1}, true);
  KILN_REQUIRE_ACCURATE(out[0], sum(q0, {1}, true), s64);
  KILN_REQUIRE_ACCURATE(q, q0 - sum(q0, {1}, true), q0.to(DType::f64) - s64);
  CHECK(p.raw_data() == p_data);
  CHECK(p.version() > version); // written, as by the copy it replaces
}
