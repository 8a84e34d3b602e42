// The CPU code generator's inline vector math (codegen/cpu/vector_math) against the eager
// kernels, through JIT-compiled probes: special values match exactly, the rest within a ULP
// bound. Prints the measured maximum error as `ulp <op> <dtype> <n>` lines.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <limits>
#include <numbers>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <kiln/kiln.h>

#include "codegen/cpu/math_probe.h"

namespace {

using kiln::DType;
using kiln::Op;
using kiln::codegen::cpu::compile_math_probe;
using kiln::codegen::cpu::MathProbe;

template <typename T> using Bits = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
template <typename T> using UBits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

template <typename T> Bits<T> bits_of(T v) {
  Bits<T> b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
template <typename T> T from_bits(UBits<T> u) {
  T v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

/// Distance in the ordered integer representation: adjacent floats are 1 apart, +0 and -0
/// coincide, the smallest denormals of either sign are 2 apart.
template <typename T> uint64_t ulp_distance(T a, T b) {
  auto ordered = [](T v) -> int64_t {
    Bits<T> i = bits_of(v);
    return i >= 0 ? int64_t(i) : int64_t(std::numeric_limits<Bits<T>>::min()) - int64_t(i);
  };
  int64_t x = ordered(a), y = ordered(b);
  return x >= y ? uint64_t(x) - uint64_t(y) : uint64_t(y) - uint64_t(x);
}

/// The eager kernel's results on the same inputs.
template <typename T>
std::vector<T> eager(Op op, const std::vector<T>& x, const std::vector<T>& y) {
  kiln::Tensor a = kiln::tensor(x);
  kiln::Tensor r;
  switch (op) {
  case Op::exp: r = kiln::exp(a); break;
  case Op::log: r = kiln::log(a); break;
  case Op::tanh: r = kiln::tanh(a); break;
  case Op::erf: r = kiln::erf(a); break;
  case Op::sigmoid: r = kiln::sigmoid(a); break;
  case Op::sin: r = kiln::sin(a); break;
  case Op::cos: r = kiln::cos(a); break;
  case Op::sqrt: r = kiln::sqrt(a); break;
  case Op::rsqrt: r = kiln::rsqrt(a); break;
  case Op::pow: r = kiln::pow(a, kiln::tensor(y)); break;
  default: FAIL("no eager op");
  }
  return r.template to_vector<T>();
}

/// One input set: values (and exponents for pow), and which of them are special inputs whose
/// results must equal eager's exactly.
template <typename T> struct Inputs {
  std::vector<T> x, y;
  std::vector<char> exact;
  void add(T v, bool is_exact = false) {
    x.push_back(v);
    y.push_back(T(0));
    exact.push_back(is_exact);
  }
  void add2(T a, T b, bool is_exact = false) {
    x.push_back(a);
    y.push_back(b);
    exact.push_back(is_exact);
  }
};

template <typename T> bool is_special(T v) { return std::isnan(v) || std::isinf(v) || v == 0; }

/// Adds ±v and their neighbours, k steps each way.
template <typename T> void add_around(Inputs<T>& in, T v, int k = 2) {
  for (T s : {T(1), T(-1)}) {
    T lo = s * v, hi = s * v;
    in.add(s * v);
    for (int i = 0; i < k; ++i) {
      lo = std::nextafter(lo, -std::numeric_limits<T>::infinity());
      hi = std::nextafter(hi, std::numeric_limits<T>::infinity());
      in.add(lo);
      in.add(hi);
    }
  }
}

/// Special values every unary op sees: NaN, ±inf, ±0 (exact) and the edges of the format.
template <typename T> void add_specials(Inputs<T>& in) {
  using L = std::numeric_limits<T>;
  for (T v : {L::quiet_NaN(), -L::quiet_NaN(), L::infinity(), -L::infinity(), T(0), T(-0.0)})
    in.add(v, true);
  T largest_denormal = std::nextafter(L::min(), T(0));
  for (T v : {L::denorm_min(), largest_denormal, L::min(), L::max(), T(1), T(0.5), T(2), T(3),
              T(10), T(0.1), L::epsilon()})
    add_around(in, v);
}

/// n values log-uniform in magnitude over [lo, hi], both signs unless positive_only.
template <typename T>
void add_log_uniform(Inputs<T>& in, std::mt19937_64& rng, double lo, double hi, int n,
                     bool positive_only = false) {
  std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
  for (int i = 0; i < n; ++i) {
    T v = T(std::exp(u(rng)));
    in.add(positive_only || (i & 1) ? v : -v);
  }
}

template <typename T>
void add_uniform(Inputs<T>& in, std::mt19937_64& rng, double lo, double hi, int n) {
  std::uniform_real_distribution<double> u(lo, hi);
  for (int i = 0; i < n; ++i)
    in.add(T(u(rng)));
}

/// Every k-th bit pattern of the whole format (NaNs, infinities and denormals included), with
/// a varying offset so that the low bits vary too.
template <typename T> void add_bit_sweep(Inputs<T>& in, int n) {
  using U = UBits<T>;
  U step = U(~U(0)) / U(n);
  for (int i = 0; i < n; ++i)
    in.add(from_bits<T>(U(U(i) * step + U(i * 2654435761u % 977))));
}

/// The range of the inline sin/cos range reduction; beyond it a vector calls libm (eager's
/// kernel) for every lane.
template <typename T> double trig_range() { return std::is_same_v<T, float> ? 1e6 : 1e15; }

template <typename T> Inputs<T> unary_inputs(Op op) {
  Inputs<T> in;
  std::mt19937_64 rng(1234 + int(op));
  const bool f32 = std::is_same_v<T, float>;
  add_specials(in);
  add_bit_sweep(in, 1 << 20);
  switch (op) {
  case Op::exp:
  case Op::sigmoid:
    // Overflow and underflow thresholds (f32: e^88.72 overflows, e^-103.97 rounds to 0).
    for (double v :
         f32 ? std::vector<double>{88.72283935546875, 88.7228317, 87.33654, 103.97208, 103.972084,
                                   89, 104, 110, 126 * 0.693147}
             : std::vector<double>{709.782712893384, 709.7827128933841, 708.3964185322641,
                                   745.1332191019411, 745.1332191019412, 744.44007, 710, 746, 760})
      add_around(in, T(v), 4);
    add_log_uniform(in, rng, 1e-9, f32 ? 110 : 760, 1 << 18);
    add_uniform(in, rng, -1, 1, 1 << 16);
    break;
  case Op::log:
    add_log_uniform(in, rng, double(std::numeric_limits<T>::denorm_min()),
                    double(std::numeric_limits<T>::max()), 1 << 17, true);
    add_uniform(in, rng, 0.5, 2, 1 << 18);
    add_uniform(in, rng, 1 - 1e-3, 1 + 1e-3, 1 << 16);
    break;
  case Op::tanh:
  case Op::erf:
    for (double v : {0.625, 1.0, 0.875, 3.9192, 4.0, 5.9, 6.0, 9.01, 19.06, 1e-10, 1e-30})
      add_around(in, T(v), 4);
    add_log_uniform(in, rng, 1e-8, 20, 1 << 18);
    add_uniform(in, rng, -4, 4, 1 << 17);
    break;
  case Op::sin:
  case Op::cos: {
    constexpr double pi = std::numbers::pi;
    for (double v : {pi / 4, pi / 2, pi, 3 * pi / 2, 2 * pi, 1e4 * pi, 1e5, 4e6, 1e30})
      add_around(in, T(v), 4);
    add_log_uniform(in, rng, 1e-8, trig_range<T>(), 1 << 18);
    add_uniform(in, rng, -10, 10, 1 << 17);
    add_uniform(in, rng, -1e4, 1e4, 1 << 16);
    break;
  }
  default: add_log_uniform(in, rng, 1e-30, 1e30, 1 << 16); break;
  }
  return in;
}

template <typename T> Inputs<T> pow_inputs() {
  Inputs<T> in;
  using L = std::numeric_limits<T>;
  std::mt19937_64 rng(99);
  // The special-case table: every base against every exponent.
  const T nan = L::quiet_NaN(), inf = L::infinity(), tiny = L::denorm_min();
  const bool f32 = L::digits == 24;
  // clang-format off
  std::vector<T> xs = {nan, inf, -inf, 0, -0.0, 1, -1, 0.5, -0.5, 2, -2, 3, -3, 10, -10, 0.999,
                       1.001, 1e-10, -7.25, tiny, -tiny, L::min(), L::max(), -L::max(),
                       1 + L::epsilon(), 1 - L::epsilon() / 2};
  // The last three: odd and even integers at the top of the significand.
  std::vector<T> ys = {nan, inf, -inf, 0, -0.0, 1, -1, 2, -2, 3, -3, 0.5, -0.5, 1.5, -1.5, 10,
                       -11, 0.1, 1e10, -1e10, tiny, L::max(), -L::max(), 123456.5,
                       f32 ? 0x1p24 - 1 : 0x1p53 - 1, f32 ? 0x1p24 : 0x1p53,
                       f32 ? 0x1p23 + 1 : 0x1p52 + 1};
  // clang-format on
  for (T x : xs)
    for (T y : ys)
      in.add2(x, y, is_special(x) || is_special(y) || std::fabs(x) == 1);
  // Random pairs: moderate bases and exponents, bases near 1 with large exponents, and
  // pairs near the overflow and underflow edges; negative bases with integer exponents.
  std::uniform_real_distribution<double> lx(std::log(1e-4), std::log(1e4)), uy(-40, 40);
  std::uniform_real_distribution<double> near1(-1e-3, 1e-3), big(-3e4, 3e4), edge(0.9, 1.0);
  const double max_log = std::log(double(L::max()));
  for (int i = 0; i < (1 << 18); ++i) {
    double x = std::exp(lx(rng));
    in.add2(T(x), T(uy(rng)));
    in.add2(T(1 + near1(rng)), T(big(rng)));
    double y = uy(rng);
    if (std::fabs(y) < 0.5) y = 1;
    // x^y near the largest and smallest finite results (and a bit past them).
    double t = max_log * edge(rng) * 1.02;
    in.add2(T(std::exp(t / y)), T(y));
    in.add2(T(std::exp(-1.03 * t / y)), T(y));
    in.add2(T(-x), T(std::nearbyint(uy(rng))));
    // Bases in [sqrt(1/2), sqrt(2)) (log|x| without a multiple of ln2) with |y log x| up to
    // the edges: the double-double log's hardest case.
    double m = std::exp(std::uniform_real_distribution<double>(-0.3465, 0.3465)(rng));
    if (m != 1) in.add2(T(m), T(max_log * edge(rng) * 1.02 / std::log(m) * (i & 1 ? 1 : -1)));
  }
  return in;
}

struct Result {
  uint64_t max_ulp = 0;
  std::string worst; // the input with the largest error
  int64_t failures = 0;
  std::string first_failure;
};

template <typename T>
void compare(Op op, int lanes, const Inputs<T>& in, const std::vector<T>& want,
             const std::vector<T>& got, uint64_t bound, Result& res) {
  for (size_t i = 0; i < want.size(); ++i) {
    T e = want[i], g = got[i], x = in.x[i];
    bool ok;
    uint64_t ulp = 0;
    if (std::isnan(e) || std::isnan(g)) {
      ok = std::isnan(e) && std::isnan(g);
    } else if (in.exact[i] || std::isinf(e) || std::isinf(g) || (e == 0 && g == 0)) {
      ok = e == g && std::signbit(e) == std::signbit(g);
    } else {
      ulp = ulp_distance(e, g);
      ok = ulp <= bound;
      if (ulp > res.max_ulp || res.worst.empty()) {
        res.max_ulp = ulp;
        std::ostringstream os;
        os.precision(std::numeric_limits<T>::max_digits10);
        os << "x " << x;
        if (op == Op::pow) os << " y " << in.y[i];
        os << " eager " << e << " vector " << g;
        res.worst = os.str();
      }
    }
    if (!ok && res.failures++ == 0) {
      std::ostringstream os;
      os.precision(std::numeric_limits<T>::max_digits10);
      os << kiln::op_name(op) << " " << kiln::dtype_name(kiln::dtype_of_v<T>) << " lanes " << lanes
         << ": x " << x;
      if (op == Op::pow) os << " y " << in.y[i];
      os << " eager " << e << " vector " << g << " (" << ulp << " ulp)";
      res.first_failure = os.str();
    }
  }
}

/// Runs op on every configuration of dtype T against eager and returns the largest error.
template <typename T> uint64_t check_op(Op op, const Inputs<T>& in, uint64_t bound) {
  constexpr DType dt = kiln::dtype_of_v<T>;
  std::vector<T> want = eager(op, in.x, in.y);
  std::vector<int> lane_counts =
      dt == DType::f32 ? std::vector<int>{8, 16, 32, 1} : std::vector<int>{4, 8, 1};
  Result res;
  std::vector<std::vector<T>> results;
  for (int lanes : lane_counts) {
    MathProbe probe = compile_math_probe(op, dt, lanes);
    std::vector<T>& got = results.emplace_back(in.x.size());
    probe.fn(in.x.data(), in.y.data(), got.data(), int64_t(got.size()));
    compare(op, lanes, in, want, got, bound, res);
  }
  INFO(res.first_failure);
  CHECK(res.failures == 0);
  // Straight-line code: every vector width computes what the scalar code computes, bit for bit.
  const std::vector<T>& scalar = results.back();
  for (size_t k = 0; k + 1 < results.size(); ++k) {
    size_t differ = 0;
    for (size_t i = 0; i < scalar.size(); ++i)
      differ += !(bits_of(results[k][i]) == bits_of(scalar[i]) ||
                  (std::isnan(results[k][i]) && std::isnan(scalar[i])));
    INFO(kiln::op_name(op) << " " << kiln::dtype_name(dt) << " lanes " << lane_counts[k]);
    CHECK(differ == 0);
  }
  std::cout << "ulp " << kiln::op_name(op) << " " << kiln::dtype_name(dt) << " " << res.max_ulp
            << " (" << res.worst << ")\n";
  return res.max_ulp;
}

void check_unary(Op op, uint64_t bound_f32, uint64_t bound_f64) {
  check_op<float>(op, unary_inputs<float>(op), bound_f32);
  check_op<double>(op, unary_inputs<double>(op), bound_f64);
}

} // namespace

TEST_CASE("vector exp matches eager", "[vector_math]") { check_unary(Op::exp, 4, 4); }
TEST_CASE("vector log matches eager", "[vector_math]") { check_unary(Op::log, 4, 4); }
TEST_CASE("vector tanh matches eager", "[vector_math]") { check_unary(Op::tanh, 4, 4); }
TEST_CASE("vector erf matches eager", "[vector_math]") { check_unary(Op::erf, 4, 4); }
TEST_CASE("vector sigmoid matches eager", "[vector_math]") { check_unary(Op::sigmoid, 4, 4); }
TEST_CASE("vector sin matches eager", "[vector_math]") { check_unary(Op::sin, 4, 4); }
TEST_CASE("vector cos matches eager", "[vector_math]") { check_unary(Op::cos, 4, 4); }
TEST_CASE("vector sqrt and rsqrt equal eager", "[vector_math]") {
  check_unary(Op::sqrt, 0, 0);
  check_unary(Op::rsqrt, 0, 0);
}
TEST_CASE("vector pow matches eager", "[vector_math]") {
  check_op<float>(Op::pow, pow_inputs<float>(), 8);
  check_op<double>(Op::pow, pow_inputs<double>(), 4);
}

namespace {

/// sin/cos per half decade of |x| beyond the inline range reduction's: libm's results, bit
/// for bit; near lanes that share a vector with far ones stay within the ULP bound.
template <typename T> void trig_decades(Op op) {
  constexpr DType dt = kiln::dtype_of_v<T>;
  MathProbe probe = compile_math_probe(op, dt, dt == DType::f32 ? 8 : 4);
  std::mt19937_64 rng(7);
  double max_decade = dt == DType::f32 ? 38 : 300;
  for (double d = std::log10(trig_range<T>()); d < max_decade; d += 0.5) {
    Inputs<T> in;
    add_log_uniform(in, rng, std::pow(10.0, d), std::pow(10.0, d + 0.5), 1 << 12);
    for (size_t i = 0; i < in.x.size(); i += 3)
      in.x[i] = T(in.x[i] * 1e-20); // near lanes beside far ones
    std::vector<T> want = eager(op, in.x, in.y), got(in.x.size());
    probe.fn(in.x.data(), in.y.data(), got.data(), int64_t(got.size()));
    int64_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i)
      differ += ulp_distance(want[i], got[i]) > (i % 3 == 0 ? 1u : 0u) ? 1 : 0;
    INFO(kiln::op_name(op) << " " << kiln::dtype_name(dt) << " |x| in [" << std::pow(10.0, d)
                           << ", " << std::pow(10.0, d + 0.5) << ")");
    CHECK(differ == 0);
    if (d > std::log10(trig_range<T>()) + 1) d += dt == DType::f32 ? 10 : 60; // then sparsely
  }
}

} // namespace

TEST_CASE("vector sin and cos beyond the inline range are libm's", "[vector_math]") {
  for (Op op : {Op::sin, Op::cos}) {
    trig_decades<float>(op);
    trig_decades<double>(op);
  }
}
