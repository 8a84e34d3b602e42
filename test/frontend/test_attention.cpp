// Attention as one plan step (runtime/attention.h, codegen/attention.h): compiled attention
// equals eager code by the f64 rule both ways (one step block by block, and three steps),
// over causal, boolean and additive masks, odd and unequal lengths, partial blocks, skipped
// key blocks, non-finite values where the mask hides them, and every mode.
#include <cmath>
#include <limits>

#include "frontend_testing.h"

using namespace kiln;
using kiln::testing::ScopedEnv;

namespace {

struct Case {
  const char* name;
  Shape q, k, v; // [..., L, D], [..., S, D], [..., S, E]
  bool causal = false;
  enum class Mask { none, boolean, additive } mask = Mask::none;
  /// Whether the site can run as one step: an additive mask becomes a tensor post-op of the
  /// scores' product, which a block cannot take a slice of (it keeps three steps).
  bool one_step = true;
};

/// Runs one case compiled (in `mode`, with KILN_ATTENTION=`way`) against eager code, on three
/// inputs in turn; returns the attention steps the compiled function planned.
int64_t check_case(const Case& c, Mode mode, const char* way, const Tensor& q, const Tensor& k,
                   const Tensor& v, const Tensor& mask) {
  INFO(c.name << ", " << mode_name(mode) << ", " << way);
  ScopedEnv choice("KILN_ATTENTION", way);
  auto fn = [causal = c.causal](const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& m) {
    return scaled_dot_product_attention(q, k, v, m.numel() ? m : Tensor(), 0.0, causal);
  };
  CompileOptions o;
  o.mode = mode;
  auto compiled = compile(fn, o);
  for (int call = 0; call < 3; ++call) {
    INFO("call " << call);
    KILN_REQUIRE_CLOSE(compiled(q, k, v, mask), fn, q, k, v, mask);
  }
  return compiled.stats().attention_steps;
}

} // namespace

TEST_CASE("compiled attention computes what eager code does, in one step and in three",
          "[attention][llvm]") {
  // Blocks of 16 query rows: several blocks, a partial last one, and (causal) skipped keys.
  ScopedEnv block("KILN_ATTENTION_BLOCK", "16");
  const std::vector<Case> cases = {
      {"causal, heads", {2, 3, 70, 24}, {2, 3, 70, 24}, {2, 3, 70, 40}, true},
      {"no mask, fewer keys than queries", {2, 50, 8}, {2, 37, 8}, {2, 37, 12}},
      {"no batch dims", {33, 16}, {45, 16}, {45, 16}},
      // Rows of 2 keys: the softmax kernel is vector code along the queries, a kernel row a
      // block of them, which a block of the step must hold whole (a fuzz finding: the step
      // ran a block's kernel rows as if each were one query, past its buffers).
      {"causal, 2 keys for 33 queries", {33, 7}, {2, 7}, {2, 8}, true},
      {"boolean mask", {1, 2, 40, 8}, {1, 2, 29, 8}, {1, 2, 29, 8}, false, Case::Mask::boolean},
      {"additive mask", {3, 21, 8}, {3, 40, 8}, {3, 40, 5}, false, Case::Mask::additive, false},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    manual_seed(5);
    const Tensor q = randn(c.q), k = randn(c.k), v = randn(c.v);
    const int64_t l = c.q[c.q.size() - 2], s = c.k[c.k.size() - 2];
    Tensor mask = zeros({0});
    if (c.mask == Case::Mask::boolean) {
      // Each row keeps about 70% of the keys, and its own (the diagonal) always.
      const Tensor diag = arange(l).unsqueeze(1) == arange(s).unsqueeze(0);
      mask = logical_or(rand({l, s}) > 0.3, diag);
    } else if (c.mask == Case::Mask::additive) {
      mask = randn({l, s});
    }
    for (Mode mode : {Mode::default_, Mode::reduce_overhead}) {
      CHECK(check_case(c, mode, "tiled", q, k, v, mask) == (c.one_step ? 1 : 0));
      CHECK(check_case(c, mode, "unfused", q, k, v, mask) == 0);
    }
    // Measured: either way, the same answer.
    check_case(c, Mode::default_, "", q, k, v, mask);
  }
}

TEST_CASE("skipped key blocks change nothing where eager code would see a non-finite value",
          "[attention][llvm]") {
  ScopedEnv block("KILN_ATTENTION_BLOCK", "16");
  const Case c{"causal", {1, 2, 64, 16}, {1, 2, 64, 16}, {1, 2, 64, 16}, true};
  manual_seed(6);
  Tensor q = randn(c.q), k = randn(c.k), v = randn(c.v);
  const Tensor none = zeros({0});
  // A key the mask hides from the first rows: its infinite scores are selected away, in eager
  // code and in skipped blocks alike.
  k.select(1, 1).select(1, 60).fill_(std::numeric_limits<double>::infinity());
  CHECK(check_case(c, Mode::default_, "tiled", q, k, v, none) == 1);
  // A value row the mask hides: eager code multiplies it by probability 0 (0 * inf = NaN in
  // every row of that head), so a block that would skip it takes every key instead.
  v.select(1, 0).select(1, 50).fill_(std::numeric_limits<double>::infinity());
  CHECK(check_case(c, Mode::default_, "tiled", q, k, v, none) == 1);
  auto eager = scaled_dot_product_attention(q, k, v, {}, 0.0, true);
  CHECK(std::isnan(eager.select(1, 0).select(1, 0).select(0, 0).sum().item<double>()));
}

TEST_CASE("explain() and KILN_LOGS=attention say how each attention site runs",
          "[attention][llvm]") {
  manual_seed(8);
  const Tensor q = randn({2, 2, 48, 8}), k = randn({2, 2, 48, 8}), v = randn({2, 2, 48, 8});
  auto fn = [](const Tensor& q_, const Tensor& k_, const Tensor& v_) {
    return scaled_dot_product_attention(q_, k_, v_, {}, 0.0, true);
  };
  {
    // Measured: the line names both ways' times, whichever won.
    const ExplainReport rep = explain(fn, q, k, v);
    REQUIRE(rep.graph_count() == 1);
    REQUIRE(rep.graphs[0].attention.size() == 1);
    const std::string& line = rep.graphs[0].attention[0];
    CHECK_THAT(line, Catch::StartsWith("attention at f32[2,2,48,48] scores: "));
    CHECK_THAT(line, Catch::Contains(" ms as three steps"));
    CHECK_THAT(line, Catch::Contains(" ms in blocks of "));
    CHECK_THAT(rep.str(), Catch::Contains("    attention at f32[2,2,48,48] scores: "));
    const ExplainReport back = ExplainReport::from_json(rep.to_json());
    CHECK(back.graphs[0].attention == rep.graphs[0].attention);
    CHECK(back.to_json() == rep.to_json());
  }
  ScopedEnv choice("KILN_ATTENTION", "unfused");
  const ExplainReport forced = explain(fn, q, k, v);
  REQUIRE(forced.graphs[0].attention.size() == 1);
  CHECK_THAT(forced.graphs[0].attention[0],
             Catch::EndsWith(": three steps (KILN_ATTENTION=unfused)"));
}
