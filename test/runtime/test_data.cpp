// Data movement: copy/copy_ between every pair of dtypes and layouts, cat, stack, split,
// chunk, index_select, gather, scatter and pad against hand values, with their errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include <kiln/kiln.h>

#include "runtime/tensor_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

/// A tensor of `dtype` holding `values` (exactly representable in it), built without casts.
Tensor make_of(DType dtype, const std::vector<double>& values) {
  return visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> v;
    for (double x : values) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        v.push_back(T(static_cast<float>(x)));
      else
        v.push_back(static_cast<T>(x));
    }
    return tensor<T>(v);
  });
}

/// A contiguous tensor's elements read as double straight from memory (no cast op).
std::vector<double> raw_values(const Tensor& t) {
  REQUIRE(t.is_contiguous());
  return visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data_ptr<T>();
    std::vector<double> out;
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        out.push_back(static_cast<float>(p[i]));
      else
        out.push_back(static_cast<double>(p[i]));
    }
    return out;
  });
}

const DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8,
                            DType::u8,  DType::i32, DType::i64, DType::bool_};

} // namespace

TEST_CASE("copy_: every pair of dtypes", "[data]") {
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      CAPTURE(from, to);
      std::vector<double> in = from == DType::bool_ ? std::vector<double>{0, 1, 1, 0}
                                                    : std::vector<double>{0, 1, 2, 100};
      Tensor src = make_of(from, in);
      Tensor dst = empty({4}, to);
      dst.copy_(src);
      std::vector<double> expect = in;
      if (to == DType::bool_)
        for (double& x : expect)
          x = x != 0 ? 1 : 0;
      CHECK(raw_values(dst) == expect);
    }
  }
}

TEST_CASE("copy_: conversion rules (truncation, bool, wrap, half rounding)", "[data]") {
  Tensor f = tensor<float>({2.75f, -2.75f, 0.5f, -0.0f});
  Tensor i = empty({4}, DType::i32);
  i.copy_(f);
  CHECK(raw_values(i) == std::vector<double>{2, -2, 0, 0});
  Tensor b = empty({4}, DType::bool_);
  b.copy_(f);
  CHECK(raw_values(b) == std::vector<double>{1, 1, 1, 0});
  Tensor nb = empty({1}, DType::bool_);
  nb.copy_(tensor<float>({std::numeric_limits<float>::quiet_NaN()}));
  CHECK(raw_values(nb) == std::vector<double>{1});
  Tensor w = empty({2}, DType::i8);
  w.copy_(tensor<int32_t>({300, -129}));
  CHECK(raw_values(w) == std::vector<double>{44, 127});
  Tensor h = empty({1}, DType::f16);
  h.copy_(tensor<float>({1.0f / 3.0f}));
  CHECK(h.data_ptr<Half>()[0].bits == float_to_half_bits(1.0f / 3.0f));
  Tensor bf = empty({1}, DType::bf16);
  bf.copy_(tensor<double>({1.0 / 3.0}));
  CHECK(bf.data_ptr<BFloat16>()[0].bits == float_to_bf16_bits(static_cast<float>(1.0 / 3.0)));
  Tensor hi = empty({1}, DType::i64);
  hi.copy_(tensor<float>({-7.9f}).to(DType::f16));
  CHECK(raw_values(hi) == std::vector<double>{-7});
}

TEST_CASE("copy_: strided destination, broadcast source, overlap, versions", "[data]") {
  Tensor a = empty({3, 4}, DType::f32);
  // Write through a transposed view from an i64 source of the view's shape.
  a.t().copy_(tensor<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {4, 3}));
  CHECK(vals(a) == std::vector<float>{0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11});
  uint64_t v0 = a.version();
  a.copy_(tensor<float>({1, 2, 3, 4})); // broadcast over rows
  CHECK(vals(a) == std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
  CHECK(a.version() > v0);
  a.slice(1, 0, 4, 2).copy_(tensor<float>({-1.0f}));
  CHECK(vals(a.slice(0, 0, 1)) == std::vector<float>{-1, 2, -1, 4});
  // Overlapping source and destination: read before written.
  Tensor o = iota_f32(5);
  o.slice(0, 1, 5).copy_(o.slice(0, 0, 4));
  CHECK(vals(o) == std::vector<float>{0, 0, 1, 2, 3});
  Tensor self = iota_f32(4);
  self.copy_(self);
  CHECK(vals(self) == std::vector<float>{0, 1, 2, 3});
  Tensor e = empty({0, 3}, DType::f32);
  e.copy_(tensor<float>({1, 2, 3}));
  CHECK(e.numel() == 0);
  CHECK_THROWS_WITH(a.copy_(tensor<float>({1, 2, 3})), Catch::Contains("expand"));
}

TEST_CASE("cat: dims, promotion, strided inputs, legacy empty skip", "[data]") {
  Tensor a = tensor<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = tensor<float>({5, 6}, {1, 2});
  CHECK(vals(cat({a, b})) == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(cat({a, b}).shape() == Shape{3, 2});
  Tensor c = tensor<float>({7, 8}, {2, 1});
  CHECK(vals(cat({a, c}, 1)) == std::vector<float>{1, 2, 7, 3, 4, 8});
  CHECK(vals(cat({a, c}, -1)) == vals(cat({a, c}, 1)));
  CHECK(vals(cat({a.t(), c}, 1)) == std::vector<float>{1, 3, 7, 2, 4, 8});
  Tensor i = tensor<int32_t>({9, 10}, {1, 2});
  Tensor p = cat({i, a});
  CHECK(p.dtype() == DType::f32);
  CHECK(vals(p) == std::vector<float>{9, 10, 1, 2, 3, 4});
  CHECK(cat({i, tensor<int64_t>({1, 2}, {1, 2})}).dtype() == DType::i64);
  CHECK(vals(cat({iota_f32(0), a, iota_f32(0)})) == vals(a));
  CHECK(cat({iota_f32(0), iota_f32(0)}).shape() == Shape{0});
  CHECK(cat({a, iota_f32(0).view({0, 2})}).shape() == Shape{2, 2});
  CHECK(vals(cat({iota_f32(10).slice(0, 0, 10, 4), iota_f32(2)})) ==
        std::vector<float>{0, 4, 8, 0, 1});
  CHECK_THROWS_WITH(cat({a, tensor<float>({1, 2, 3}, {1, 3})}),
                    Catch::Contains("cat: sizes of tensors must match except in dim 0; expected "
                                    "size 2 but got size 3 in dim 1 for tensor 1"));
  CHECK_THROWS_WITH(cat({a, iota_f32(2)}), Catch::Contains("tensor 1 has shape [2]"));
  CHECK_THROWS_WITH(cat({a, tensor<float>({1.0f}).view({})}),
                    Catch::Contains("cat: zero-dimensional tensor (at position 1)"));
  CHECK_THROWS_WITH(cat({}), Catch::Contains("cat: expected a non-empty list"));
  CHECK_THROWS_WITH(cat({a, b}, 2), Catch::Contains("cat: dim 2 is out of range"));
}

TEST_CASE("stack", "[data]") {
  Tensor a = tensor<float>({1, 2, 3});
  Tensor b = tensor<float>({4, 5, 6});
  CHECK(stack({a, b}).shape() == Shape{2, 3});
  CHECK(vals(stack({a, b})) == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(stack({a, b}, 1).shape() == Shape{3, 2});
  CHECK(vals(stack({a, b}, -1)) == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(stack({tensor<float>({1.0f}).view({})}).shape() == Shape{1});
  CHECK_THROWS_WITH(stack({a, iota_f32(2)}),
                    Catch::Contains("stack: expects each tensor to be equal size, but got [3] at "
                                    "entry 0 and [2] at entry 1"));
  CHECK_THROWS_WITH(stack({a, b}, 2), Catch::Contains("stack: dim 2 is out of range"));
}

TEST_CASE("split and chunk return views", "[data]") {
  Tensor a = iota_f32(10);
  std::vector<Tensor> parts = split(a, 3);
  REQUIRE(parts.size() == 4);
  CHECK(vals(parts[0]) == std::vector<float>{0, 1, 2});
  CHECK(vals(parts[3]) == std::vector<float>{9});
  parts[1].copy_(tensor<float>({-1.0f}));
  CHECK(vals(a)[4] == -1.0f);
  Tensor m = iota_f32(12).view({3, 4});
  std::vector<Tensor> cols = split(m, 3, 1);
  REQUIRE(cols.size() == 2);
  CHECK(vals(cols[1]) == std::vector<float>{3, 7, 11});
  std::vector<Tensor> ch = chunk(iota_f32(10), 3);
  REQUIRE(ch.size() == 3);
  CHECK(ch[0].numel() == 4);
  CHECK(ch[2].numel() == 2);
  CHECK(chunk(iota_f32(6), 4).size() == 3); // chunks of 2, as PyTorch
  CHECK(chunk(m, 2, -1)[1].shape() == Shape{3, 2});
  CHECK(chunk(iota_f32(0), 3).size() == 3);
  CHECK(split(iota_f32(0), 0).size() == 1);
  CHECK_THROWS_WITH(chunk(a, 0), Catch::Contains("chunk: expected chunks > 0, got 0"));
  CHECK_THROWS_WITH(split(a, 0),
                    Catch::Contains("split: split_size can only be 0 if the dimension size is 0"));
  CHECK_THROWS_WITH(split(a, -1), Catch::Contains("split: split_size must be non-negative"));
  // The methods, as libtorch has them.
  CHECK(vals(m.split(3, 1)[1]) == std::vector<float>{3, 7, 11});
  CHECK(m.chunk(2, -1)[1].shape() == Shape{3, 2});
  CHECK(vals(m.tril()) == vals(tril(m)));
  CHECK(vals(m.triu(1)) == std::vector<float>{0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11});
}

TEST_CASE("index_select", "[data]") {
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  CHECK(vals(index_select(x, 0, tensor<int64_t>({2, 0}))) == std::vector<float>{7, 8, 9, 1, 2, 3});
  CHECK(vals(index_select(x, 1, tensor<int32_t>({1, 1}))) == std::vector<float>{2, 2, 5, 5, 8, 8});
  CHECK(vals(index_select(x.t(), 0, tensor<int64_t>({2}))) == std::vector<float>{3, 6, 9});
  CHECK(vals(index_select(x, -1, tensor<int64_t>({0, 1, 2, 3}).slice(0, 0, 4, 2))) ==
        std::vector<float>{1, 3, 4, 6, 7, 9});
  Tensor s = index_select(x, 0, tensor<int64_t>({1}).view({}));
  CHECK(s.shape() == Shape{1, 3});
  CHECK(index_select(x, 0, tensor<int64_t>(std::vector<int64_t>{})).shape() == Shape{0, 3});
  CHECK(index_select(tensor<int32_t>({5}).view({}), 0, tensor<int64_t>({0})).item<int32_t>() == 5);
  CHECK(index_select(x, 0, tensor<int64_t>({0})).dtype() == DType::f32);
  CHECK_THROWS_WITH(index_select(x, 0, tensor<int64_t>({3})),
                    Catch::Contains("index_select: index 3 is out of range for dim 0 of size 3"));
  CHECK_THROWS_WITH(index_select(x, 1, tensor<int64_t>({-1})),
                    Catch::Contains("index_select: index -1 is out of range for dim 1 of size 3"));
  CHECK_THROWS_WITH(index_select(x, 0, tensor<float>({0})),
                    Catch::Contains("index_select: expected an i64 or i32 index, got f32"));
  CHECK_THROWS_WITH(
      index_select(x, 0, tensor<int64_t>({0, 1}, {1, 2})),
      Catch::Contains("index_select: the index must be 1-d or 0-d, got shape [1, 2]"));
}

TEST_CASE("gather", "[data]") {
  Tensor x = tensor<float>({1, 2, 3, 4}, {2, 2});
  // torch.gather's documented example.
  CHECK(vals(gather(x, 1, tensor<int64_t>({0, 0, 1, 0}, {2, 2}))) ==
        std::vector<float>{1, 1, 4, 3});
  CHECK(vals(gather(x, 0, tensor<int64_t>({1, 0}, {1, 2}))) == std::vector<float>{3, 2});
  CHECK(vals(gather(x.t(), 1, tensor<int64_t>({1, 1}, {2, 1}))) == std::vector<float>{3, 4});
  Tensor big = iota_f32(12).view({3, 4});
  CHECK(vals(gather(big, 1, tensor<int32_t>({3, 0}, {2, 1}))) == std::vector<float>{3, 4});
  CHECK(gather(big, 0, tensor<int64_t>(std::vector<int64_t>{}).view({0, 4})).shape() ==
        Shape{0, 4});
  // A strided index over a strided input, across several dims.
  Tensor cube =
      iota_f32(24).view({2, 3, 4}).permute({0, 2, 1}); // [2, 4, 3], c[i][j][k] = 12i + j + 4k
  Tensor ix = tensor<int64_t>({2, 0, 1, 1, 0, 2, 2, 2, 0, 0, 1, 1}, {2, 3, 2})
                  .slice(2, 0, 2, 2); // [2, 3, 1]
  CHECK(vals(gather(cube, 2, ix)) == std::vector<float>{8, 5, 2, 20, 13, 18});
  CHECK(gather(tensor<float>({5.0f}).view({}), 0, tensor<int64_t>({0}).view({})).item<float>() ==
        5.0f);
  CHECK_THROWS_WITH(gather(x, 1, tensor<int64_t>({2, 0}, {1, 2})),
                    Catch::Contains("gather: index 2 is out of range for dim 1 of size 2"));
  CHECK_THROWS_WITH(gather(x, 1, tensor<int64_t>({0, 0})),
                    Catch::Contains("gather: the index must have as many dims as the input"));
  CHECK_THROWS_WITH(
      gather(x, 1, tensor<int64_t>({0, 0, 0}, {3, 1})),
      Catch::Contains("gather: the index's size 3 in dim 0 exceeds the input's size 2"));
}

TEST_CASE("scatter: out of place, src may be larger than index", "[data]") {
  Tensor src = tensor<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5});
  Tensor z = tensor<float>(std::vector<float>(15, 0.0f), {3, 5});
  // torch.Tensor.scatter_'s documented examples.
  Tensor r0 = scatter(z, 0, tensor<int64_t>({0, 1, 2, 0}, {1, 4}), src);
  CHECK(vals(r0) == std::vector<float>{1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0});
  Tensor r1 = scatter(z, 1, tensor<int64_t>({0, 1, 2, 0, 1, 4}, {2, 3}), src);
  CHECK(vals(r1) == std::vector<float>{1, 2, 3, 0, 0, 6, 7, 0, 0, 8, 0, 0, 0, 0, 0});
  CHECK(vals(z) == std::vector<float>(15, 0.0f)); // input untouched
  Tensor r2 =
      scatter(z.t().contiguous().t(), 1, tensor<int64_t>({4}, {1, 1}), src.t().contiguous().t());
  CHECK(vals(r2)[4] == 1.0f);
  CHECK_THROWS_WITH(scatter(z, 0, tensor<int64_t>({3}, {1, 1}), src),
                    Catch::Contains("scatter: index 3 is out of range for dim 0 of size 3"));
  CHECK_THROWS_WITH(
      scatter(z, 0, tensor<int64_t>({0}, {1, 1}), tensor<double>({1.0}).view({1, 1})),
      Catch::Contains("scatter: expected src to have the input's dtype f32, got f64"));
  CHECK_THROWS_WITH(
      scatter(z, 0, tensor<int64_t>({0, 0, 0}, {3, 1}), tensor<float>({1, 2}, {2, 1})),
      Catch::Contains("scatter: the index's size 3 in dim 0 exceeds src's size 2"));
}

TEST_CASE("pad: constant padding from the last dim, negative pads crop", "[data]") {
  Tensor x = tensor<float>({1, 2, 3, 4}, {2, 2});
  CHECK(vals(pad(x, {1, 1})) == std::vector<float>{0, 1, 2, 0, 0, 3, 4, 0});
  Tensor p = pad(x, {1, 0, 0, 1}, 9.0);
  CHECK(p.shape() == Shape{3, 3});
  CHECK(vals(p) == std::vector<float>{9, 1, 2, 9, 3, 4, 9, 9, 9});
  CHECK(vals(pad(x.t(), {0, 1})) == std::vector<float>{1, 3, 0, 2, 4, 0});
  CHECK(vals(pad(iota_f32(5), {-1, -2})) == std::vector<float>{1, 2});
  CHECK(vals(pad(iota_f32(5), {-1, 2})) == std::vector<float>{1, 2, 3, 4, 0, 0});
  CHECK(pad(iota_f32(3), {-3, 0}).numel() == 0);
  CHECK(pad(x, {}).shape() == Shape{2, 2});
  Tensor i = pad(tensor<int32_t>({5}), {1, 1}, 7.9);
  CHECK(i.dtype() == DType::i32);
  CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{7, 5, 7});
  CHECK(pad(iota_f32(0).view({0, 2}), {0, 0, 1, 1}).shape() == Shape{2, 2});
  CHECK_THROWS_WITH(pad(x, {1}), Catch::Contains("pad: expected (left, right) pairs"));
  CHECK_THROWS_WITH(pad(x, {1, 1, 1, 1, 1, 1}), Catch::Contains("pad: 3 padded dims requested"));
  CHECK_THROWS_WITH(
      pad(x, {-2, -1}),
      Catch::Contains("pad: size 2 of dim 1 plus padding (-2, -1) gives a negative size"));
}
