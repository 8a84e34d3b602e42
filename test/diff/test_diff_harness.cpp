// Self-tests of the differential harness: a wrong reference is caught and named, outputs are
// judged by the f64 reference rule (magnitude floors, exact cases), and the table of expected
// failures reports both an expected failure and an unexpected pass. The rule itself is tested
// in test/runtime/test_accuracy.cpp.
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
  CHECK(mentions(r.message, "got 7, eager 100"));
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

TEST_CASE("diff harness: outputs are judged by the f64 reference rule", "[diff]") {
  // The eager side (and the f64 run) are off by 1000 from the compiled sum. Against the
  // output's magnitude that fails; against Σ|terms| (2e10: the inputs cancel) an error of
  // 1000 is within a few f32 roundings, so the magnitude floor lets it pass.
  Case c;
  c.op = "self-test cancelling sum";
  c.variant = "f32 4";
  c.inputs = {f32({1e10f, 3.0f, -1e10f, 1.0f})};
  c.fn = [](const Inputs& in) { return Outputs{in[0].sum()}; };
  c.reference = [](const Inputs& in) { return Outputs{in[0].sum() + 1000}; };
  Result tight = run_case(c, {});
  INFO(tight.message);
  CHECK(tight.outcome == Outcome::failed);
  CHECK(mentions(tight.message, "f64 reference"));
  c.compare.magnitude_of_abs_inputs = true;
  Result loose = run_case(c, {});
  INFO(loose.message);
  CHECK(loose.outcome == Outcome::passed);

  // An exact case compares bits: the sign of zero and one ulp count.
  Case e;
  e.op = "self-test exact";
  e.variant = "f32 2";
  e.inputs = {f32({0.0f, 1.0f})};
  e.fn = [](const Inputs& in) { return Outputs{-in[0]}; };
  e.compare.exact_because = "self-test";
  CHECK(run_case(e, {}).outcome == Outcome::passed);
  e.reference = [](const Inputs& in) { return Outputs{(-in[0]).abs() * 1.0000001}; };
  Result ex = run_case(e, {});
  INFO(ex.message);
  CHECK(ex.outcome == Outcome::failed);
  CHECK(mentions(ex.message, "bit for bit"));

  // The sign of zero counts unless the case says otherwise.
  Case z;
  z.op = "self-test zero sign";
  z.variant = "f32 1";
  z.inputs = {f32({0.0f})};
  z.fn = [](const Inputs& in) { return Outputs{-in[0]}; };
  z.reference = [](const Inputs& in) { return Outputs{in[0] * 1}; };
  CHECK(run_case(z, {}).outcome == Outcome::failed);
  z.compare.zero_sign = false;
  CHECK(run_case(z, {}).outcome == Outcome::passed);
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
  CHECK(!check_bitwise(make_input({50}, DType::bf16, Values::special, 4),
                       make_input({50}, DType::bf16, Values::special, 4)));
  CHECK(check_bitwise(make_input({50}, DType::f32, Values::normal, 4),
                      make_input({50}, DType::f32, Values::normal, 5)));
  std::vector<int64_t> nz = make_input({200}, DType::i32, Values::nonzero, 2).to_vector<int64_t>();
  CHECK(std::find(nz.begin(), nz.end(), 0) == nz.end());
}
