// Differential tests of the unary pointwise primitives (neg ... logical_not) and of cast:
// every dtype, every shape case of pointwise_shapes(), values with NaN, ±Inf and ±0.
#include <limits>

#include "diff/diff_testing.h"

using namespace kiln;
using namespace kiln::diff;

namespace {

using UnaryOp = Tensor (*)(const Tensor&);

struct NamedUnary {
  const char* name;
  UnaryOp fn;
};

const std::vector<NamedUnary>& unary_ops() {
  static const std::vector<NamedUnary> ops = {
      {"neg", kiln::neg},     {"abs", kiln::abs},
      {"exp", kiln::exp},     {"log", kiln::log},
      {"sqrt", kiln::sqrt},   {"rsqrt", kiln::rsqrt},
      {"sin", kiln::sin},     {"cos", kiln::cos},
      {"tanh", kiln::tanh},   {"sigmoid", kiln::sigmoid},
      {"relu", kiln::relu},   {"erf", kiln::erf},
      {"floor", kiln::floor}, {"ceil", kiln::ceil},
      {"round", kiln::round}, {"logical_not", kiln::logical_not},
  };
  return ops;
}

std::vector<Item> unary_items(bool must_run) {
  std::vector<Item> items;
  for (const NamedUnary& op : unary_ops()) {
    UnaryOp f = op.fn;
    items.push_back({op.name, [f](const Inputs& in) { return f(in[0]); }, must_run});
  }
  return items;
}

} // namespace

TEST_CASE("diff: unary ops over every dtype and shape case", "[diff]") {
  uint64_t seed = 100;
  for (DType t : sweep_dtypes()) {
    for (const ShapeCase& s : t == DType::f32 ? pointwise_shapes() : pointwise_shapes_short()) {
      Tensor x = make_input(s.shape, t, Values::special, ++seed, s.layout, s.base);
      // Every unary op takes f32; the other dtypes drop what their inference refuses.
      bool ran = check_bundle("unary ops", dtype_str(t) + " " + s.label, {x},
                              unary_items(t == DType::f32));
      CHECK(ran);
    }
  }
}

TEST_CASE("diff: each unary op alone", "[diff]") {
  struct Config {
    DType dtype;
    ShapeCase shape;
    Values values;
  };
  const std::vector<Config> configs = {
      {DType::f32, {"1023", {1023}}, Values::special},
      {DType::f32, {"7x33 transposed", {7, 33}, Layout::transposed}, Values::special},
      {DType::f64, {"33 positive", {33}}, Values::positive},
      {DType::bf16, {"7x33 step-2 slice", {7, 33}, Layout::sliced}, Values::special},
  };
  uint64_t seed = 200;
  for (const NamedUnary& op : unary_ops()) {
    for (const Config& cfg : configs) {
      Case c;
      c.op = op.name;
      c.variant = dtype_str(cfg.dtype) + " " + cfg.shape.label;
      c.inputs = {make_input(cfg.shape.shape, cfg.dtype, cfg.values, ++seed, cfg.shape.layout)};
      UnaryOp f = op.fn;
      c.fn = [f](const Inputs& in) { return Outputs{f(in[0])}; };
      c.may_refuse = !is_floating(cfg.dtype);
      check(c);
    }
  }
}

TEST_CASE("diff: unary ops keep the sign of zero and propagate NaN", "[diff]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Each value of the interesting set once, so a failure points at it directly.
  const std::vector<float> v = {-0.0f, 0.0f,  nan,  -nan,  inf,    -inf,    -0.4f, 0.4f,    -0.5f,
                                0.5f,  -1.5f, 2.5f, -2.5f, 1e-40f, -1e-40f, 88.8f, -104.0f, 3e38f};
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    Tensor x = tensor(v).to(t);
    check_bundle("unary ops on special values", dtype_str(t) + " 18", {x}, unary_items(true));
  }
}

TEST_CASE("diff: cast from every dtype to every dtype", "[diff]") {
  const std::vector<ShapeCase> shapes = {
      {"1023", {1023}},
      {"0-d", {}},
      {"empty 4x0", {4, 0}},
      {"7x33 transposed", {7, 33}, Layout::transposed},
  };
  uint64_t seed = 300;
  for (DType from : all_dtypes()) {
    for (const ShapeCase& s : shapes) {
      Tensor x = make_input(s.shape, from, Values::special, ++seed, s.layout, s.base);
      std::vector<Item> items;
      for (DType to : all_dtypes()) {
        if (to == from) continue;
        items.push_back(
            {"to " + dtype_str(to), [to](const Inputs& in) { return in[0].to(to); }, true});
      }
      // The same conversion feeding arithmetic, so that a fused cast cannot skip rounding.
      if (from != DType::bool_)
        items.push_back(
            {"to f16 then * 3", [](const Inputs& in) { return in[0].to(DType::f16) * 3; }, true});
      check_bundle("cast", dtype_str(from) + " " + s.label, {x}, std::move(items));
    }
  }
}

TEST_CASE("diff: float to integer casts saturate NaN and out-of-range values", "[diff]") {
  const std::vector<double> v = {std::nan(""),  1e300, -1e300, 3e9,  -3e9,  2147483647.5,
                                 -2147483648.9, 255.9, 256.0,  -1.0, -0.99, 9.3e18,
                                 -9.3e18,       127.5, -128.5, 0.5,  -0.5,  1e19};
  for (DType from : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    Tensor x = tensor(v).to(from);
    std::vector<Item> items;
    for (DType to : {DType::i8, DType::u8, DType::i32, DType::i64, DType::bool_})
      items.push_back(
          {"to " + dtype_str(to), [to](const Inputs& in) { return in[0].to(to); }, true});
    check_bundle("cast out of range", dtype_str(from) + " 18", {x}, std::move(items));
  }
}
