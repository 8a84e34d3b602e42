// Tensor printing: exact PyTorch-style strings for each formatting rule.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <sstream>

#include <kiln/kiln.h>

#include "runtime/ops/dispatch.h"

using namespace kiln;

namespace {

std::string str(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

Tensor f32(std::vector<float> v) { return tensor(v); }

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

} // namespace

TEST_CASE("print: integer-valued floats use int mode", "[print]") {
  CHECK(str(f32({1, 2, 3})) == "tensor([1., 2., 3.])");
  CHECK(str(f32({-0.0f, 1})) == "tensor([-0., 1.])");
  // Zeros take no part in the width; the widest nonzero value sets it.
  CHECK(str(f32({0, 100})) == "tensor([  0., 100.])");
  CHECK(str(f32({0, 0})) == "tensor([0., 0.])");
}

TEST_CASE("print: fixed notation with 4 decimals, right aligned", "[print]") {
  CHECK(str(scalar_tensor(3.5)) == "tensor(3.5000)");
  CHECK(str(f32({1.5f, -2.25f})) == "tensor([ 1.5000, -2.2500])");
  CHECK(str(f32({100.5f, -1.25f})) == "tensor([100.5000,  -1.2500])");
  CHECK(str(f32({0.12345f})) == "tensor([0.1235])"); // rounded, not truncated
}

TEST_CASE("print: scientific notation by PyTorch's thresholds", "[print]") {
  CHECK(str(f32({1e-5f, 1})) == "tensor([1.0000e-05, 1.0000e+00])"); // min < 1e-4
  CHECK(str(f32({-1e-5f, 100})) == "tensor([-1.0000e-05,  1.0000e+02])");
  CHECK(str(f32({0.5f, 600.5f})) == "tensor([5.0000e-01, 6.0050e+02])"); // ratio > 1000
  CHECK(str(f32({0.5f, 400.5f})) == "tensor([  0.5000, 400.5000])");     // ratio < 1000
  CHECK(str(f32({1, 1e9f})) == "tensor([1.0000e+00, 1.0000e+09])");      // int mode, max > 1e8
  CHECK(str(f32({1, 2000})) == "tensor([1.0000e+00, 2.0000e+03])");      // int mode, ratio
  CHECK(str(f32({1, 1000})) == "tensor([   1., 1000.])");
  CHECK(str(f32({1e-4f, 1e-1f})) == "tensor([1.0000e-04, 1.0000e-01])"); // 1e-4f < 1e-4
}

TEST_CASE("print: nan and inf", "[print]") {
  CHECK(str(f32({kNaN, 1, kInf, -kInf})) == "tensor([nan, 1., inf, -inf])");
  CHECK(str(f32({100, kNaN})) == "tensor([100.,  nan])");
  CHECK(str(f32({0.1f, -kNaN})) == "tensor([0.1000,    nan])");
  CHECK(str(f32({kNaN, kNaN})) == "tensor([nan, nan])");
  CHECK(str(scalar_tensor(std::nan(""))) == "tensor(nan)");
}

TEST_CASE("print: integers, bools and dtype suffixes", "[print]") {
  CHECK(str(tensor(std::vector<int64_t>{1, 2, 3, 4}, {2, 2})) ==
        "tensor([[1, 2],\n        [3, 4]])");
  CHECK(str(tensor(std::vector<int64_t>{-10, 5})) == "tensor([-10,   5])");
  CHECK(str(tensor(std::vector<int32_t>{1, 2})) == "tensor([1, 2], dtype=i32)");
  CHECK(str(tensor(std::vector<uint8_t>{255, 0})) == "tensor([255,   0], dtype=u8)");
  CHECK(str(tensor(std::vector<int8_t>{-128})) == "tensor([-128], dtype=i8)");
  CHECK(str(tensor(std::vector<bool>{true, false})) == "tensor([ True, False])");
  CHECK(str(tensor(std::vector<bool>{true, false, false, true}, {2, 2})) ==
        "tensor([[ True, False],\n        [False,  True]])");
  CHECK(str(scalar_tensor(true)) == "tensor(True)");
  CHECK(str(scalar_tensor(int64_t{7})) == "tensor(7)");
  CHECK(str(tensor(std::vector<double>{1.5})) == "tensor([1.5000], dtype=f64)");
  CHECK(str(tensor(std::vector<float>{1.5f, 2.0f}).to(DType::f16)) ==
        "tensor([1.5000, 2.0000], dtype=f16)");
  CHECK(str(tensor(std::vector<float>{1.0f, -3.0f}).to(DType::bf16)) ==
        "tensor([ 1., -3.], dtype=bf16)");
}

TEST_CASE("print: nested dims are separated by blank lines", "[print]") {
  Tensor t = arange(0, 8).view({2, 2, 2});
  CHECK(str(t) == "tensor([[[0, 1],\n"
                  "         [2, 3]],\n"
                  "\n"
                  "        [[4, 5],\n"
                  "         [6, 7]]])");
}

TEST_CASE("print: non-contiguous views print their logical order", "[print]") {
  Tensor t = tensor(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(str(t.t()) == "tensor([[1, 4],\n        [2, 5],\n        [3, 6]])");
  CHECK(str(t.slice(1, 0, 3, 2)) == "tensor([[1, 3],\n        [4, 6]])");
  CHECK(str(tensor(std::vector<float>{2.5f}).expand({3})) == "tensor([2.5000, 2.5000, 2.5000])");
}

TEST_CASE("print: long rows wrap at 80 columns", "[print]") {
  CHECK(str(arange(0, 30).to(DType::f32)) ==
        "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
        "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
        "        28., 29.])");
}

TEST_CASE("print: a suffix that would pass 80 columns goes on its own line", "[print]") {
  Tensor t = full({9}, 1.5, DType::f64);
  CHECK(str(t) ==
        "tensor([1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000],\n"
        "       dtype=f64)");
  CHECK(str(full({8}, 1.5, DType::f64)) ==
        "tensor([1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000],\n"
        "       dtype=f64)");
  CHECK(str(full({7}, 1.5, DType::f64)) ==
        "tensor([1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000], dtype=f64)");
}

TEST_CASE("print: more than 1000 elements are summarised", "[print]") {
  CHECK(str(arange(0, 2000)) == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  CHECK(str(arange(0, 1000)).find("...") == std::string::npos);
  CHECK(str(arange(0, 2000).view({2, 1000})) ==
        "tensor([[   0,    1,    2,  ...,  997,  998,  999],\n"
        "        [1000, 1001, 1002,  ..., 1997, 1998, 1999]])");
  CHECK(str(arange(0, 1100).view({100, 11})) ==
        "tensor([[   0,    1,    2,  ...,    8,    9,   10],\n"
        "        [  11,   12,   13,  ...,   19,   20,   21],\n"
        "        [  22,   23,   24,  ...,   30,   31,   32],\n"
        "        ...,\n"
        "        [1067, 1068, 1069,  ..., 1075, 1076, 1077],\n"
        "        [1078, 1079, 1080,  ..., 1086, 1087, 1088],\n"
        "        [1089, 1090, 1091,  ..., 1097, 1098, 1099]])");
  // The formatter sees only the printed entries: the hidden 1e-9 does not force sci mode.
  Tensor x = full({2000}, 1.0f);
  x.slice(0, 1000, 1001).fill_(1e-9);
  CHECK(str(x) == "tensor([1., 1., 1.,  ..., 1., 1., 1.])");
}

TEST_CASE("print: empty tensors show their size and non-float dtype", "[print]") {
  CHECK(str(zeros({0})) == "tensor([])");
  CHECK(str(zeros({0, 3})) == "tensor([], size=(0, 3))");
  CHECK(str(zeros({0}, DType::i64)) == "tensor([], dtype=i64)");
  CHECK(str(zeros({2, 0}, DType::bool_)) == "tensor([], size=(2, 0), dtype=bool)");
}

TEST_CASE("print: requires_grad, undefined and traced tensors", "[print]") {
  Tensor w = tensor(std::vector<float>{1, 2});
  w.requires_grad_();
  CHECK(str(w) == "tensor([1., 2.], requires_grad=True)");
  CHECK(str(Tensor()) == "tensor(<undefined>)");
  struct FakeTrace : TraceHandle {};
  Tensor traced = make_tensor({2, 3}, DType::f32);
  traced.impl().storage = nullptr;
  traced.impl().trace = std::make_shared<FakeTrace>();
  CHECK(str(traced) == "tensor(<traced>, size=(2, 3), dtype=f32)");
}
