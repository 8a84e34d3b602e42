// Pointwise ops: arithmetic, integer division semantics, pow, maximum/minimum, comparisons,
// logical ops, unary math, casts, where/masked_fill/tril/triu, clamp, gelu/silu, operators,
// broadcasting, strided inputs and in-place forms.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>

#include <kiln/kiln.h>

using namespace kiln;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

std::vector<float> fv(const Tensor& t) { return t.to_vector<float>(); }
std::vector<int64_t> iv(const Tensor& t) { return t.to_vector<int64_t>(); }
std::vector<bool> bv(const Tensor& t) { return t.to_vector<bool>(); }

/// Exact comparison with NaN equal to NaN and the sign of zero significant.
bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] != b[i] || std::signbit(a[i]) != std::signbit(b[i])) return false;
  }
  return true;
}

} // namespace

TEST_CASE("add, sub, mul, div on f32 with broadcasting", "[pointwise]") {
  Tensor a = tensor<float>({1, 2, 3}, {3, 1});
  Tensor b = tensor<float>({10, 20, 30, 40});
  Tensor s = add(a, b);
  CHECK(s.sizes() == Shape{3, 4});
  CHECK(fv(s) == std::vector<float>{11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43});
  CHECK(fv(sub(a, b)) ==
        std::vector<float>{-9, -19, -29, -39, -8, -18, -28, -38, -7, -17, -27, -37});
  CHECK(fv(mul(b, a)) == std::vector<float>{10, 20, 30, 40, 20, 40, 60, 80, 30, 60, 90, 120});
  CHECK(fv(div(b, a)).back() == Approx(40.0f / 3.0f));
  CHECK(fv(add(a, b, 2)) == std::vector<float>{21, 41, 61, 81, 22, 42, 62, 82, 23, 43, 63, 83});
  CHECK_THROWS_WITH(add(tensor<float>({1, 2}), tensor<float>({1, 2, 3})),
                    Catch::Contains("add") && Catch::Contains("[2]") && Catch::Contains("[3]"));
}

TEST_CASE("pointwise ops read transposed, step-sliced and expanded inputs", "[pointwise]") {
  Tensor m = arange(12, DType::f32).reshape({3, 4});
  Tensor t = m.t(); // [4, 3]
  CHECK(fv(add(t, 100)) ==
        std::vector<float>{100, 104, 108, 101, 105, 109, 102, 106, 110, 103, 107, 111});
  Tensor sl = m.slice(1, 0, 4, 2); // columns 0 and 2: [3, 2]
  CHECK(fv(mul(sl, sl)) == std::vector<float>{0, 4, 16, 36, 64, 100});
  CHECK(fv(sub(t, t)) == std::vector<float>(12, 0));
  Tensor e = tensor<float>({1, 2}, {2, 1}).expand({2, 3});
  CHECK(fv(add(e, sl.t())) == std::vector<float>{1, 5, 9, 4, 8, 12});
  CHECK(fv(exp(t.slice(0, 0, 1))) == std::vector<float>{1.0f, std::exp(4.0f), std::exp(8.0f)});
  // Large enough to run in parallel chunks, transposed so that the chunks are strided.
  Tensor big = arange(300 * 200, DType::f32).reshape({300, 200});
  std::vector<float> r = fv(add(big.t(), 1));
  REQUIRE(r.size() == 60000u);
  CHECK(r[1] == 201);               // element (0, 1) of the transpose is big[1][0] = 200
  CHECK(r[59999] == 60000);         // last element
  CHECK(r[200 * 300 - 300] == 200); // element (199, 0) = big[0][199] = 199, plus 1
}

TEST_CASE("pointwise ops on empty and 0-d tensors", "[pointwise]") {
  Tensor e = zeros({0, 3});
  CHECK(add(e, 1).sizes() == Shape{0, 3});
  CHECK(exp(e).sizes() == Shape{0, 3});
  CHECK(add(e, tensor<float>({1, 2, 3})).sizes() == Shape{0, 3});
  CHECK(eq(e, e).dtype() == DType::bool_);
  CHECK(where(zeros({0}, DType::bool_), zeros({0}), 1.0).numel() == 0);
  Tensor s = scalar_tensor(2.0);
  Tensor r = add(s, scalar_tensor(3.0));
  CHECK(r.dim() == 0);
  CHECK(r.item<float>() == 5.0f);
  CHECK(mul(s, tensor<float>({1, 2})).sizes() == Shape{2});
  CHECK(neg(s).item<float>() == -2.0f);
}

TEST_CASE("integer add, sub and mul wrap around", "[pointwise]") {
  int32_t mx = std::numeric_limits<int32_t>::max(), mn = std::numeric_limits<int32_t>::min();
  Tensor a = tensor<int32_t>({mx, mn, 5});
  Tensor r = add(a, 1);
  CHECK(r.dtype() == DType::i32);
  CHECK(r.to_vector<int32_t>() == std::vector<int32_t>{mn, mn + 1, 6});
  CHECK(sub(a, 1).to_vector<int32_t>() == std::vector<int32_t>{mx - 1, mx, 4});
  CHECK(mul(a, 2).to_vector<int32_t>() == std::vector<int32_t>{-2, 0, 10});
  CHECK(add(tensor<int8_t>({127, -128}), tensor<int8_t>({1, -1})).to_vector<int8_t>() ==
        std::vector<int8_t>{-128, 127});
  CHECK(mul(tensor<uint8_t>({200}), tensor<uint8_t>({2})).to_vector<uint8_t>() ==
        std::vector<uint8_t>{144});
  int64_t lmx = std::numeric_limits<int64_t>::max();
  CHECK(iv(add(tensor<int64_t>({lmx}), 1)) ==
        std::vector<int64_t>{std::numeric_limits<int64_t>::min()});
  CHECK(iv(neg(tensor<int64_t>({std::numeric_limits<int64_t>::min()}))) ==
        std::vector<int64_t>{std::numeric_limits<int64_t>::min()});
}

TEST_CASE("integer floor_divide and remainder follow Python's signs", "[pointwise]") {
  Tensor a = tensor<int64_t>({-7, 7, -7, 7, 6, 0});
  Tensor b = tensor<int64_t>({2, -2, -2, 2, 3, 5});
  CHECK(iv(floor_divide(a, b)) == std::vector<int64_t>{-4, -4, 3, 3, 2, 0});
  CHECK(iv(remainder(a, b)) == std::vector<int64_t>{1, -1, -1, 1, 0, 0});
  CHECK(iv(a % 3) == std::vector<int64_t>{2, 1, 2, 1, 0, 0});
  CHECK(floor_divide(tensor<int32_t>({-7}), 2).to_vector<int32_t>() == std::vector<int32_t>{-4});
  CHECK(floor_divide(tensor<int8_t>({-128}), tensor<int8_t>({-1})).to_vector<int8_t>() ==
        std::vector<int8_t>{-128}); // wraps instead of trapping
  CHECK(remainder(tensor<int8_t>({-128}), tensor<int8_t>({-1})).to_vector<int8_t>() ==
        std::vector<int8_t>{0});
  CHECK(floor_divide(tensor<uint8_t>({7}), tensor<uint8_t>({2})).to_vector<uint8_t>() ==
        std::vector<uint8_t>{3});
  CHECK(floor_divide(7, tensor<int64_t>({-2})).to_vector<int64_t>() == std::vector<int64_t>{-4});
  CHECK_THROWS_WITH(floor_divide(a, 0), Catch::Contains("floor_divide: integer division by zero"));
  CHECK_THROWS_WITH(remainder(tensor<int32_t>({1, 2}), tensor<int32_t>({1, 0})),
                    Catch::Contains("remainder: integer division by zero"));
  CHECK_THROWS_WITH(floor_divide(tensor<bool>({true}), tensor<bool>({true})),
                    Catch::Contains("bool"));
}

TEST_CASE("float floor_divide, remainder and division by zero", "[pointwise]") {
  Tensor a = tensor<float>({-7.5f, 7.5f, 7.5f, -7.5f});
  Tensor b = tensor<float>({2, -2, 2, -2});
  CHECK(fv(floor_divide(a, b)) == std::vector<float>{-4, -4, 3, 3});
  CHECK(fv(remainder(a, b)) == std::vector<float>{0.5f, -0.5f, 1.5f, -1.5f});
  // The quotient is computed exactly via fmod: 1 // 0.1 is 9 (1 / 0.1 rounds up to 10).
  CHECK(floor_divide(tensor<double>({1.0}), 0.1).item<double>() == 9.0);
  CHECK(remainder(tensor<double>({1.0}), 0.1).item<double>() == std::fmod(1.0, 0.1));
  std::vector<float> q = fv(div(tensor<float>({1, -1, 0}), 0.0));
  CHECK(q[0] == kInf);
  CHECK(q[1] == -kInf);
  CHECK(std::isnan(q[2]));
  CHECK(fv(floor_divide(tensor<float>({1}), 0.0))[0] == kInf);
  CHECK(std::isnan(fv(remainder(tensor<float>({1}), 0.0))[0]));
  // Integer true division goes through f32, so dividing by zero is IEEE too.
  std::vector<float> iq = fv(div(tensor<int32_t>({1, 0}), tensor<int32_t>({0, 0})));
  CHECK(iq[0] == kInf);
  CHECK(std::isnan(iq[1]));
  CHECK(fv(div(tensor<int32_t>({1, 2, 3}), 2)) == std::vector<float>{0.5f, 1, 1.5f});
}

TEST_CASE("pow: integer and floating, exact squares, negative exponents", "[pointwise]") {
  CHECK(iv(pow(tensor<int64_t>({2, -3, 0}), 3)) == std::vector<int64_t>{8, -27, 0});
  CHECK(iv(pow(tensor<int64_t>({2, 3}), tensor<int64_t>({10, 0}))) ==
        std::vector<int64_t>{1024, 1});
  CHECK(pow(tensor<int32_t>({2}), 31).to_vector<int32_t>() ==
        std::vector<int32_t>{std::numeric_limits<int32_t>::min()});
  CHECK_THROWS_WITH(pow(tensor<int64_t>({2}), -1),
                    Catch::Contains("integers to negative integer powers are not allowed"));
  // Only a Scalar exponent is refused: a tensor one truncates 1 / base^-e (PyTorch's powi).
  CHECK(pow(tensor<int32_t>({2, 2, 1, -1, -1, 0}), tensor<int32_t>({1, -2, -5, -3, -4, -1}))
            .to_vector<int32_t>() == std::vector<int32_t>{2, 0, 1, -1, 1, 0});
  Tensor f = pow(tensor<int32_t>({4}), 0.5);
  CHECK(f.dtype() == DType::f32);
  CHECK(f.item<float>() == 2.0f);
  // x^2 is x * x exactly rounded, for every x.
  float x = 1.1f;
  CHECK(pow(tensor<float>({x}), 2).item<float>() == x * x);
  Tensor xs = tensor<float>({-3, 0.5f, 1e20f});
  CHECK(fv(xs.pow(2)) == std::vector<float>{9, 0.25f, 1e20f * 1e20f});
  CHECK(fv(pow(tensor<float>({2, 9}), tensor<float>({-1, 0.5f}))) == std::vector<float>{0.5f, 3});
  CHECK(std::isnan(fv(pow(tensor<float>({-8}), 1.0 / 3))[0]));
  CHECK(pow(tensor<double>({2}), 0.5).item<double>() == std::sqrt(2.0));
  CHECK_THROWS_WITH(pow(tensor<bool>({true}), tensor<bool>({true})),
                    Catch::Contains("pow") && Catch::Contains("bool"));
}

TEST_CASE("maximum and minimum propagate NaN and keep -0.0 ordering", "[pointwise]") {
  Tensor a = tensor<float>({1, kNaN, 3, -0.0f, 0.0f, -kInf});
  Tensor b = tensor<float>({2, 1, kNaN, 0.0f, -0.0f, kInf});
  CHECK(same_floats(fv(maximum(a, b)), {2, kNaN, kNaN, -0.0f, 0.0f, kInf}));
  CHECK(same_floats(fv(minimum(a, b)), {1, kNaN, kNaN, -0.0f, 0.0f, -kInf}));
  CHECK(iv(maximum(tensor<int64_t>({1, 5}), 3)) == std::vector<int64_t>{3, 5});
  CHECK(iv(minimum(3, tensor<int64_t>({1, 5}))) == std::vector<int64_t>{1, 3});
  CHECK(bv(maximum(tensor<bool>({true, false}), tensor<bool>({false, false}))) ==
        std::vector<bool>{true, false});
  Tensor h = maximum(tensor<Half>({Half(1.0f), Half(kNaN)}), 2.0);
  CHECK(h.dtype() == DType::f16);
  CHECK(fv(h)[0] == 2.0f);
  CHECK(std::isnan(fv(h)[1]));
}

TEST_CASE("comparisons compare in the promoted dtype and give bool", "[pointwise]") {
  Tensor a = tensor<float>({1, 2, 3, kNaN});
  Tensor b = tensor<float>({2, 2, 2, kNaN});
  CHECK(eq(a, b).dtype() == DType::bool_);
  CHECK(bv(eq(a, b)) == std::vector<bool>{false, true, false, false});
  CHECK(bv(ne(a, b)) == std::vector<bool>{true, false, true, true});
  CHECK(bv(lt(a, b)) == std::vector<bool>{true, false, false, false});
  CHECK(bv(le(a, b)) == std::vector<bool>{true, true, false, false});
  CHECK(bv(gt(a, b)) == std::vector<bool>{false, false, true, false});
  CHECK(bv(ge(a, b)) == std::vector<bool>{false, true, true, false});
  // i32 vs 2.5 compares as f32: 2 < 2.5.
  CHECK(bv(lt(tensor<int32_t>({2, 3}), 2.5)) == std::vector<bool>{true, false});
  CHECK(bv(eq(tensor<int32_t>({2}), 2.0)) == std::vector<bool>{true});
  // u8 255 and i8 -1 compare as i32.
  CHECK(bv(gt(tensor<uint8_t>({255}), tensor<int8_t>({-1}))) == std::vector<bool>{true});
  // A scalar compared with f16 is rounded to f16 first, as the common dtype says.
  CHECK(bv(eq(tensor<Half>({Half(0.1f)}), 0.1)) == std::vector<bool>{true});
  // Broadcast and reversed scalar operand.
  CHECK(bv(lt(1, tensor<int64_t>({0, 1, 2}))) == std::vector<bool>{false, false, true});
  Tensor c = gt(tensor<float>({1, 2, 3}, {3, 1}), tensor<float>({1.5f, 2.5f}));
  CHECK(c.sizes() == Shape{3, 2});
  CHECK(bv(c) == std::vector<bool>{false, false, true, false, true, true});
  CHECK(bv(ne(tensor<bool>({true, false}), tensor<bool>({true, true}))) ==
        std::vector<bool>{false, true});
}

TEST_CASE("logical ops treat nonzero (and NaN) as true", "[pointwise]") {
  Tensor a = tensor<float>({0, 1, kNaN, -0.0f});
  Tensor b = tensor<int32_t>({1, 1, 0, 5});
  CHECK(logical_and(a, b).dtype() == DType::bool_);
  CHECK(bv(logical_and(a, b)) == std::vector<bool>{false, true, false, false});
  CHECK(bv(logical_or(a, b)) == std::vector<bool>{true, true, true, true});
  CHECK(bv(logical_not(a)) == std::vector<bool>{true, false, false, true});
  CHECK(bv(logical_not(tensor<int64_t>({0, 3}))) == std::vector<bool>{true, false});
  Tensor m = tensor<bool>({true, false});
  CHECK(bv(!m) == std::vector<bool>{false, true});
  CHECK(bv(m && tensor<bool>({true, true})) == std::vector<bool>{true, false});
  CHECK(bv(m || tensor<bool>({false, false})) == std::vector<bool>{true, false});
}

TEST_CASE("neg, abs, relu: signs of zero, NaN, integers", "[pointwise]") {
  Tensor a = tensor<float>({0.0f, -0.0f, -2.5f, kNaN, -kInf});
  CHECK(same_floats(fv(neg(a)), {-0.0f, 0.0f, 2.5f, kNaN, kInf}));
  CHECK(same_floats(fv(abs(a)), {0.0f, 0.0f, 2.5f, kNaN, kInf}));
  // relu(x) = x > 0 ? x : 0: -0.0 gives +0.0 and NaN stays NaN.
  CHECK(same_floats(fv(relu(a)), {0.0f, 0.0f, 0.0f, kNaN, 0.0f}));
  CHECK(same_floats(fv(relu(tensor<float>({3, kInf}))), {3, kInf}));
  Tensor i = tensor<int32_t>({-3, 0, 4});
  CHECK(neg(i).dtype() == DType::i32);
  CHECK(neg(i).to_vector<int32_t>() == std::vector<int32_t>{3, 0, -4});
  CHECK(abs(i).to_vector<int32_t>() == std::vector<int32_t>{3, 0, 4});
  CHECK(relu(i).to_vector<int32_t>() == std::vector<int32_t>{0, 0, 4});
  CHECK(abs(tensor<int8_t>({-128})).to_vector<int8_t>() == std::vector<int8_t>{-128});
  CHECK(fv(-tensor<float>({1, -2})) == std::vector<float>{-1, 2});
  CHECK_THROWS_WITH(neg(tensor<bool>({true})), Catch::Contains("neg") && Catch::Contains("bool"));
  CHECK_THROWS_WITH(-tensor<bool>({true}), Catch::Contains("logical_not"));
  CHECK_THROWS_WITH(relu(tensor<bool>({true})), Catch::Contains("relu: not supported for bool"));
  CHECK_THROWS_WITH(abs(tensor<bool>({true})), Catch::Contains("abs"));
}

TEST_CASE("unary float functions: values, special cases, integer inputs give f32", "[pointwise]") {
  Tensor x = tensor<float>({-1.5f, 0.0f, 0.5f, 2.0f});
  auto each = [&](float (*f)(float)) {
    std::vector<float> r;
    for (float v : fv(x))
      r.push_back(f(v));
    return r;
  };
  CHECK(fv(exp(x)) == each([](float v) { return std::exp(v); }));
  CHECK(fv(sin(x)) == each([](float v) { return std::sin(v); }));
  CHECK(fv(cos(x)) == each([](float v) { return std::cos(v); }));
  CHECK(fv(tanh(x)) == each([](float v) { return std::tanh(v); }));
  CHECK(fv(erf(x)) == each([](float v) { return std::erf(v); }));
  CHECK(fv(sigmoid(x)) == each([](float v) { return 1.0f / (1.0f + std::exp(-v)); }));
  Tensor p = tensor<float>({0.0f, 4.0f, -1.0f, kInf});
  std::vector<float> l = fv(log(p));
  CHECK(l[0] == -kInf);
  CHECK(l[1] == std::log(4.0f));
  CHECK(std::isnan(l[2]));
  CHECK(l[3] == kInf);
  std::vector<float> s = fv(sqrt(p));
  CHECK(s[1] == 2.0f);
  CHECK(std::isnan(s[2]));
  std::vector<float> rs = fv(rsqrt(p));
  CHECK(rs[0] == kInf);
  CHECK(rs[1] == 0.5f);
  CHECK(rs[3] == 0.0f);
  CHECK(fv(sigmoid(tensor<float>({-200, 200}))) == std::vector<float>{0, 1});
  Tensor e = exp(tensor<int64_t>({0, 1}));
  CHECK(e.dtype() == DType::f32);
  CHECK(fv(e) == std::vector<float>{1.0f, std::exp(1.0f)});
  CHECK(sqrt(tensor<bool>({true})).dtype() == DType::f32);
  Tensor d = exp(tensor<double>({1.0}));
  CHECK(d.dtype() == DType::f64);
  CHECK(d.item<double>() == std::exp(1.0));
}

TEST_CASE("floor, ceil, round (half to even), integers are copied", "[pointwise]") {
  Tensor x = tensor<float>({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.7f, 2.7f, kNaN});
  CHECK(same_floats(fv(round(x)), {0, 2, 2, -0.0f, -2, -3, 3, kNaN}));
  CHECK(same_floats(fv(floor(x)), {0, 1, 2, -1, -2, -3, 2, kNaN}));
  CHECK(same_floats(fv(ceil(x)), {1, 2, 3, -0.0f, -1, -2, 3, kNaN}));
  Tensor i = tensor<int64_t>({-3, 7});
  Tensor r = round(i);
  CHECK(r.dtype() == DType::i64);
  CHECK(iv(r) == std::vector<int64_t>{-3, 7});
  CHECK(iv(floor(i)) == std::vector<int64_t>{-3, 7});
  CHECK_THROWS_WITH(floor(tensor<bool>({true})), Catch::Contains("floor"));
}

TEST_CASE("f16 and bf16 compute in f32 and round once", "[pointwise]") {
  // exp in f16: the f32 result rounded once to f16.
  Tensor h = tensor<Half>({Half(0.3f), Half(-2.0f)});
  Tensor e = exp(h);
  CHECK(e.dtype() == DType::f16);
  std::vector<Half> ev = e.to_vector<Half>();
  CHECK(ev[0].bits == Half(std::exp(static_cast<float>(Half(0.3f)))).bits);
  CHECK(ev[1].bits == Half(std::exp(-2.0f)).bits);
  // 2049 is not an f16: 2048 + 1 rounds (to even) back to 2048, and 2048 + 3 to 2052.
  CHECK(fv(add(tensor<Half>({Half(2048.0f), Half(2048.0f)}),
               tensor<Half>({Half(1.0f), Half(3.0f)}))) == std::vector<float>{2048, 2052});
  // A scalar operand of add/mul is used at f32 precision (PyTorch's opmath scalar): 1024 +
  // 0.5002 rounds up to 1025, where rounding the scalar to f16 first (0.5) would tie to 1024.
  CHECK(fv(add(tensor<Half>({Half(1024.0f)}), 0.5002)) == std::vector<float>{1025});
  CHECK(fv(mul(tensor<BFloat16>({BFloat16(3.0f)}), 1.0 / 3)) == std::vector<float>{1.0f});
  Tensor b = mul(tensor<BFloat16>({BFloat16(1.5f)}), tensor<BFloat16>({BFloat16(1.5f)}));
  CHECK(b.dtype() == DType::bf16);
  CHECK(fv(b) == std::vector<float>{2.25f});
  CHECK(fv(div(tensor<Half>({Half(1.0f)}), tensor<Half>({Half(3.0f)})))[0] ==
        static_cast<float>(Half(1.0f / 3.0f)));
}

TEST_CASE("cast converts between every pair of dtypes", "[pointwise]") {
  Tensor f = tensor<float>({2.7f, -2.7f, 0.0f, -0.0f, kNaN, 300.0f, -1.0f});
  CHECK(f.to(DType::i32).to_vector<int32_t>() == std::vector<int32_t>{2, -2, 0, 0, 0, 300, -1});
  // NaN → 0; 8-bit types wrap modulo 256 (after truncation): 300 → 44, -1 → 255.
  CHECK(f.to(DType::u8).to_vector<uint8_t>() == std::vector<uint8_t>{2, 254, 0, 0, 0, 44, 255});
  CHECK(bv(f.to(DType::bool_)) == std::vector<bool>{true, true, false, false, true, true, true});
  // Beyond int64, values saturate.
  Tensor big = tensor<float>({kInf, -kInf, 1e30f});
  CHECK(iv(big.to(DType::i64)) == std::vector<int64_t>{std::numeric_limits<int64_t>::max(),
                                                       std::numeric_limits<int64_t>::min(),
                                                       std::numeric_limits<int64_t>::max()});
  // f32 → f16/bf16 rounds to nearest even.
  std::vector<Half> h = tensor<float>({2049.0f, 2051.0f, 1e6f}).to(DType::f16).to_vector<Half>();
  CHECK(static_cast<float>(h[0]) == 2048.0f);
  CHECK(static_cast<float>(h[1]) == 2052.0f);
  CHECK(std::isinf(static_cast<float>(h[2])));
  std::vector<float> bf = fv(tensor<float>({1.0f + 1.0f / 256, 1.0f + 3.0f / 256}).to(DType::bf16));
  CHECK(bf == std::vector<float>{1.0f, 1.0f + 4.0f / 256});
  CHECK(fv(tensor<bool>({true, false}).to(DType::f32)) == std::vector<float>{1, 0});
  CHECK(tensor<int64_t>({-1}).to(DType::u8).to_vector<uint8_t>() == std::vector<uint8_t>{255});
  CHECK(tensor<int32_t>({257}).to(DType::i8).to_vector<int8_t>() == std::vector<int8_t>{1});
  CHECK(tensor<double>({0.1}).to(DType::f32).item<float>() == 0.1f);
  CHECK(tensor<Half>({Half(0.5f)}).to(DType::f64).item<double>() == 0.5);
  // Same dtype: the very same tensor.
  Tensor same = to(f, DType::f32);
  CHECK(same.is_same(f));
  // Strided input, 0-d input.
  Tensor m = arange(6, DType::f32).reshape({2, 3}).t();
  CHECK(iv(m.to(DType::i64)) == std::vector<int64_t>{0, 3, 1, 4, 2, 5});
  CHECK(scalar_tensor(3.9).to(DType::i32).item<int32_t>() == 3);
}

TEST_CASE("where: three overloads, broadcasting, promotion", "[pointwise]") {
  Tensor c = tensor<bool>({true, false, true});
  Tensor a = tensor<float>({1, 2, 3});
  Tensor b = tensor<float>({-1, -2, kNaN});
  CHECK(same_floats(fv(where(c, a, b)), {1, -2, 3}));
  CHECK(same_floats(fv(where(!c, a, b)), {-1, 2, kNaN}));
  CHECK(fv(where(c, a, 0.5)) == std::vector<float>{1, 0.5f, 3});
  CHECK(fv(where(c, 7, a)) == std::vector<float>{7, 2, 7});
  Tensor r =
      where(tensor<bool>({true, false}, {2, 1}), tensor<int32_t>({1, 2, 3}), tensor<int64_t>({0}));
  CHECK(r.dtype() == DType::i64);
  CHECK(r.sizes() == Shape{2, 3});
  CHECK(iv(r) == std::vector<int64_t>{1, 2, 3, 0, 0, 0});
  CHECK(where(c, tensor<int32_t>({1, 2, 3}), 2.5).dtype() == DType::f32);
  CHECK(where(c, tensor<Half>({Half(1.0f), Half(2.0f), Half(3.0f)}), 2.5).dtype() == DType::f16);
  CHECK(where(c, tensor<int32_t>({1, 2, 3}), 4).dtype() == DType::i32);
  Tensor cs = tensor<bool>({true, true, false, false}, {2, 2}).t(); // strided condition
  CHECK(fv(where(cs, ones({2, 2}), zeros({2, 2}))) == std::vector<float>{1, 0, 1, 0});
  CHECK_THROWS_WITH(where(tensor<int64_t>({1, 0, 1}), a, b),
                    Catch::Contains("where: expected a bool condition"));
  CHECK_THROWS_WITH(where(c, a, tensor<float>({1, 2})), Catch::Contains("where"));
}

TEST_CASE("masked_fill keeps the input's dtype and shape", "[pointwise]") {
  Tensor a = arange(6, DType::f32).reshape({2, 3});
  Tensor m = tensor<bool>({true, false, true});
  CHECK(fv(masked_fill(a, m, -1)) == std::vector<float>{-1, 1, -1, -1, 4, -1});
  CHECK(same_floats(fv(a.masked_fill(m, kNaN)), {kNaN, 1, kNaN, kNaN, 4, kNaN}));
  Tensor i = masked_fill(tensor<int32_t>({1, 2}), tensor<bool>({false, true}), 2.7);
  CHECK(i.dtype() == DType::i32);
  CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{1, 2});
  CHECK_THROWS_WITH(masked_fill(a, tensor<int64_t>({1, 0, 1}), 0),
                    Catch::Contains("masked_fill: expected a bool mask"));
  CHECK_THROWS_WITH(masked_fill(tensor<float>({1, 2, 3}), zeros({2, 3}, DType::bool_), 0),
                    Catch::Contains("masked_fill"));
  Tensor b = arange(4, DType::f32);
  b.masked_fill_(tensor<bool>({false, true, false, true}), 9);
  CHECK(fv(b) == std::vector<float>{0, 9, 2, 9});
}

TEST_CASE("tril and triu", "[pointwise]") {
  Tensor a = add(arange(12, DType::f32).reshape({3, 4}), 1);
  CHECK(fv(tril(a)) == std::vector<float>{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  CHECK(fv(triu(a)) == std::vector<float>{1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  CHECK(fv(tril(a, 1)) == std::vector<float>{1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12});
  CHECK(fv(triu(a, -1)) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12});
  CHECK(fv(tril(a, -3)) == std::vector<float>(12, 0));
  Tensor batch = ones({2, 2, 2}, DType::bool_);
  Tensor tb = triu(batch);
  CHECK(tb.dtype() == DType::bool_);
  CHECK(bv(tb) == std::vector<bool>{true, true, false, true, true, true, false, true});
  CHECK(iv(tril(ones({2, 2}, DType::i64).t())) == std::vector<int64_t>{1, 0, 1, 1});
  CHECK_THROWS_WITH(tril(ones({3})),
                    Catch::Contains("tril: expected a tensor with at least 2 dims"));
}

TEST_CASE("clamp: NaN stays NaN, promotion, one bound required", "[pointwise]") {
  Tensor a = tensor<float>({-2, 0.5f, 3, kNaN, -0.0f});
  CHECK(same_floats(fv(clamp(a, -1, 1)), {-1, 0.5f, 1, kNaN, -0.0f}));
  CHECK(same_floats(fv(clamp(a, 0, std::nullopt)), {0, 0.5f, 3, kNaN, -0.0f}));
  CHECK(same_floats(fv(a.clamp(std::nullopt, 0)), {-2, 0, 0, kNaN, -0.0f}));
  CHECK(fv(clamp(tensor<float>({5}), 2, 1)) == std::vector<float>{1}); // min > max gives max
  Tensor i = clamp(tensor<int64_t>({-5, 5}), 0, 3);
  CHECK(i.dtype() == DType::i64);
  CHECK(iv(i) == std::vector<int64_t>{0, 3});
  Tensor p = clamp(tensor<int64_t>({0, 2}), 0.5, std::nullopt);
  CHECK(p.dtype() == DType::f32);
  CHECK(fv(p) == std::vector<float>{0.5f, 2});
  CHECK_THROWS_WITH(clamp(a, std::nullopt, std::nullopt), Catch::Contains("clamp: at least one"));
  Tensor c = tensor<float>({-3, 3});
  c.clamp_(-1, 1);
  CHECK(fv(c) == std::vector<float>{-1, 1});
}

TEST_CASE("gelu (erf and tanh) and silu", "[pointwise]") {
  std::vector<float> xs{-3.0f, -0.5f, 0.0f, 1.0f, 2.5f};
  Tensor x = tensor<float>(xs);
  std::vector<float> g = fv(gelu(x)), gt = fv(gelu(x, "tanh")), s = fv(silu(x));
  for (size_t i = 0; i < xs.size(); ++i) {
    double v = xs[i];
    CHECK(g[i] == Approx(0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))).margin(1e-6));
    double inner = std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v);
    CHECK(gt[i] == Approx(0.5 * v * (1 + std::tanh(inner))).margin(1e-6));
    CHECK(s[i] == Approx(v / (1 + std::exp(-v))).margin(1e-6));
  }
  CHECK(gelu(tensor<Half>({Half(1.0f)})).dtype() == DType::f16);
  CHECK(std::isnan(fv(gelu(tensor<float>({kNaN})))[0]));
  CHECK_THROWS_WITH(gelu(x, "fast"), Catch::Contains("gelu: approximate must be"));
  CHECK_THROWS_WITH(gelu(tensor<int64_t>({1})),
                    Catch::Contains("gelu: expected a floating-point tensor"));
  CHECK_THROWS_WITH(silu(tensor<int64_t>({1})), Catch::Contains("silu"));
}

TEST_CASE("operators and scalar overloads", "[pointwise]") {
  Tensor x = tensor<float>({1, 2, 4});
  CHECK(fv(2 - x) == std::vector<float>{1, 0, -2});
  CHECK(fv(x - 2) == std::vector<float>{-1, 0, 2});
  CHECK(fv(x / 2) == std::vector<float>{0.5f, 1, 2});
  CHECK(fv(8 / x) == std::vector<float>{8, 4, 2});
  CHECK(fv(x * 3) == std::vector<float>{3, 6, 12});
  CHECK(fv(3 * x) == std::vector<float>{3, 6, 12});
  CHECK(fv(x + x) == std::vector<float>{2, 4, 8});
  CHECK(fv(x * x - x / x) == std::vector<float>{0, 3, 15});
  CHECK(fv(x % 3) == std::vector<float>{1, 2, 1});
  CHECK(fv(5 % x) == std::vector<float>{0, 1, 1});
  CHECK(bv(x == 2) == std::vector<bool>{false, true, false});
  CHECK(bv(2 == x) == std::vector<bool>{false, true, false});
  CHECK(bv(x != 2) == std::vector<bool>{true, false, true});
  CHECK(bv(x < 2) == std::vector<bool>{true, false, false});
  CHECK(bv(x <= 2) == std::vector<bool>{true, true, false});
  CHECK(bv(x > 2) == std::vector<bool>{false, false, true});
  CHECK(bv(x >= 2) == std::vector<bool>{false, true, true});
  CHECK(bv(3 > x) == std::vector<bool>{true, true, false});
  CHECK(bv((x > 1) && (x < 4)) == std::vector<bool>{false, true, false});
  CHECK(bv((x < 2) || (x > 2)) == std::vector<bool>{true, false, true});
  CHECK(bv(!(x == 2)) == std::vector<bool>{true, false, true});
  Tensor i = tensor<int64_t>({1, 2});
  CHECK((i + 1).dtype() == DType::i64);
  CHECK((1 / i).dtype() == DType::f32);
  CHECK((i * 0.5).dtype() == DType::f32);
  CHECK(fv(maximum(x, 2)) == std::vector<float>{2, 2, 4});
  CHECK(fv(minimum(2, x)) == std::vector<float>{1, 2, 2});
  CHECK(fv(floor_divide(x, 3)) == std::vector<float>{0, 0, 1});
  CHECK(fv(remainder(-1, x)) == std::vector<float>{0, 1, 3});
}

TEST_CASE("in-place ops: strided destinations, aliasing, versions, type checks", "[pointwise]") {
  Tensor base = arange(6, DType::f32).reshape({2, 3});
  uint64_t v0 = base.version();
  base.t().add_(1); // a non-contiguous destination that is also the input
  CHECK(fv(base) == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(base.version() > v0);
  uint64_t v1 = base.version();
  base.add_(base); // the other operand aliases the destination
  CHECK(fv(base) == std::vector<float>{2, 4, 6, 8, 10, 12});
  CHECK(base.version() > v1);
  base.slice(1, 0, 3, 2).mul_(tensor<float>({10, 100})); // columns 0 and 2
  CHECK(fv(base) == std::vector<float>{20, 4, 600, 80, 10, 1200});
  // The destination overlaps the input in another layout: computed before it is written.
  Tensor sq = arange(4, DType::f32).reshape({2, 2});
  sq.add_(sq.t());
  CHECK(fv(sq) == std::vector<float>{0, 3, 3, 6});
  Tensor h = tensor<Half>({Half(1.0f), Half(2.0f)});
  h.add_(tensor<float>({0.5f, 0.25f})); // f32 result written back into f16
  CHECK(h.dtype() == DType::f16);
  CHECK(fv(h) == std::vector<float>{1.5f, 2.25f});
  Tensor d = tensor<float>({1, 2});
  d.div_(2).sub_(1);
  CHECK(fv(d) == std::vector<float>{-0.5f, 0});
  Tensor r = tensor<float>({-1, 2, kNaN});
  r.relu_();
  CHECK(same_floats(fv(r), {0, 2, kNaN}));
  Tensor it = tensor<int32_t>({1, 2});
  CHECK_THROWS_WITH(it.add_(1.5), Catch::Contains("result type f32") && Catch::Contains("i32"));
  CHECK_THROWS_WITH(it.div_(2), Catch::Contains("can't be cast"));
  CHECK_THROWS_WITH(tensor<bool>({true}).add_(1), Catch::Contains("result type i64"));
  CHECK_THROWS_WITH(zeros({2}).add_(zeros({3, 2})), Catch::Contains("add"));
  it.add_(scalar_tensor(5)); // a 0-d i64 tensor keeps i32
  CHECK(it.to_vector<int32_t>() == std::vector<int32_t>{6, 7});
}
