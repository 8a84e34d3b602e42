// Differential tests of the binary pointwise primitives (add ... logical_or) and where:
// every dtype, same-shape, broadcast (size-1, rank, stride-0, 0-d) and non-contiguous
// operand pairs, C++ scalar operands on either side, and mixed-dtype promotion.
#include <algorithm>
#include <limits>

#include "diff/diff_testing.h"

using namespace kiln;
using namespace kiln::diff;

namespace {

using BinaryOp = Tensor (*)(const Tensor&, const Tensor&);
using ScalarRight = Tensor (*)(const Tensor&, Scalar);
using ScalarLeft = Tensor (*)(Scalar, const Tensor&);

struct NamedBinary {
  const char* name;
  BinaryOp fn;
  ScalarRight right = nullptr; // op(tensor, scalar), where kiln has the overload
  ScalarLeft left = nullptr;   // op(scalar, tensor)
};

const std::vector<NamedBinary>& binary_ops() {
  static const std::vector<NamedBinary> ops = {
      {"add", kiln::add, kiln::add, kiln::add},
      {"sub", kiln::sub, kiln::sub, kiln::sub},
      {"mul", kiln::mul, kiln::mul, kiln::mul},
      {"div", kiln::div, kiln::div, kiln::div},
      {"floor_divide", kiln::floor_divide, kiln::floor_divide, kiln::floor_divide},
      {"remainder", kiln::remainder, kiln::remainder, kiln::remainder},
      {"pow", kiln::pow, kiln::pow, nullptr},
      {"maximum", kiln::maximum, kiln::maximum, kiln::maximum},
      {"minimum", kiln::minimum, kiln::minimum, kiln::minimum},
      {"eq", kiln::eq, kiln::eq, kiln::eq},
      {"ne", kiln::ne, kiln::ne, kiln::ne},
      {"lt", kiln::lt, kiln::lt, kiln::lt},
      {"le", kiln::le, kiln::le, kiln::le},
      {"gt", kiln::gt, kiln::gt, kiln::gt},
      {"ge", kiln::ge, kiln::ge, kiln::ge},
      {"logical_and", kiln::logical_and},
      {"logical_or", kiln::logical_or},
  };
  return ops;
}

std::vector<Item> binary_items(bool must_run) {
  std::vector<Item> items;
  for (const NamedBinary& op : binary_ops()) {
    BinaryOp f = op.fn;
    items.push_back({op.name, [f](const Inputs& in) { return f(in[0], in[1]); }, must_run});
  }
  return items;
}

/// The ops with a Scalar overload on the given side, applied with scalar s.
std::vector<Item> scalar_items(Scalar s, bool scalar_right, bool must_run) {
  std::vector<Item> items;
  for (const NamedBinary& op : binary_ops()) {
    if (scalar_right && op.right != nullptr) {
      ScalarRight f = op.right;
      items.push_back({op.name, [f, s](const Inputs& in) { return f(in[0], s); }, must_run});
    } else if (!scalar_right && op.left != nullptr) {
      ScalarLeft f = op.left;
      items.push_back({op.name, [f, s](const Inputs& in) { return f(s, in[0]); }, must_run});
    }
  }
  return items;
}

struct PairCase {
  std::string label;
  ShapeCase a;
  ShapeCase b;
};

std::vector<PairCase> pair_cases() {
  return {
      {"0-d and 0-d", {"", {}}, {"", {}}},
      {"empty 4x0 and 4x0", {"", {4, 0}}, {"", {4, 0}}},
      {"empty 0x33 and 1x33", {"", {0, 33}}, {"", {1, 33}}},
      {"one element and one element", {"", {1}}, {"", {1}}},
      {"1023 and 1023", {"", {1023}}, {"", {1023}}},
      {"7x33 and 7x33", {"", {7, 33}}, {"", {7, 33}}},
      {"2x3x5x7 and 2x3x5x7", {"", {2, 3, 5, 7}}, {"", {2, 3, 5, 7}}},
      {"7x1 and 1x33", {"", {7, 1}}, {"", {1, 33}}},
      {"7x33 and 33", {"", {7, 33}}, {"", {33}}},
      {"2x1x5x1 and 3x1x7", {"", {2, 1, 5, 1}}, {"", {3, 1, 7}}},
      {"7x33 and 0-d", {"", {7, 33}}, {"", {}}},
      {"0-d and 7x33", {"", {}}, {"", {7, 33}}},
      {"7x33 transposed and 7x33 step-2 slice",
       {"", {7, 33}, Layout::transposed},
       {"", {7, 33}, Layout::sliced}},
      {"7x33 and 7x33 expanded from 1x33", {"", {7, 33}}, {"", {7, 33}, Layout::expanded, {1, 33}}},
      {"2x3x5x7 permuted and 2x3x5x7 expanded from 2x1x5x1",
       {"", {2, 3, 5, 7}, Layout::permuted},
       {"", {2, 3, 5, 7}, Layout::expanded, {2, 1, 5, 1}}},
  };
}

/// Divisors (the second operand) avoid integer zeros: integer floor_divide and remainder by
/// zero are errors. Floats keep their zeros (division by ±0 is IEEE's).
Values divisor_values(DType t) { return is_floating(t) ? Values::special : Values::nonzero; }

Tensor input(const ShapeCase& s, DType t, Values v, uint64_t seed) {
  return make_input(s.shape, t, v, seed, s.layout, s.base);
}

} // namespace

TEST_CASE("diff: binary ops over every dtype and operand pair", "[diff]") {
  uint64_t seed = 1000;
  const std::vector<std::string> short_list = {
      "0-d and 0-d",
      "empty 0x33 and 1x33",
      "1023 and 1023",
      "7x1 and 1x33",
      "7x33 and 0-d",
      "7x33 transposed and 7x33 step-2 slice",
      "2x3x5x7 permuted and 2x3x5x7 expanded from 2x1x5x1"};
  for (DType t : sweep_dtypes()) {
    for (const PairCase& p : pair_cases()) {
      if (t != DType::f32 &&
          std::find(short_list.begin(), short_list.end(), p.label) == short_list.end())
        continue;
      Tensor a = input(p.a, t, Values::special, ++seed);
      Tensor b = input(p.b, t, divisor_values(t), ++seed);
      CHECK(check_bundle("binary ops", dtype_str(t) + " " + p.label, {a, b},
                         binary_items(t == DType::f32)));
    }
  }
}

TEST_CASE("diff: binary ops with a C++ scalar operand", "[diff]") {
  struct ScalarCase {
    std::string label;
    Scalar value;
    bool right; // tensor op scalar (else scalar op tensor)
  };
  const std::vector<ScalarCase> scalars = {
      {"2.5", Scalar(2.5), true}, {"-0.0", Scalar(-0.0), true},  {"0.1", Scalar(0.1), true},
      {"3", Scalar(3), false},    {"true", Scalar(true), false},
  };
  uint64_t seed = 2000;
  for (DType t : sweep_dtypes()) {
    for (const ScalarCase& s : scalars) {
      if (s.label == "0.1" && !is_floating(t)) continue; // the same promotion as 2.5
      const bool right = s.right;
      // x op 0.1 on f16 reads 0.1 at f32 precision in add/sub/mul/div (PyTorch's opmath
      // scalar) but rounds it to f16 elsewhere: a fused kernel must do the same.
      Values v = right ? divisor_values(t) : Values::nonzero;
      Tensor x = make_input({7, 33}, t, v, ++seed);
      std::string label =
          right ? dtype_str(t) + " 7x33 op " + s.label : dtype_str(t) + " " + s.label + " op 7x33";
      CHECK(check_bundle("binary ops with a scalar", label, {x},
                         scalar_items(s.value, right, t == DType::f32 && !s.value.is_bool())));
    }
  }
}

TEST_CASE("diff: each binary op alone", "[diff]") {
  uint64_t seed = 3000;
  for (const NamedBinary& op : binary_ops()) {
    BinaryOp f = op.fn;
    struct Config {
      DType dtype;
      std::string label;
      Shape a, b;
    };
    for (const Config& cfg : std::vector<Config>{
             {DType::f32, "7x1 and 1x33", {7, 1}, {1, 33}},
             {DType::f16, "1023 and 1023", {1023}, {1023}},
         }) {
      Case c;
      c.op = op.name;
      c.variant = dtype_str(cfg.dtype) + " " + cfg.label;
      c.inputs = {make_input(cfg.a, cfg.dtype, Values::special, ++seed),
                  make_input(cfg.b, cfg.dtype, divisor_values(cfg.dtype), ++seed)};
      c.fn = [f](const Inputs& in) { return Outputs{f(in[0], in[1])}; };
      c.may_refuse = cfg.dtype != DType::f32;
      check(c);
    }
  }
}

TEST_CASE("diff: binary ops promote mixed dtypes", "[diff]") {
  struct Mixed {
    DType a;
    Shape as;
    DType b;
    Shape bs;
  };
  // Dim-ful operands promote by dtype; a 0-d operand only raises the category.
  const std::vector<Mixed> mixed = {
      {DType::i32, {7, 33}, DType::f32, {7, 33}},   {DType::f32, {7, 33}, DType::i32, {7, 33}},
      {DType::i64, {7, 33}, DType::f16, {7, 33}},   {DType::bool_, {7, 33}, DType::i32, {7, 33}},
      {DType::bool_, {7, 33}, DType::f32, {1, 33}}, {DType::f16, {7, 33}, DType::bf16, {7, 33}},
      {DType::f16, {7, 33}, DType::f32, {7, 1}},    {DType::bf16, {7, 33}, DType::f64, {33}},
      {DType::i32, {7, 33}, DType::i64, {7, 33}},   {DType::u8, {7, 33}, DType::i8, {7, 33}},
      {DType::f16, {7, 33}, DType::f64, {}},        {DType::i32, {7, 33}, DType::i64, {}},
      {DType::i32, {7, 33}, DType::f32, {}},        {DType::bool_, {7, 33}, DType::i64, {}},
      {DType::f32, {}, DType::bf16, {7, 33}},       {DType::f64, {}, DType::i32, {}},
  };
  uint64_t seed = 4000;
  for (const Mixed& m : mixed) {
    Tensor a = make_input(m.as, m.a, Values::special, ++seed);
    Tensor b = make_input(m.bs, m.b, divisor_values(m.b), ++seed);
    std::string label =
        dtype_str(m.a) + " " + shape_str(m.as) + " and " + dtype_str(m.b) + " " + shape_str(m.bs);
    CHECK(check_bundle("binary ops mixed dtypes", label, {a, b}, binary_items(false)));
  }
}

TEST_CASE("diff: maximum and minimum keep NaN and the order of signed zeros", "[diff]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> a = {nan, 1.0f, nan, -0.0f, 0.0f, -0.0f, inf, -inf, 2.0f, nan};
  const std::vector<float> b = {1.0f, nan, nan, 0.0f, -0.0f, -0.0f, nan, 3.0f, -inf, -inf};
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    Tensor x = tensor(a).to(t), y = tensor(b).to(t);
    check_bundle(
        "maximum and minimum", dtype_str(t) + " 10", {x, y},
        {{"maximum", [](const Inputs& in) { return maximum(in[0], in[1]); }, true},
         {"minimum", [](const Inputs& in) { return minimum(in[0], in[1]); }, true},
         {"maximum with 0.0", [](const Inputs& in) { return maximum(in[0], 0.0); }, true},
         {"minimum of -0.0 and x", [](const Inputs& in) { return minimum(-0.0, in[1]); }, true},
         {"clamp to [-1, 1]", [](const Inputs& in) { return clamp(in[0], -1.0, 1.0); }, true}});
  }
}

TEST_CASE("diff: integer division and remainder and pow at the edges", "[diff]") {
  for (DType t : {DType::i32, DType::i64, DType::i8, DType::u8}) {
    auto [lo, hi] =
        std::pair<int64_t, int64_t>{t == DType::i32  ? std::numeric_limits<int32_t>::min()
                                    : t == DType::i8 ? -128
                                    : t == DType::u8 ? 0
                                                     : std::numeric_limits<int64_t>::min(),
                                    t == DType::i32  ? std::numeric_limits<int32_t>::max()
                                    : t == DType::i8 ? 127
                                    : t == DType::u8 ? 255
                                                     : std::numeric_limits<int64_t>::max()};
    std::vector<int64_t> a = {lo, lo, hi, hi, 7, -7, 7, -7, 0, lo, 1, -1, 3, 2};
    std::vector<int64_t> b = {-1, 1, -1, 2, 2, 2, -2, -2, 5, 3, -1, 63, 40, 31};
    for (int64_t& x : a)
      x = std::clamp(x, lo, hi);
    for (int64_t& x : b)
      x = std::max<int64_t>(std::clamp(x, lo, hi), t == DType::u8 ? 1 : lo);
    Tensor x = tensor(a).to(t), y = tensor(b).to(t);
    check_bundle("integer division edges", dtype_str(t) + " 14", {x, y},
                 {{"floor_divide", [](const Inputs& in) { return floor_divide(in[0], in[1]); }},
                  {"remainder", [](const Inputs& in) { return remainder(in[0], in[1]); }},
                  {"pow", [](const Inputs& in) { return pow(in[0], in[1]); }},
                  {"mul (wraps)", [](const Inputs& in) { return in[0] * in[1]; }},
                  {"add (wraps)", [](const Inputs& in) { return in[0] + in[0]; }},
                  {"sub (wraps)", [](const Inputs& in) { return in[1] - in[0]; }},
                  {"neg (wraps)", [](const Inputs& in) { return -in[0]; }},
                  {"abs (wraps)", [](const Inputs& in) { return abs(in[0]); }},
                  {"div (true division)", [](const Inputs& in) { return in[0] / in[1]; }}});
  }
}

TEST_CASE("diff: float floor_divide and remainder follow Python", "[diff]") {
  const std::vector<double> a = {1.0, -1.0, 5.5, -5.5, 0.0, -0.0, 1e300, 7.0, -7.0, 0.3, 3.0};
  const std::vector<double> b = {0.1, 0.1, -2.0, 2.0, -3.0, 3.0, 1e-300, 0.0, -0.0, 0.1, -0.0};
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    Tensor x = tensor(a).to(t), y = tensor(b).to(t);
    check_bundle(
        "float division edges", dtype_str(t) + " 11", {x, y},
        {{"floor_divide", [](const Inputs& in) { return floor_divide(in[0], in[1]); }, true},
         {"remainder", [](const Inputs& in) { return remainder(in[0], in[1]); }, true},
         {"div", [](const Inputs& in) { return in[0] / in[1]; }, true},
         {"pow", [](const Inputs& in) { return pow(in[0], in[1]); }, true},
         {"pow 2 (as x * x)", [](const Inputs& in) { return pow(in[0], 2); }, true},
         {"pow 0.5", [](const Inputs& in) { return pow(in[0], 0.5); }, true},
         {"pow -1", [](const Inputs& in) { return pow(in[0], -1.0); }, true},
         {"pow 3 integer scalar", [](const Inputs& in) { return pow(in[0], 3); }, true}});
  }
}

TEST_CASE("diff: where over dtypes and broadcasts", "[diff]") {
  uint64_t seed = 5000;
  for (DType t : sweep_dtypes()) {
    struct W {
      std::string label;
      ShapeCase cond, a, b;
    };
    const std::vector<W> cases = {
        {"7x33 all", {"", {7, 33}}, {"", {7, 33}}, {"", {7, 33}}},
        {"0-d all", {"", {}}, {"", {}}, {"", {}}},
        {"empty 0x33 cond with 1x33 and 0-d", {"", {0, 33}}, {"", {1, 33}}, {"", {}}},
        {"7x1 cond 1x33 a 0-d b", {"", {7, 1}}, {"", {1, 33}}, {"", {}}},
        {"transposed cond step-2 a expanded b",
         {"", {7, 33}, Layout::transposed},
         {"", {7, 33}, Layout::sliced},
         {"", {7, 33}, Layout::expanded, {7, 1}}},
        {"2x3x5x7 cond 5x7 a 2x3x1x1 b", {"", {2, 3, 5, 7}}, {"", {5, 7}}, {"", {2, 3, 1, 1}}},
    };
    for (const W& w : cases) {
      Tensor cond = make_input(w.cond.shape, DType::bool_, Values::normal, ++seed, w.cond.layout,
                               w.cond.base);
      Tensor a = make_input(w.a.shape, t, Values::special, ++seed, w.a.layout, w.a.base);
      Tensor b = make_input(w.b.shape, t, Values::special, ++seed, w.b.layout, w.b.base);
      CHECK(check_bundle(
          "where", dtype_str(t) + " " + w.label, {cond, a, b},
          {{"where", [](const Inputs& in) { return where(in[0], in[1], in[2]); }, true},
           {"where scalar b", [](const Inputs& in) { return where(in[0], in[1], 2.5); }},
           {"where scalar a", [](const Inputs& in) { return where(in[0], -0.0, in[2]); }},
           {"where int scalar", [](const Inputs& in) { return where(in[0], in[1], 3); }},
           {"masked_fill", [](const Inputs& in) {
              Tensor a = in[1].expand(broadcast_shapes(in[0].sizes(), in[1].sizes(), "test"));
              return masked_fill(a, in[0], -1);
            }}}));
    }
  }
  // Mixed operand dtypes promote; a condition from a comparison feeds where directly.
  const std::vector<std::pair<DType, DType>> mixed = {{DType::f16, DType::f32},
                                                      {DType::i32, DType::f16},
                                                      {DType::bool_, DType::i64},
                                                      {DType::bf16, DType::f16}};
  for (auto [ta, tb] : mixed) {
    Tensor a = make_input({7, 33}, ta, Values::special, ++seed);
    Tensor b = make_input({33}, tb, Values::special, ++seed);
    CHECK(check_bundle(
        "where mixed dtypes", dtype_str(ta) + " 7x33 and " + dtype_str(tb) + " 33", {a, b},
        {{"where(a > b)", [](const Inputs& in) { return where(in[0] > in[1], in[0], in[1]); },
          true},
         {"where(a != a)", [](const Inputs& in) { return where(in[0] != in[0], in[1], in[0]); },
          true}}));
  }
}
