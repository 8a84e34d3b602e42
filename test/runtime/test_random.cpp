// Random ops: Philox 4x32-10, and rand/randn/randint following the stream layout of
// runtime/random.h bit for bit (the contract compiled kernels rely on).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <numbers>

#include <kiln/kiln.h>

#include "runtime/kernels/normal_math.h"
#include "runtime/ops/dispatch.h"
#include "runtime/random.h"

using namespace kiln;

namespace {

/// Word `w` of block `b` of the reservation starting at offset `o` under `seed`.
uint32_t word(uint64_t seed, uint64_t o, uint64_t b, int w) {
  return philox4x32_10(o + b, 0, seed)[w];
}

float uniform24(uint32_t w) { return static_cast<float>(w >> 8) * 0x1p-24f; }

} // namespace

TEST_CASE("philox4x32_10 matches the Random123 known-answer vectors", "[random]") {
  auto kat = [](uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
    return philox4x32_10(c0 | (uint64_t{c1} << 32), c2 | (uint64_t{c3} << 32),
                         k0 | (uint64_t{k1} << 32));
  };
  CHECK(kat(0, 0, 0, 0, 0, 0) ==
        std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  CHECK(kat(~0u, ~0u, ~0u, ~0u, ~0u, ~0u) ==
        std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  CHECK(kat(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u) ==
        std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("manual_seed reproduces rand, consecutive calls differ, values lie in 0 <= u < 1",
          "[random]") {
  manual_seed(1234);
  std::vector<float> a = rand({1000}).to_vector<float>();
  std::vector<float> b = rand({1000}).to_vector<float>();
  manual_seed(1234);
  CHECK(rand({1000}).to_vector<float>() == a);
  CHECK(a != b);
  manual_seed(1235);
  CHECK(rand({1000}).to_vector<float>() != a);
  for (float v : a) {
    CHECK(v >= 0.0f);
    CHECK(v < 1.0f);
  }
  CHECK(rand({0}).numel() == 0);
  CHECK(rand({}).dim() == 0);
}

TEST_CASE("rand follows the documented Philox layout", "[random]") {
  const uint64_t seed = 42;
  manual_seed(seed);
  std::vector<float> r = rand({2, 5}).to_vector<float>(); // 10 elements: blocks 0..2
  for (int i = 0; i < 10; ++i)
    CHECK(r[i] == uniform24(word(seed, 0, i / 4, i % 4)));
  CHECK(default_generator().offset() == 3);
  // The next op's reservation starts after the 3 blocks of the first.
  std::vector<float> n = rand({3}).to_vector<float>();
  for (int i = 0; i < 3; ++i)
    CHECK(n[i] == uniform24(word(seed, 3, 0, i)));
  // f64: two words per element, high word first, 53 bits.
  std::vector<double> d = rand({3}, DType::f64).to_vector<double>();
  for (int i = 0; i < 3; ++i) {
    uint64_t hi = word(seed, 4, i / 2, 2 * (i % 2)), lo = word(seed, 4, i / 2, 2 * (i % 2) + 1);
    CHECK(d[i] == static_cast<double>(((hi << 32) | lo) >> 11) * 0x1p-53);
  }
  CHECK(default_generator().offset() == 6);
  // f16/bf16: the f32 uniform rounded to the dtype.
  std::vector<Half> h = rand({4}, DType::f16).to_vector<Half>();
  for (int i = 0; i < 4; ++i) {
    Half want(uniform24(word(seed, 6, 0, i)));
    if (static_cast<float>(want) == 1.0f) want = Half::from_bits(0x3bff);
    CHECK(h[i].bits == want.bits);
  }
  std::vector<BFloat16> bf = rand({50000}, DType::bf16).to_vector<BFloat16>();
  for (BFloat16 v : bf)
    REQUIRE(static_cast<float>(v) < 1.0f); // values that round to 1 are pulled below
}

TEST_CASE("random ops write row-major element i into any output layout", "[random]") {
  const uint64_t seed = 7;
  manual_seed(seed);
  Tensor base = zeros({3, 4});
  Tensor view = base.t(); // [4, 3], non-contiguous
  dispatch_inplace(Op::rand, view, {}, Attrs{view.sizes(), DType::f32});
  std::vector<float> v = view.to_vector<float>(); // row-major order of the view
  for (int i = 0; i < 12; ++i)
    CHECK(v[i] == uniform24(word(seed, 0, i / 4, i % 4)));
}

TEST_CASE("rand is independent of the thread count", "[random]") {
  int threads = get_num_threads();
  manual_seed(99);
  std::vector<float> many = rand({100000}).to_vector<float>();
  set_num_threads(1);
  manual_seed(99);
  std::vector<float> one = rand({100000}).to_vector<float>();
  set_num_threads(threads);
  CHECK(many == one);
  CHECK(many[99999] == uniform24(word(99, 0, 99999 / 4, 99999 % 4)));
}

TEST_CASE("randn's log and sincos: within a few units in the last place of libm's", "[random]") {
  // log over (0, 1] (Box-Muller's u1: 24-bit steps, the smallest 2^-24) and beyond; sin and
  // cos over [0, 2 pi), every quadrant.
  for (int k = 0; k <= 4000; ++k) {
    const double x = k == 0 ? 0x1p-24 : std::ldexp(1.0 + k / 4000.0, -(k % 25)) / 2;
    INFO("x = " << x);
    CHECK(std::abs(kernels::normal_log(x) - std::log(x)) <=
          4 * std::numeric_limits<double>::epsilon() * std::max(1.0, std::abs(std::log(x))));
    const double t = 2 * std::numbers::pi * k / 4001.0;
    double s = 0, c = 0;
    kernels::normal_sincos(t, &s, &c);
    CHECK(std::abs(s - std::sin(t)) <= 4 * std::numeric_limits<double>::epsilon());
    CHECK(std::abs(c - std::cos(t)) <= 4 * std::numeric_limits<double>::epsilon());
  }
  CHECK(kernels::normal_log(1.0) == 0.0);
}

TEST_CASE("randn: Box-Muller over the documented words, mean 0 and std 1", "[random]") {
  const uint64_t seed = 5;
  manual_seed(seed);
  std::vector<float> z = randn({6}).to_vector<float>();
  // Normal i of the reservation at offset o, by kiln's math (bit for bit) and by libm (to
  // within a few units in the last place of a double).
  auto normal = [seed](uint64_t o, int i, bool libm) {
    const int k = (i % 4) & 2;
    const double u1 = static_cast<double>((word(seed, o, i / 4, k) >> 8) + 1) * 0x1p-24;
    const double u2 = static_cast<double>(word(seed, o, i / 4, k + 1) >> 8) * 0x1p-24;
    const double theta = 2 * std::numbers::pi * u2;
    if (libm) {
      const double r = std::sqrt(-2.0 * std::log(u1));
      return i % 2 == 0 ? r * std::cos(theta) : r * std::sin(theta);
    }
    double s = 0, c = 0;
    kernels::normal_sincos(theta, &s, &c);
    const double r = std::sqrt(-2.0 * kernels::normal_log(u1));
    return i % 2 == 0 ? r * c : r * s;
  };
  for (int i = 0; i < 6; ++i) {
    CHECK(z[i] == static_cast<float>(normal(0, i, false)));
    CHECK(std::abs(z[i] - normal(0, i, true)) <=
          1e-6 * std::max(1.0, std::abs(normal(0, i, true))));
  }
  CHECK(default_generator().offset() == 2);
  std::vector<double> zd = randn({2}, DType::f64).to_vector<double>();
  for (int i = 0; i < 2; ++i) {
    CHECK(zd[i] == normal(2, i, false));
    CHECK(std::abs(zd[i] - normal(2, i, true)) <= 1e-14 * std::max(1.0, std::abs(zd[i])));
  }
  manual_seed(2024);
  Tensor big = randn({100000});
  double sum = 0, sq = 0;
  for (float v : big.to_vector<float>()) {
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  double mean = sum / 1e5, var = sq / 1e5 - mean * mean;
  CHECK(std::abs(mean) < 0.02);
  CHECK(std::abs(std::sqrt(var) - 1.0) < 0.02);
  CHECK(randn({3}, DType::bf16).dtype() == DType::bf16);
  CHECK_THROWS_WITH(randn({3}, DType::i32),
                    Catch::Contains("randn: expected a floating-point dtype, got i32"));
  CHECK_THROWS_WITH(rand({3}, DType::bool_),
                    Catch::Contains("rand: expected a floating-point dtype, got bool"));
}

TEST_CASE("randint: range, layout, wide ranges, dtypes and errors", "[random]") {
  const uint64_t seed = 11;
  manual_seed(seed);
  Tensor r = randint(-3, 4, {9});
  CHECK(r.dtype() == DType::i64);
  std::vector<int64_t> v = r.to_vector<int64_t>();
  for (int i = 0; i < 9; ++i)
    CHECK(v[i] == -3 + static_cast<int64_t>(word(seed, 0, i / 4, i % 4) % 7));
  CHECK(default_generator().offset() == 3);
  // A range of 2^40 takes two words per element.
  const int64_t lo = -(int64_t{1} << 39), hi = int64_t{1} << 39;
  std::vector<int64_t> w = randint(lo, hi, {3}).to_vector<int64_t>();
  for (int i = 0; i < 3; ++i) {
    uint64_t bits =
        (uint64_t{word(seed, 3, i / 2, 2 * (i % 2))} << 32) | word(seed, 3, i / 2, 2 * (i % 2) + 1);
    CHECK(w[i] == lo + static_cast<int64_t>(bits % (uint64_t{1} << 40)));
  }
  CHECK(default_generator().offset() == 5);
  std::vector<int32_t> small = randint(0, 10, {1000}, DType::i32).to_vector<int32_t>();
  int seen[10] = {};
  for (int32_t x : small) {
    REQUIRE(x >= 0);
    REQUIRE(x < 10);
    ++seen[x];
  }
  for (int c : seen)
    CHECK(c > 50);
  Tensor f = randint(0, 5, {4}, DType::f32);
  CHECK(f.dtype() == DType::f32);
  for (float x : f.to_vector<float>())
    CHECK(x == std::floor(x));
  CHECK(randint(0, 2, {4}, DType::bool_).dtype() == DType::bool_);
  CHECK(randint(0, 256, {4}, DType::u8).dtype() == DType::u8);
  CHECK_THROWS_WITH(randint(3, 3, {2}), Catch::Contains("randint: expected high > low"));
  CHECK_THROWS_WITH(randint(0, 257, {2}, DType::u8), Catch::Contains("doesn't fit in dtype u8"));
  CHECK_THROWS_WITH(randint(-1, 1, {2}, DType::bool_), Catch::Contains("bool"));
}
