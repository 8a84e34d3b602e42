// Self-tests of the differential harness: a wrong reference is caught and named, the
// comparison honours NaN, infinities, the sign of zero and the tolerances, and the table of
// expected failures reports both an expected failure and an unexpected pass.
#include <cmath>
#include <limits>

#include "diff/diff_testing.h"

using namespace kiln;
using namespace kiln::diff;

namespace {

Tensor f32(std::vector<float> v) { return tensor(v); }

bool mentions(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

/// x + 1 compiled, against a reference that is off at one element of a 3x4 input.
Case wrong_reference_case() {
  Case c;
  c.op = "self-test add";
  c.variant = "f32 3x4";
  c.inputs = {arange(12, DType::f32).view({3, 4})};
  c.fn = [](const Inputs& in) { return Outputs{in[0] + 1}; };
  c.reference = [](const Inputs& in) {
    Tensor r = (in[0] + 1).clone();
    r.slice(0, 1, 2).slice(1, 2, 3).fill_(100.0);
    return Outputs{r};
  };
  return c;
}

Case passing_case() {
  Case c;
  c.op = "self-test mul";
  c.variant = "f32 5";
  c.inputs = {f32({1, 2, 3, 4, 5})};
  c.fn = [](const Inputs& in) { return Outputs{in[0] * 2}; };
  return c;
}

} // namespace

TEST_CASE("diff harness: a wrong reference is caught and the message names the mismatch",
          "[diff]") {
  Result r = run_case(wrong_reference_case(), {});
  REQUIRE(r.outcome == Outcome::failed);
  INFO(r.message);
  CHECK(mentions(r.message, "self-test add [f32 3x4]"));
  CHECK(mentions(r.message, "at index [1, 2]"));
  CHECK(mentions(r.message, "got 7, expected 100"));
  CHECK(mentions(r.message, "dtype f32, shape [3, 4]"));
  CHECK(mentions(r.message, "call 1 (traced)"));
  CHECK(mentions(r.message, "1 of 12 elements differ"));
}

TEST_CASE("diff harness: the expected-failure table reports failures and stale entries", "[diff]") {
  const ExpectedFailure table[] = {
      {"self-test add [f32 3x4]", "deliberately wrong reference"},
      {"self-test mul [f32 5]", "listed although it passes"},
  };
  Result failing = run_case(wrong_reference_case(), table);
  CHECK(failing.outcome == Outcome::expected_failure);
  CHECK(mentions(failing.message, "deliberately wrong reference"));

  Result stale = run_case(passing_case(), table);
  CHECK(stale.outcome == Outcome::unexpected_pass);
  INFO(stale.message);
  CHECK(mentions(stale.message, "self-test mul [f32 5] passed"));
  CHECK(mentions(stale.message, "remove it from the table"));

  // Not listed: the same cases fail and pass plainly.
  CHECK(run_case(wrong_reference_case(), {}).outcome == Outcome::failed);
  CHECK(run_case(passing_case(), {}).outcome == Outcome::passed);
  // The real table holds only names, each with a reason.
  for (const ExpectedFailure& e : expected_failures()) {
    INFO(e.name);
    CHECK(!e.reason.empty());
    CHECK(mentions(std::string(e.name), " ["));
  }
}

TEST_CASE("diff harness: NaN equals NaN and infinities are exact and zeros keep their sign",
          "[diff]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(!compare_tensors(f32({nan, 1, inf, -inf}), f32({nan, 1, inf, -inf})));
  CHECK(compare_tensors(f32({nan}), f32({1})));
  CHECK(compare_tensors(f32({1}), f32({nan})));
  CHECK(compare_tensors(f32({inf}), f32({-inf})));
  CHECK(compare_tensors(f32({3.4e38f}), f32({inf})));
  CHECK(compare_tensors(f32({inf}), f32({3.4e38f})));
  std::optional<std::string> zero = compare_tensors(f32({0.0f}), f32({-0.0f}));
  REQUIRE(zero);
  CHECK(mentions(*zero, "got 0, expected -0"));
  CHECK(compare_tensors(f32({-0.0f}), f32({0.0f})));
  CompareOptions any_zero;
  any_zero.zero_sign = false;
  CHECK(!compare_tensors(f32({0.0f}), f32({-0.0f}), any_zero));
}

TEST_CASE("diff harness: per-dtype tolerances and exact integers and dtype and shape", "[diff]") {
  // f32: rtol 1.3e-6, atol 1e-5.
  CHECK(!compare_tensors(f32({1000.001f}), f32({1000.0f})));
  CHECK(compare_tensors(f32({1000.01f}), f32({1000.0f})));
  CHECK(!compare_tensors(f32({5e-6f}), f32({0.0f})));
  CHECK(compare_tensors(f32({2e-5f}), f32({0.0f})));
  // f16: rtol 1e-3 lets one ulp at 1000 (0.5) pass, three fail.
  Tensor h = f32({1000.0f}).to(DType::f16);
  CHECK(!compare_tensors(f32({1000.5f}).to(DType::f16), h));
  CHECK(compare_tensors(f32({1001.5f}).to(DType::f16), h));
  // bf16: rtol 1.6e-2.
  Tensor b = f32({100.0f}).to(DType::bf16);
  CHECK(!compare_tensors(f32({101.0f}).to(DType::bf16), b));
  CHECK(compare_tensors(f32({104.0f}).to(DType::bf16), b));
  // f64: rtol 1e-7.
  Tensor d = f32({1.0f}).to(DType::f64);
  CHECK(!compare_tensors(d + 5e-8, d));
  CHECK(compare_tensors(d + 5e-7, d));
  // Integers and bools are exact.
  CHECK(compare_tensors(tensor<int64_t>({1, 2, 3}), tensor<int64_t>({1, 2, 4})));
  CHECK(!compare_tensors(tensor<int32_t>({1, -2}), tensor<int32_t>({1, -2})));
  CHECK(compare_tensors(tensor<bool>({true, false}), tensor<bool>({true, true})));
  // Large integers differing in the low bit (not representable in a double).
  CHECK(compare_tensors(tensor<int64_t>({(int64_t{1} << 60) + 1}),
                        tensor<int64_t>({int64_t{1} << 60})));
  // Dtype and shape.
  std::optional<std::string> dt = compare_tensors(f32({1}), f32({1}).to(DType::f64));
  REQUIRE(dt);
  CHECK(mentions(*dt, "dtype: got f32, expected f64"));
  std::optional<std::string> sh = compare_tensors(f32({1, 2}), f32({1, 2}).view({2, 1}));
  REQUIRE(sh);
  CHECK(mentions(*sh, "shape: got [2], expected [2, 1]"));
  // Empty and 0-d tensors; non-contiguous tensors compare by logical index.
  CHECK(!compare_tensors(zeros({0, 3}), zeros({0, 3})));
  CHECK(compare_tensors(scalar_tensor(1.0), scalar_tensor(2.0)));
  Tensor m = arange(6, DType::f32).view({2, 3});
  CHECK(!compare_tensors(m.t(), m.t().contiguous()));
  CHECK(compare_tensors(m.t(), m.view({3, 2})));
}

TEST_CASE("diff harness: mutated inputs and missing replays and refusals are reported", "[diff]") {
  Case mutating;
  mutating.op = "self-test add_";
  mutating.variant = "f32 3";
  mutating.inputs = {f32({1, 2, 3})};
  mutating.fn = [](const Inputs& in) {
    Tensor x = in[0];
    x.add_(1.0);
    return Outputs{x * 2};
  };
  Result r = run_case(mutating, {});
  CHECK(r.outcome == Outcome::failed);
  CHECK(mentions(r.message, "mutated input 0"));

  // The same op as an in-place case (fresh inputs per run) passes.
  Case in_place = mutating;
  in_place.inputs.clear();
  in_place.make_inputs = [] { return Inputs{f32({1, 2, 3})}; };
  Result ip = run_case(in_place, {});
  INFO(ip.message);
  CHECK(ip.outcome == Outcome::passed);

  // A host read breaks the graph: the second call is traced again, not replayed.
  Case breaking;
  breaking.op = "self-test item";
  breaking.variant = "f32 3";
  breaking.inputs = {f32({1, 2, 3})};
  breaking.fn = [](const Inputs& in) { return Outputs{in[0] * in[0].sum().item<float>()}; };
  Result br = run_case(breaking, {});
  CHECK(br.outcome == Outcome::failed);
  CHECK(mentions(br.message, "not a replay"));
  breaking.expect_replay = false;
  CHECK(run_case(breaking, {}).outcome == Outcome::passed);

  // An eager refusal skips only when the case allows it.
  Case refused;
  refused.op = "self-test sub";
  refused.variant = "bool 3";
  refused.inputs = {tensor<bool>({true, false, true})};
  refused.fn = [](const Inputs& in) { return Outputs{in[0] - in[0]}; };
  CHECK(run_case(refused, {}).outcome == Outcome::failed);
  refused.may_refuse = true;
  CHECK(run_case(refused, {}).outcome == Outcome::refused);

  // A bundle drops the items the eager op refuses, and names the rest.
  std::optional<Case> b = bundle("self-test bundle", "bool 3", {tensor<bool>({true, false, true})},
                                 {{"sub", [](const Inputs& in) { return in[0] - in[0]; }},
                                  {"mul", [](const Inputs& in) { return in[0] * in[0]; }}});
  REQUIRE(b);
  CHECK(b->output_names == std::vector<std::string>{"mul"});
  CHECK(run_case(*b, {}).outcome == Outcome::passed);
}

TEST_CASE("diff harness: random cases are seeded and their offsets compared", "[diff]") {
  Case c;
  c.op = "self-test rand";
  c.variant = "f32 33";
  c.inputs = {zeros({33})};
  c.fn = [](const Inputs& in) { return Outputs{in[0] + rand({33})}; };
  c.seed = 7;
  Result r = run_case(c, {});
  INFO(r.message);
  CHECK(r.outcome == Outcome::passed);
  // Without the seed the two sides draw different numbers: the harness must see it.
  c.seed.reset();
  CHECK(run_case(c, {}).outcome == Outcome::failed);
  // A reference that draws one more block leaves a different offset.
  c.seed = 7;
  c.reference = [](const Inputs& in) {
    (void)rand({1});
    return Outputs{in[0] + rand({33})};
  };
  Result off = run_case(c, {});
  CHECK(off.outcome == Outcome::failed);
}

TEST_CASE("diff harness: inputs have the asked shapes and layouts and special values", "[diff]") {
  for (const ShapeCase& s : pointwise_shapes()) {
    INFO(s.label);
    Tensor t = make_input(s.shape, DType::f32, Values::special, 3, s.layout, s.base);
    CHECK(t.sizes() == s.shape);
    if (s.layout != Layout::contiguous && t.numel() > 1) CHECK(!t.is_contiguous());
  }
  std::vector<double> v = make_input({300}, DType::f32, Values::special, 1).to_vector<double>();
  int nans = 0, infs = 0, neg_zeros = 0;
  for (double x : v) {
    nans += std::isnan(x);
    infs += std::isinf(x);
    neg_zeros += x == 0 && std::signbit(x);
  }
  CHECK(nans > 0);
  CHECK(infs > 1);
  CHECK(neg_zeros > 0);
  // Deterministic: the same seed gives the same bits; another seed gives other values.
  CHECK(!compare_tensors(make_input({50}, DType::bf16, Values::special, 4),
                         make_input({50}, DType::bf16, Values::special, 4)));
  CHECK(compare_tensors(make_input({50}, DType::f32, Values::normal, 4),
                        make_input({50}, DType::f32, Values::normal, 5)));
  std::vector<int64_t> nz = make_input({200}, DType::i32, Values::nonzero, 2).to_vector<int64_t>();
  CHECK(std::find(nz.begin(), nz.end(), 0) == nz.end());
}
