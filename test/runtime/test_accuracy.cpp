// The f64 reference rule (runtime/accuracy.h): what passes and what fails, element by element.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include <kiln/kiln.h>

using namespace kiln;

namespace {

Tensor f32(std::vector<float> v) { return tensor(v); }
Tensor f64(std::vector<double> v) { return tensor(v); }

bool mentions(const std::optional<std::string>& m, const std::string& part) {
  return m && m->find(part) != std::string::npos;
}

} // namespace

TEST_CASE("accuracy: compiled may be twice as far from the f64 reference as eager is") {
  // eager is 0.5 off the reference; compiled may be up to 1.0 off (plus the floor).
  const Tensor eager = f32({100.5f}), ref = f64({100.0});
  CHECK(!check_accuracy(f32({101.0f}), eager, ref));
  CHECK(!check_accuracy(f32({99.0f}), eager, ref));
  std::optional<std::string> far = check_accuracy(f32({101.5f}), eager, ref);
  REQUIRE(far);
  CHECK(mentions(far, "got 101.5, eager 100.5, f64 reference 100"));
  CHECK(mentions(far, "1 of 1 elements differ"));
  // f16 and bf16 get 3x, f32 2x: eager 20 off, compiled 60 off passes in f16 only.
  const Tensor h_eager = f32({1020.0f}).to(DType::f16), h_ref = f64({1000.0});
  CHECK(!check_accuracy(f32({1060.0f}).to(DType::f16), h_eager, h_ref));
  CHECK(check_accuracy(f32({1070.0f}).to(DType::f16), h_eager, h_ref));
  CHECK(check_accuracy(f32({1060.0f}), f32({1020.0f}), h_ref));
}

TEST_CASE("accuracy: the floor scales with the output's magnitude and the given magnitude") {
  // Eager exact: the floor alone, 8 eps(f32) max|ref| = 8 * 2^-23 * 1000 ≈ 9.5e-4.
  const Tensor eager = f32({1000.0f, 1.0f}), ref = f64({1000.0, 1.0});
  CHECK(!check_accuracy(f32({1000.0f, 1.0009f}), eager, ref));
  CHECK(check_accuracy(f32({1000.0f, 1.002f}), eager, ref));
  // A cancelling sum: result 4, terms of 1e10. With Σ|terms| as the magnitude an error of
  // 1000 is a few roundings of the terms; without it, far too much.
  const Tensor s_eager = f32({4.0f}), s_ref = f64({4.0});
  CHECK(check_accuracy(f32({1004.0f}), s_eager, s_ref));
  AccuracyOptions o;
  o.magnitude = f64({2e10});
  CHECK(!check_accuracy(f32({1004.0f}), s_eager, s_ref, o));
  CHECK(check_accuracy(f32({1e6f}), s_eager, s_ref, o)); // a wrong sum still fails
  // The magnitude broadcasts (one per row here) and NaN magnitudes are ignored.
  AccuracyOptions rows;
  rows.magnitude = f64({1e6, std::nan("")}).view({2, 1});
  const Tensor r_eager = f32({1, 2, 3, 4}).view({2, 2});
  const Tensor r_ref = f64({1, 2, 3, 4}).view({2, 2});
  CHECK(!check_accuracy(f32({1.5f, 2, 3, 4}).view({2, 2}), r_eager, r_ref, rows));
  std::optional<std::string> row1 =
      check_accuracy(f32({1, 2, 3.5f, 4}).view({2, 2}), r_eager, r_ref, rows);
  CHECK(mentions(row1, "at index [1, 0]"));
}

TEST_CASE("accuracy: NaN and infinity positions match eager exactly") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor eager = f32({nan, inf, -inf, 1});
  const Tensor ref = f64({std::nan(""), 1e300, -1e300, 1});
  CHECK(!check_accuracy(f32({nan, inf, -inf, 1}), eager, ref));
  CHECK(mentions(check_accuracy(f32({1, inf, -inf, 1}), eager, ref), "NaN and Inf"));
  CHECK(check_accuracy(f32({nan, -inf, -inf, 1}), eager, ref));
  CHECK(check_accuracy(f32({nan, 3.4e38f, -inf, 1}), eager, ref));
  CHECK(check_accuracy(f32({nan, inf, -inf, nan}), eager, ref));
  // The floor's scale comes from where eager is finite: 1e300 beside eager's inf does not
  // make every other element pass.
  CHECK(check_accuracy(f32({nan, inf, -inf, 1.5f}), eager, ref));
  // Where the f64 run is not finite but eager is, eager is the reference.
  CHECK(!check_accuracy(f32({2.0f}), f32({2.0f}), f64({std::nan("")})));
  CHECK(check_accuracy(f32({3.0f}), f32({2.0f}), f64({std::nan("")})));
}

TEST_CASE("accuracy: integers and bools are exact, dtype and shape must match") {
  CHECK(!check_accuracy(tensor<int64_t>({1, 2}), tensor<int64_t>({1, 2}), Tensor()));
  CHECK(check_accuracy(tensor<int64_t>({(int64_t{1} << 60) + 1}),
                       tensor<int64_t>({int64_t{1} << 60}), Tensor()));
  CHECK(check_accuracy(tensor<bool>({true}), tensor<bool>({false}), Tensor()));
  CHECK(mentions(check_accuracy(f32({1}), f32({1}).to(DType::f64), Tensor()),
                 "dtype: got f32, expected f64"));
  CHECK(mentions(check_accuracy(f32({1, 2}), f32({1, 2}).view({2, 1}), Tensor()),
                 "shape: got [2], expected [2, 1]"));
  // Empty and 0-d; strided tensors compare by logical index.
  CHECK(!check_accuracy(zeros({0, 3}), zeros({0, 3}), Tensor()));
  Tensor m = arange(6, DType::f32).view({2, 3});
  CHECK(!check_accuracy(m.t(), m.t().contiguous(), m.t().to(DType::f64)));
  CHECK(check_accuracy(m.t(), m.view({3, 2}), m.view({3, 2}).to(DType::f64)));
}

TEST_CASE("accuracy: the sign of zero counts only when asked") {
  AccuracyOptions signed_zero;
  signed_zero.zero_sign = true;
  CHECK(!check_accuracy(f32({-0.0f}), f32({0.0f}), f64({0.0})));
  CHECK(mentions(check_accuracy(f32({-0.0f}), f32({0.0f}), f64({0.0}), signed_zero),
                 "the sign of zero"));
}

TEST_CASE("accuracy: check_bitwise compares bits, and f64 copies never alias the inputs") {
  CHECK(!check_bitwise(f32({1, 2}), f32({1, 2})));
  CHECK(mentions(check_bitwise(f32({1, 2}), f32({1, 2.0000002f})), "bit for bit"));
  CHECK(check_bitwise(f32({0.0f}), f32({-0.0f})));
  Tensor a = f64({1, -2}), i = tensor<int32_t>({3});
  std::vector<Tensor> c = to_f64(std::vector<Tensor>{a, i, Tensor()});
  REQUIRE(c.size() == 3);
  CHECK(c[0].dtype() == DType::f64);
  CHECK(c[1].dtype() == DType::i32);
  CHECK(!c[2].defined());
  c[0].fill_(7);
  c[1].fill_(7);
  CHECK(a.to_vector<double>() == std::vector<double>{1, -2});
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{3});
  CHECK(to_f64_abs(std::vector<Tensor>{a})[0].to_vector<double>() == std::vector<double>{1, 2});
}
