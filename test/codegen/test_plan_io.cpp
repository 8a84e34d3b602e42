// Plans as bytes (runtime/plan_io.h): a compiled graph's plan saved and loaded back (its
// kernels resolved by name) runs to the same bits as the original, over kernels, library calls
// with epilogues, eager calls, constants, in-place writes and attention steps; and bytes that
// are cut short, altered or name an unknown kernel are a kiln::Error, never a crash.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "codegen/lower.h"
#include "frontend/frontend_testing.h"
#include "ir/parser.h"
#include "runtime/plan_io.h"

using namespace kiln;

namespace {

// A library call with a bias and tanh epilogue, a softmax group, a causal attention (one
// step when forced), an eager gather, a constant, and an in-place write of an input.
constexpr const char* kGraph = R"(graph @g {
  %x : f32[2,40,16] = input "x"
  %w : f32[16,16] = input "w"
  %b : f32[16] = input "b"
  %ids : i64[40] = input "ids"
  %acc : f32[40,16] = input "acc"
  %scale : f64 = const 0.25
  %zero : i64 = const 0
  %h0 : f32[2,40,16] = matmul(%x, %w)
  %h1 : f32[2,40,16] = add(%h0, %b)
  %h : f32[2,40,16] = tanh(%h1)
  %ht : f32[2,16,40]{640,1,16} = permute(%h) {dims = [0, 2, 1]}
  %s0 : f32[2,40,40] = matmul(%h, %ht)
  %s : f32[2,40,40] = mul(%s0, %scale)
  %i : i64[40] = arange() {start = 0, end = 40, step = 1, dtype = i64}
  %ic : i64[40,1] = view(%i) {sizes = [40, 1]}
  %d : i64[40,40] = sub(%i, %ic)
  %future : bool[40,40] = gt(%d, %zero)
  %ninf : f32[] = full() {sizes = [], value = -inf, dtype = f32}
  %sm : f32[2,40,40] = where(%future, %ninf, %s)
  %m : f32[2,40,1] = amax(%sm) {dims = [-1], keepdim = true}
  %e0 : f32[2,40,40] = sub(%sm, %m)
  %e : f32[2,40,40] = exp(%e0)
  %z : f32[2,40,1] = sum(%e) {dims = [-1], keepdim = true, dtype = f32}
  %p : f32[2,40,40] = div(%e, %z)
  %o : f32[2,40,16] = matmul(%p, %h)
  %g : f32[40,16] = index_select(%w, %ids) {dim = 0}
  %o1 : f32[1,40,16] = slice(%o) {dim = 0, start = 0, end = 1, step = 1}
  %o0 : f32[40,16] = view(%o1) {sizes = [40, 16]}
  %new : f32[40,16] = add(%acc, %g)
  %y : f32[40,16] = add(%o0, %new)
  write %acc, %new
  return %y, %o
})";

struct SavedGraph {
  codegen::CompiledGraph cg;
  std::map<std::string, KernelEntry, std::less<>> entries; // every kernel the plan names
};

SavedGraph lower_graph(const char* way) {
  const kiln::testing::ScopedEnv choice("KILN_ATTENTION", way), block("KILN_ATTENTION_BLOCK", "16");
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(kGraph);
  REQUIRE(g);
  Expected<codegen::CompiledGraph> cg = codegen::lower(std::move(*g), {});
  REQUIRE(cg);
  SavedGraph c{std::move(*cg), {}};
  for (const Plan::KernelCall& k : c.cg.plan.kernels())
    c.entries.emplace(k.name, k.entry);
  for (const Plan::Step& st : c.cg.plan.steps())
    if (st.attention)
      for (const AttentionCall::Narrowed& n : st.attention->narrow)
        c.entries.emplace(n.name, n.entry);
  return c;
}

KernelResolver resolver(const SavedGraph& c) {
  return [&c](std::string_view name) -> KernelEntry {
    auto it = c.entries.find(name);
    return it == c.entries.end() ? nullptr : it->second;
  };
}

std::vector<Tensor> inputs() {
  manual_seed(3);
  return {randn({2, 40, 16}), randn({16, 16}) * 0.3, randn({16}), randint(0, 16, {40}, DType::i64),
          randn({40, 16})};
}

/// Runs `plan` on fresh inputs; returns its outputs and the written input.
std::vector<Tensor> run(const Plan& plan) {
  std::vector<Tensor> in = inputs();
  std::vector<Tensor> out = plan.run(in);
  out.push_back(in[4]);
  return out;
}

} // namespace

TEST_CASE("a saved plan loads and runs to the same bits", "[plan_io][llvm]") {
  for (const char* way : {"tiled", "unfused"}) {
    INFO("KILN_ATTENTION=" << way);
    const SavedGraph c = lower_graph(way);
    bool attention = false;
    for (const Plan::Step& st : c.cg.plan.steps())
      attention = attention || st.attention != nullptr;
    CHECK(attention == (std::string(way) == "tiled"));
    const std::string bytes = save_plan(c.cg.plan);
    const std::unique_ptr<LoadedPlan> loaded = load_plan(bytes, resolver(c));
    const Plan& p = loaded->plan;
    CHECK(p.steps().size() == c.cg.plan.steps().size());
    CHECK(p.kernels().size() == c.cg.plan.kernels().size());
    CHECK(p.memory_plan().str() == c.cg.plan.memory_plan().str());
    // Saving the loaded plan gives the same bytes.
    CHECK(save_plan(p) == bytes);
    const std::vector<Tensor> want = run(c.cg.plan), got = run(p);
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      INFO("result " << k);
      KILN_REQUIRE_BITWISE(got[k], want[k]);
    }
  }
}

TEST_CASE("a plan writes its outputs into the caller's buffers", "[plan_io][llvm]") {
  for (const char* way : {"tiled", "unfused"}) {
    INFO("KILN_ATTENTION=" << way);
    const SavedGraph c = lower_graph(way);
    const std::vector<Tensor> want = run(c.cg.plan);
    std::vector<Tensor> in = inputs();
    const std::vector<Tensor> into = {full({40, 16}, 7.0), full({2, 40, 16}, 7.0)};
    const std::vector<Tensor> got = c.cg.plan.run(in, into);
    REQUIRE(got.size() == 2);
    for (size_t k = 0; k < 2; ++k) {
      INFO("output " << k);
      // Each output's step (a kernel; attention, a library call or an eager matmul) wrote the
      // caller's tensor itself.
      CHECK(got[k].raw_data() == into[k].raw_data());
      KILN_REQUIRE_BITWISE(into[k], want[k]);
    }
    KILN_REQUIRE_BITWISE(in[4], want[2]);
    // A buffer of another geometry is left alone for a kernel's output.
    in = inputs();
    const std::vector<Tensor> other = {full({40, 17}, 7.0), Tensor()};
    const std::vector<Tensor> fresh = c.cg.plan.run(in, other);
    CHECK(fresh[0].raw_data() != other[0].raw_data());
    KILN_REQUIRE_BITWISE(fresh[0], want[0]);
    KILN_REQUIRE_BITWISE(other[0], full({40, 17}, 7.0));
  }
}

TEST_CASE("bad plan bytes are an error, never a crash", "[plan_io][llvm]") {
  const SavedGraph c = lower_graph("tiled");
  const std::string bytes = save_plan(c.cg.plan);
  const KernelResolver resolve = resolver(c);
  // Every cut-short prefix.
  for (size_t n = 0; n < bytes.size(); n += 1 + n / 64) {
    INFO("first " << n << " bytes");
    CHECK_THROWS_AS(load_plan(std::string_view(bytes).substr(0, n), resolve), Error);
  }
  CHECK_THROWS_WITH(load_plan(bytes + "x", resolve), Catch::Contains("bytes after the plan"));
  std::string magic = bytes;
  magic[0] = 'X';
  CHECK_THROWS_WITH(load_plan(magic, resolve), Catch::Contains("bad magic"));
  CHECK_THROWS_WITH(load_plan(bytes, [](std::string_view) { return KernelEntry{}; }),
                    Catch::Contains("no kernel named 'kiln_k"));
  // Altered bytes (a sample of positions): refused, or loaded (an index the bytes hold is
  // checked against what it indexes; sizes are trusted, as the plan's own writer made them).
  int refused = 0;
  for (size_t at = 12; at < bytes.size(); at += 1 + at / 16) {
    std::string bad = bytes;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    try {
      (void)load_plan(bad, resolve);
    } catch (const Error&) {
      ++refused;
    }
  }
  CHECK(refused > 0);
}

TEST_CASE("a saved plan keeps its constants, wrapped numbers included", "[plan_io]") {
  // x * c + 2: a constant tensor and a wrapped number (which keeps x's dtype) in eager steps.
  const Attrs none;
  Plan plan;
  plan.bind_input(0, 0);
  manual_seed(4);
  plan.bind_constant(1, randn({3, 1}).to(DType::f64));
  Tensor two = full({}, 2, DType::f64);
  two.impl().wrapped_number = true;
  plan.bind_constant(2, two);
  Plan::Step mul;
  mul.op = Op::mul;
  mul.attrs = &none;
  mul.operands = {0, 1};
  mul.results = {3};
  plan.add_step(mul);
  Plan::Step add = mul;
  add.op = Op::add;
  add.operands = {3, 2};
  add.results = {4};
  plan.add_step(add);
  plan.add_output(4);
  plan.finish(5);
  const std::unique_ptr<LoadedPlan> loaded =
      load_plan(save_plan(plan), [](std::string_view) { return KernelEntry{}; });
  const Tensor x = randn({3, 4}).to(DType::f16);
  const std::vector<Tensor> in{x};
  const Tensor want = plan.run(in)[0], got = loaded->plan.run(in)[0];
  CHECK(want.dtype() == DType::f64); // the f64 tensor promotes, the wrapped 2 does not
  KILN_REQUIRE_BITWISE(got, want);
}
