// Factories: empty/zeros/ones/full (and fill_ into views), arange, tensor(), scalar_tensor, *_like.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include <kiln/kiln.h>

using namespace kiln;

TEST_CASE("zeros, ones, empty: shape, dtype and values", "[factory]") {
  Tensor z = zeros({2, 3});
  CHECK(z.sizes() == Shape{2, 3});
  CHECK(z.dtype() == DType::f32);
  CHECK(z.is_contiguous());
  CHECK(z.to_vector<float>() == std::vector<float>(6, 0.0f));
  Tensor o = ones({4}, DType::i32);
  CHECK(o.dtype() == DType::i32);
  CHECK(o.to_vector<int32_t>() == std::vector<int32_t>{1, 1, 1, 1});
  CHECK(ones({2}, DType::bool_).to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(ones({2}, DType::bf16).to_vector<float>() == std::vector<float>{1, 1});
  Tensor e = empty({3, 0, 2}, DType::f64);
  CHECK(e.sizes() == Shape{3, 0, 2});
  CHECK(e.numel() == 0);
  CHECK(e.dtype() == DType::f64);
  Tensor s = zeros({});
  CHECK(s.dim() == 0);
  CHECK(s.item<float>() == 0.0f);
  CHECK(zeros({2}, TensorOptions().requires_grad()).requires_grad());
}

TEST_CASE("factories reject bad sizes and devices", "[factory]") {
  CHECK_THROWS_WITH(zeros({2, -1}), Catch::Contains("negative"));
  CHECK_THROWS_WITH(empty({2}, Device::cuda(0)),
                    Catch::Contains("empty") && Catch::Contains("cuda"));
  CHECK_THROWS_WITH(rand({2}, Device::cuda(0)), Catch::Contains("rand"));
}

TEST_CASE("full takes its dtype from the scalar unless given one", "[factory]") {
  Tensor f = full({2, 2}, 1.5f);
  CHECK(f.dtype() == DType::f32);
  CHECK(f.to_vector<float>() == std::vector<float>(4, 1.5f));
  CHECK(full({2}, 1.5).dtype() == DType::f32); // a double scalar still gives the default float
  Tensor i = full({3}, int64_t{7});
  CHECK(i.dtype() == DType::i64);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{7, 7, 7});
  CHECK(full({1}, 7).dtype() == DType::i64);
  Tensor b = full({2}, true);
  CHECK(b.dtype() == DType::bool_);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, true});
  // With options the value is converted: floats truncate into integers, numbers into bool are != 0.
  CHECK(full({2}, -2.7, DType::i32).to_vector<int32_t>() == std::vector<int32_t>{-2, -2});
  CHECK(full({1}, 0.5, DType::bool_).item<bool>());
  CHECK(full({1}, 0.1, DType::f16).item<Half>().bits == Half(0.1f).bits);
  CHECK(std::isnan(full({1}, std::nan(""), DType::f32).item<float>()));
  CHECK(std::isinf(full({1}, -INFINITY, DType::bf16).item<float>()));
}

TEST_CASE("full refuses values that overflow the dtype", "[factory]") {
  CHECK_THROWS_WITH(full({2}, 300, DType::u8), Catch::Contains("full") && Catch::Contains("u8"));
  CHECK_THROWS_WITH(full({2}, -1, DType::u8), Catch::Contains("overflow"));
  CHECK_THROWS_WITH(full({2}, 1e6, DType::f16), Catch::Contains("f16"));
  CHECK_THROWS_WITH(full({2}, std::nan(""), DType::i64), Catch::Contains("i64"));
  CHECK_THROWS_WITH(full({2}, 1e300, DType::f32), Catch::Contains("f32"));
  CHECK(full({1}, 255, DType::u8).item<uint8_t>() == 255);
  CHECK(full({1}, -128, DType::i8).item<int8_t>() == -128);
}

TEST_CASE("fill_ and zero_ write through non-contiguous views", "[factory]") {
  Tensor base = arange(12, DType::f32).reshape({3, 4});
  uint64_t v0 = base.version();
  Tensor t = base.t();           // [4, 3], strides (1, 4)
  t.slice(0, 1, 4, 2).fill_(-1); // columns 1 and 3 of base
  CHECK(base.to_vector<float>() == std::vector<float>{0, -1, 2, -1, 4, -1, 6, -1, 8, -1, 10, -1});
  CHECK(base.version() > v0);
  base.slice(0, 0, 3, 2).zero_(); // rows 0 and 2
  CHECK(base.to_vector<float>() == std::vector<float>{0, 0, 0, 0, 4, -1, 6, -1, 0, 0, 0, 0});
  Tensor i = zeros({3}, DType::i32);
  i.fill_(2.9); // as PyTorch: the value truncates
  CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{2, 2, 2});
  Tensor e = zeros({0, 3});
  e.fill_(1); // nothing to write
  CHECK(e.numel() == 0);
}

TEST_CASE("arange: dtype and length follow torch.arange", "[factory]") {
  Tensor a = arange(5);
  CHECK(a.dtype() == DType::i64);
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  Tensor b = arange(0, 1, 0.25);
  CHECK(b.dtype() == DType::f32);
  CHECK(b.to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f});
  CHECK(arange(10, 0, -3).to_vector<int64_t>() == std::vector<int64_t>{10, 7, 4, 1});
  CHECK(arange(0, 10, 3).to_vector<int64_t>() == std::vector<int64_t>{0, 3, 6, 9});
  CHECK(arange(1, 2.5, 0.5).to_vector<float>() == std::vector<float>{1, 1.5f, 2});
  CHECK(arange(-3, 3, 2).to_vector<int64_t>() == std::vector<int64_t>{-3, -1, 1});
  CHECK(arange(5, 5).numel() == 0);
  CHECK(arange(5.0).dtype() == DType::f32);
  Tensor d = arange(3, DType::f64);
  CHECK(d.dtype() == DType::f64);
  CHECK(d.to_vector<double>() == std::vector<double>{0, 1, 2});
  CHECK(arange(0, 4, 1, DType::i8).to_vector<int8_t>() == std::vector<int8_t>{0, 1, 2, 3});
  // Elements are start + i * step computed in double, then rounded: 0.1 * 3 = 0.30000000000000004.
  Tensor t = arange(0, 1, 0.1);
  REQUIRE(t.numel() == 10);
  CHECK(t.to_vector<float>()[3] == static_cast<float>(0.1 * 3));
  Tensor h = arange(0, 1, 0.1, DType::f64);
  CHECK(h.to_vector<double>()[3] == 0.1 * 3);
  // Integer dtypes truncate the bounds, as PyTorch.
  CHECK(arange(0, 2.5, 1, DType::i64).numel() == 2);
  CHECK(arange(0.0, 2.5, 1.0, DType::i32).numel() == 3);
  CHECK(arange(int64_t{1} << 40, (int64_t{1} << 40) + 2).to_vector<int64_t>() ==
        std::vector<int64_t>{int64_t{1} << 40, (int64_t{1} << 40) + 1});
}

TEST_CASE("arange rejects bad ranges", "[factory]") {
  CHECK_THROWS_WITH(arange(0, 5, 0), Catch::Contains("arange: step must be nonzero"));
  CHECK_THROWS_WITH(arange(0, 5, -1), Catch::Contains("inconsistent with step sign"));
  CHECK_THROWS_WITH(arange(-5), Catch::Contains("inconsistent with step sign"));
  CHECK_THROWS_WITH(arange(0, INFINITY), Catch::Contains("unsupported range"));
  CHECK_THROWS_WITH(arange(0, 5, 0.5, DType::i64), Catch::Contains("step must be nonzero"));
  CHECK_THROWS_WITH(arange(3, DType::bool_), Catch::Contains("bool"));
  CHECK_THROWS_WITH(
      arange(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()),
      Catch::Contains("overflow"));
}

TEST_CASE("tensor() builds every element type and checks the shape", "[factory]") {
  CHECK(tensor<float>({1.5f, 2.5f}).to_vector<float>() == std::vector<float>{1.5f, 2.5f});
  CHECK(tensor<double>({1.25}, {1, 1}).sizes() == Shape{1, 1});
  CHECK(tensor<Half>({Half(1.5f)}).dtype() == DType::f16);
  CHECK(tensor<BFloat16>({BFloat16(2.0f)}).to_vector<float>() == std::vector<float>{2.0f});
  CHECK(tensor<int8_t>({-1, 2}).to_vector<int8_t>() == std::vector<int8_t>{-1, 2});
  CHECK(tensor<uint8_t>({255}).to_vector<int32_t>() == std::vector<int32_t>{255});
  CHECK(tensor<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}).sizes() == Shape{2, 3});
  CHECK(tensor<int64_t>({7}).dtype() == DType::i64);
  Tensor b = tensor<bool>({true, false, true});
  CHECK(b.dtype() == DType::bool_);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(tensor<float>({}).sizes() == Shape{0});
  CHECK(tensor({1.0f, 2.0f}).dtype() == DType::f32);
  CHECK_THROWS_WITH(tensor<float>({1, 2, 3}, {2, 2}),
                    Catch::Contains("tensor: 3 values") && Catch::Contains("[2, 2]"));
}

TEST_CASE("scalar_tensor and the *_like factories", "[factory]") {
  Tensor s = scalar_tensor(2.5);
  CHECK(s.dim() == 0);
  CHECK(s.dtype() == DType::f32);
  CHECK(s.item<float>() == 2.5f);
  CHECK(scalar_tensor(3).dtype() == DType::i64);
  CHECK(scalar_tensor(true).dtype() == DType::bool_);
  CHECK(scalar_tensor(3, DType::f16).item<float>() == 3.0f);
  CHECK(scalar_tensor(3, DType::f16).dtype() == DType::f16);

  Tensor src = arange(6, DType::i32).reshape({2, 3}).t(); // non-contiguous [3, 2]
  for (const Tensor& t : {empty_like(src), zeros_like(src), ones_like(src), full_like(src, 4)}) {
    CHECK(t.sizes() == Shape{3, 2});
    CHECK(t.dtype() == DType::i32);
    CHECK(t.is_contiguous());
  }
  CHECK(zeros_like(src).to_vector<int32_t>() == std::vector<int32_t>(6, 0));
  CHECK(ones_like(src).to_vector<int32_t>() == std::vector<int32_t>(6, 1));
  CHECK(full_like(src, 4).to_vector<int32_t>() == std::vector<int32_t>(6, 4));
  Tensor h = zeros({2, 2}, DType::f16);
  CHECK(rand_like(h).dtype() == DType::f16);
  CHECK(randn_like(h).sizes() == Shape{2, 2});
  CHECK_THROWS_WITH(rand_like(src), Catch::Contains("rand: expected a floating-point dtype"));
}
