// Differential tests of pointwise chains (2 to 6 ops), where fusion happens: mixed-dtype
// promotion inside a chain (i32 + f32, bool masks from comparisons feeding where), f16/bf16
// chains that must round to the dtype after every op, chains through broadcasts and views,
// and in-place ops on intermediates and on the inputs themselves.
#include "diff/diff_testing.h"
#include "runtime/accuracy.h"

using namespace kiln;
using namespace kiln::diff;

namespace {

using ChainFn = std::function<Tensor(const Tensor&, const Tensor&)>;

struct Chain {
  const char* name;
  ChainFn fn;
};

std::vector<Chain> chains() {
  return {
      {"x * y + 1", [](const Tensor& x, const Tensor& y) { return x * y + 1; }},
      {"exp(x - y) / 2", [](const Tensor& x, const Tensor& y) { return exp(x - y) / 2; }},
      {"relu(x) * sigmoid(y) - tanh(x)",
       [](const Tensor& x, const Tensor& y) { return relu(x) * sigmoid(y) - tanh(x); }},
      {"where(x > y, x * 2, y - 1)",
       [](const Tensor& x, const Tensor& y) { return where(x > y, x * 2, y - 1); }},
      {"where(x > 0 && y < 0, x, -y) + 0.5",
       [](const Tensor& x, const Tensor& y) { return where(x > 0 && y < 0, x, -y) + 0.5; }},
      {"masked sum (x > 0).to(x) * y then abs",
       [](const Tensor& x, const Tensor& y) { return abs((x > 0).to(x.dtype()) * y); }},
      {"sqrt(abs(x) + 1) * rsqrt(y * y + 1)",
       [](const Tensor& x, const Tensor& y) { return sqrt(abs(x) + 1) * rsqrt(y * y + 1); }},
      {"floor(x * 3) - ceil(y) + round(x - y)",
       [](const Tensor& x, const Tensor& y) { return floor(x * 3) - ceil(y) + round(x - y); }},
      {"maximum(x, y) - minimum(x, 0) * 2",
       [](const Tensor& x, const Tensor& y) { return maximum(x, y) - minimum(x, 0.0) * 2; }},
      {"log(exp(x) + exp(y)) six ops",
       [](const Tensor& x, const Tensor& y) { return log(exp(x) + exp(y)) * 0.5 - y + 1; }},
      {"(x + y) - x (rounds after each op)",
       [](const Tensor& x, const Tensor& y) { return (x + y) - x; }},
      {"x * y - x * y (no fused multiply-add)",
       [](const Tensor& x, const Tensor& y) { return x * y + (-x) * y + x * 0.1 * y; }},
      {"neg(x) * 0 (keeps -0.0)", [](const Tensor& x, const Tensor& y) { return -x * 0 + y * 0; }},
      {"erf(x) + sin(y) * cos(x)",
       [](const Tensor& x, const Tensor& y) { return erf(x) + sin(y) * cos(x); }},
      {"logical_not(x == y) || (x >= 1)",
       [](const Tensor& x, const Tensor& y) { return logical_not(x == y) || (x >= 1); }},
      {"remainder(x, 2.5) + floor_divide(y, 0.75)",
       [](const Tensor& x, const Tensor& y) { return remainder(x, 2.5) + floor_divide(y, 0.75); }},
      {"pow(abs(x) + 0.5, y) clamp",
       [](const Tensor& x, const Tensor& y) { return clamp(pow(abs(x) + 0.5, y), -10, 10); }},
  };
}

/// Operand pairs for the chains: same shape, broadcast, non-contiguous and 0-d.
struct ChainInputs {
  std::string label;
  ShapeCase x, y;
};

std::vector<ChainInputs> chain_inputs() {
  return {
      {"7x33", {"", {7, 33}}, {"", {7, 33}}},
      {"1023 and 0-d", {"", {1023}}, {"", {}}},
      {"7x1 and 1x33", {"", {7, 1}}, {"", {1, 33}}},
      {"transposed and expanded",
       {"", {7, 33}, Layout::transposed},
       {"", {7, 33}, Layout::expanded, {1, 33}}},
  };
}

} // namespace

TEST_CASE("diff: pointwise chains over dtypes and operand layouts", "[diff]") {
  uint64_t seed = 31000;
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32}) {
    for (const ChainInputs& ci : chain_inputs()) {
      Tensor x = make_input(ci.x.shape, t, Values::special, ++seed, ci.x.layout, ci.x.base);
      Tensor y = make_input(ci.y.shape, t, Values::special, ++seed, ci.y.layout, ci.y.base);
      std::vector<Item> items;
      for (const Chain& ch : chains()) {
        ChainFn f = ch.fn;
        items.push_back(
            {ch.name, [f](const Inputs& in) { return f(in[0], in[1]); }, t == DType::f32});
      }
      CHECK(check_bundle("chains", dtype_str(t) + " " + ci.label, {x, y}, std::move(items)));
    }
  }
}

TEST_CASE("diff: min and max against zero keep the sign of -0.0 beside a shared comparison",
          "[diff]") {
  // LLVM 22's InstCombine rewrites select(x > 0, 0, x) so that -0.0 becomes +0.0 when the
  // comparison x > 0 also feeds another op (here the where); the code generator compares
  // the bits against zero instead. Every third element is -0.0.
  uint64_t seed = 31900;
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    Tensor x = make_input({7, 33}, t, Values::special, ++seed);
    Tensor third = remainder(arange(0, 231, 1), 3).reshape({7, 33}) == 0;
    x = where(third, -zeros_like(x), x);
    Tensor y = make_input({7, 33}, t, Values::special, ++seed);
    CHECK(check_bundle(
        "zero-sign min/max", dtype_str(t) + " 7x33", {x, y},
        {{"where(x > 0, x, y)", [](const Inputs& in) { return where(in[0] > 0, in[0], in[1]); },
          true},
         {"minimum(x, 0)", [](const Inputs& in) { return minimum(in[0], 0.0); }, true},
         {"maximum(x, 0)", [](const Inputs& in) { return maximum(in[0], 0.0); }, true},
         {"minimum(0, x)", [](const Inputs& in) { return minimum(zeros_like(in[0]), in[0]); },
          true},
         {"maximum(0, x)", [](const Inputs& in) { return maximum(zeros_like(in[0]), in[0]); },
          true},
         {"minimum(x, -0)", [](const Inputs& in) { return minimum(in[0], -0.0); }, true},
         {"relu(x)", [](const Inputs& in) { return relu(in[0]); }, true},
         {"clamp(x, 0, 1)", [](const Inputs& in) { return clamp(in[0], 0, 1); }, true}}));
  }
}

TEST_CASE("diff: each chain alone", "[diff]") {
  uint64_t seed = 32000;
  for (const Chain& ch : chains()) {
    for (DType t : {DType::f32, DType::f16}) {
      Case c;
      c.op = ch.name;
      c.variant = dtype_str(t) + " 7x33 and 33";
      c.inputs = {make_input({7, 33}, t, Values::special, ++seed),
                  make_input({33}, t, Values::special, ++seed)};
      ChainFn f = ch.fn;
      c.fn = [f](const Inputs& in) { return Outputs{f(in[0], in[1])}; };
      check(c);
    }
  }
}

TEST_CASE("diff: reduced-precision chains round after every op", "[diff]") {
  // Large x and small y: (x + y) rounded to f16/bf16 loses y, so (x + y) - x is 0 or a
  // multiple of x's ulp; computed in f32 without the rounding it would be y. The tolerance
  // cannot hide that difference.
  uint64_t seed = 33000;
  for (DType t : {DType::f16, DType::bf16}) {
    Tensor big = (make_input({1023}, DType::f32, Values::positive, ++seed) * 300 + 500).to(t);
    Tensor small = make_input({1023}, t, Values::small, ++seed);
    CHECK(check_bundle(
        "rounding chains", dtype_str(t) + " 1023", {big, small},
        {{"(x + y) - x", [](const Inputs& in) { return (in[0] + in[1]) - in[0]; }, true},
         {"(x * y) * 3 - x * (y * 3)",
          [](const Inputs& in) { return in[0] * in[1] * 3 - in[0] * (in[1] * 3); }, true},
         {"x * 1.001 - x", [](const Inputs& in) { return in[0] * 1.001 - in[0]; }, true},
         {"to f32 after the sum",
          [](const Inputs& in) { return (in[0] + in[1]).to(DType::f32) - in[0].to(DType::f32); },
          true},
         {"exp then log", [](const Inputs& in) { return log(exp(in[1] * 4)) - in[1] * 4; }, true},
         {"sum of a rounded product",
          [](const Inputs& in) {
            return (in[0] * in[1]).sum() - (in[0] * in[1]).to(DType::f32).sum();
          },
          true}}));
  }
}

TEST_CASE("diff: chains that mix dtypes", "[diff]") {
  uint64_t seed = 34000;
  Tensor i = make_input({7, 33}, DType::i32, Values::special, ++seed);
  Tensor f = make_input({7, 33}, DType::f32, Values::special, ++seed);
  Tensor h = make_input({33}, DType::f16, Values::special, ++seed);
  Tensor b = make_input({7, 1}, DType::bf16, Values::special, ++seed);
  Tensor m = make_input({7, 33}, DType::bool_, Values::normal, ++seed);
  Tensor l = make_input({33}, DType::i64, Values::nonzero, ++seed);
  CHECK(check_bundle(
      "mixed chains", "i32 f32 f16 bf16 bool i64", {i, f, h, b, m, l},
      {{"i32 + f32 then * 2", [](const Inputs& in) { return (in[0] + in[1]) * 2; }, true},
       {"i32 * 3 + f16", [](const Inputs& in) { return in[0] * 3 + in[2]; }, true},
       {"f16 + bf16 (f32)", [](const Inputs& in) { return in[2] + in[3]; }, true},
       {"f16 chain then f32", [](const Inputs& in) { return (in[2] * in[2] + 1) * in[1]; }, true},
       {"bool mask from a comparison feeds where",
        [](const Inputs& in) { return where(in[1] > in[2], in[0], in[3]); }, true},
       {"bool arithmetic promotes", [](const Inputs& in) { return in[4] + in[4] * 2; }, true},
       {"bool && comparison", [](const Inputs& in) { return in[4] && (in[0] > 0); }, true},
       {"i32 / i64 (true division)", [](const Inputs& in) { return in[0] / in[5] + 1; }, true},
       {"i32 floor_divide i64 then to f16",
        [](const Inputs& in) { return floor_divide(in[0], in[5]).to(DType::f16) * 0.5; }, true},
       {"cast chain f32 to f16 to i32 to f32",
        [](const Inputs& in) { return in[1].to(DType::f16).to(DType::i32).to(DType::f32) + 1; },
        true},
       {"0-d f64 with f16 stays f16",
        [](const Inputs& in) { return in[2] * scalar_tensor(0.1, DType::f64) + 1; }, true},
       {"i64 0-d with i32 stays i32",
        [](const Inputs& in) { return in[0] + scalar_tensor(int64_t{1} << 40, DType::i64); }, true},
       {"sum of a bool mask", [](const Inputs& in) { return (in[1] > 0).sum({1}, true) + in[0]; },
        true},
       {"cumsum of i32 + f16", [](const Inputs& in) { return cumsum(in[0], 1) + in[2]; }, true}}));
}

TEST_CASE("diff: in-place ops on intermediates and on inputs", "[diff]") {
  uint64_t seed = 35000;
  for (DType t : {DType::f32, DType::f16, DType::i64}) {
    Tensor x = make_input({7, 33}, t, Values::special, ++seed);
    Tensor y = make_input({7, 33}, t, Values::nonzero, ++seed);
    CHECK(check_bundle("in place on intermediates", dtype_str(t) + " 7x33", {x, y},
                       {{"add_ mul_ relu_ chain",
                         [](const Inputs& in) {
                           Tensor a = in[0].clone();
                           a.add_(in[1]).mul_(2).relu_();
                           return a;
                         },
                         true},
                        {"masked_fill_ then clamp_",
                         [](const Inputs& in) {
                           Tensor a = in[0] * 1;
                           a.masked_fill_(in[1] > 0, -1);
                           a.clamp_(-2, 5);
                           return a;
                         },
                         true},
                        {"copy_ into a slice",
                         [](const Inputs& in) {
                           Tensor a = in[0].clone();
                           a.slice(1, 2, 30, 3).copy_(in[1].slice(1, 0, 10));
                           return a + 1;
                         },
                         true},
                        {"fill_ zero_ and sub_",
                         [](const Inputs& in) {
                           Tensor a = in[1].clone();
                           a.select(0, 1).fill_(3);
                           a.slice(0, 4, 6).zero_();
                           a.sub_(in[0]);
                           return a;
                         },
                         true},
                        {"write through a transposed view",
                         [](const Inputs& in) {
                           Tensor a = in[0].clone();
                           Tensor v = a.t();
                           v.slice(0, 0, 33, 2).mul_(3);
                           return a - in[1];
                         },
                         true}}));
  }
  // In place on the arguments: each run gets fresh copies, and their final values must match.
  for (DType t : {DType::f32, DType::f16, DType::i32}) {
    Tensor x = make_input({7, 33}, t, Values::special, ++seed);
    Tensor y = make_input({7, 33}, t, Values::nonzero, ++seed);
    Case c;
    c.op = "in place on inputs";
    c.variant = dtype_str(t) + " 7x33";
    c.make_inputs = [x, y] { return Inputs{x.clone(), y.clone()}; };
    c.fn = [](const Inputs& in) {
      Tensor a = in[0], b = in[1];
      a.add_(b);
      b.mul_(2);
      a.slice(1, 0, 33, 2).relu_();
      return Outputs{a * b, a.sum({1})};
    };
    c.may_refuse = t != DType::f32;
    // The row sums add ±1e10 specials to small values: the floor scales with Σ|terms|.
    c.compare.magnitude_of_abs_inputs = true;
    check(c);
    Case d;
    d.op = "in place on an input view";
    d.variant = dtype_str(t) + " 7x33";
    d.make_inputs = [x] { return Inputs{x.clone()}; };
    d.fn = [](const Inputs& in) {
      Tensor v = in[0].t().slice(0, 1, 33, 4);
      v.fill_(7);
      return Outputs{in[0] + 1};
    };
    d.may_refuse = t != DType::f32;
    check(d);
  }
}

TEST_CASE("diff: compiled functions with C++ scalar arguments", "[diff]") {
  // A scalar argument is guarded by value: the same value replays, a new one re-traces; both
  // must equal eager. (Outside the Case machinery, which passes tensors only.)
  Tensor x = make_input({7, 33}, DType::f16, Values::special, 36000);
  auto fn = [](const Tensor& a, double s, int64_t k) { return a * s + k; };
  auto compiled = compile(fn);
  for (auto [s, k] :
       std::vector<std::pair<double, int64_t>>{{0.1, 3}, {0.1, 3}, {-0.0, 0}, {2.5, -7}}) {
    Tensor want = fn(x, s, k);
    Tensor got = compiled(x, s, k);
    std::optional<std::string> m = check_accuracy(got, want, fn(x.to(DType::f64), s, k));
    INFO("a * " << s << " + " << k << ": " << m.value_or(""));
    CHECK(!m);
  }
  CHECK(compiled.stats().replays == 1);
  ++counters().compiled;
}
