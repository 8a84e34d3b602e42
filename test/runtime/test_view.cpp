// Views: view/reshape/permute/transpose/expand/slice/squeeze/unsqueeze/flatten/narrow,
// aliasing and version sharing, contiguous/clone, and their error messages.
#include <catch2/catch.hpp>
#include <vector>

#include <kiln/kiln.h>

#include "runtime/tensor_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {} // namespace

TEST_CASE("view: aliases storage, shares versions, infers -1", "[view]") {
  Tensor a = iota_f32(12);
  Tensor v = a.view({3, -1});
  CHECK(v.shape() == Shape{3, 4});
  CHECK(v.strides() == Shape{4, 1});
  CHECK(same_storage(a, v));
  CHECK(vals(v) == vals(a));
  uint64_t before = a.version();
  // A write through a view is seen by the base, and bumps the shared version counter.
  v.slice(0, 1, 2).slice(1, 2, 3).copy_(tensor<float>({100.0f}).view({1, 1}));
  CHECK(vals(a)[6] == 100.0f);
  CHECK(a.version() > before);
  CHECK(v.version() == a.version());
  CHECK(a.view({2, 2, 3}).shape() == Shape{2, 2, 3});
  CHECK(a.view({-1}).shape() == Shape{12});
  CHECK(a.view({1, 12, 1}).strides()[1] == 1);
  // 0-d <-> one element.
  Tensor s = tensor<float>({5.0f}).view({});
  CHECK(s.dim() == 0);
  CHECK(s.view({1, 1}).shape() == Shape{1, 1});
  CHECK(s.view({-1}).shape() == Shape{1});
  // Empty tensors view freely between shapes of 0 elements.
  Tensor e = iota_f32(0);
  CHECK(e.view({0, 3}).shape() == Shape{0, 3});
}

TEST_CASE("view: errors name sizes, strides and suggest reshape", "[view]") {
  Tensor a = iota_f32(12);
  CHECK_THROWS_WITH(a.view({5}),
                    Catch::Contains("view: shape [5] is invalid for an input of 12 elements"));
  CHECK_THROWS_WITH(a.view({-1, -1}), Catch::Contains("view: only one dimension can be inferred"));
  CHECK_THROWS_WITH(a.view({-1, 5}), Catch::Contains("invalid for an input of 12 elements"));
  CHECK_THROWS_WITH(a.view({-2, 6}), Catch::Contains("view: invalid size -2"));
  CHECK_THROWS_WITH(iota_f32(0).view({-1, 0}), Catch::Contains("ambiguous"));
  Tensor t = a.view({3, 4}).t();
  CHECK_THROWS_WITH(
      t.view({12}),
      Catch::Contains("view: size [12] is not compatible with the input's strides [1, 4] "
                      "(shape [4, 3]); use reshape(...) instead"));
}

TEST_CASE("view: merges and splits dims that are contiguous relative to each other", "[view]") {
  // [4, 6] sliced to [4, 4]: rows stay 6 apart, so the inner dim may split but rows may not merge.
  Tensor x = iota_f32(24).view({4, 6}).slice(1, 0, 4);
  CHECK(x.strides() == Shape{6, 1});
  Tensor y = x.view({4, 2, 2});
  CHECK(y.strides() == Shape{6, 2, 1});
  CHECK(vals(y) == vals(x));
  CHECK_THROWS_WITH(x.view({16}), Catch::Contains("use reshape"));
  // A stride-0 expanded dim may gain size-1 dims.
  Tensor e = iota_f32(3).view({3, 1}).expand({3, 2});
  CHECK(e.view({3, 1, 2}).strides()[2] == 0);
  // Permuted dims that stay adjacent and dense merge.
  Tensor p = iota_f32(24).view({2, 3, 4}).permute({1, 2, 0}); // strides [4, 1, 12]
  Tensor q = p.view({12, 2});
  CHECK(q.strides() == Shape{1, 12});
  CHECK(vals(q) == vals(p.contiguous()));
}

TEST_CASE("reshape: a view when possible, else a copy", "[view]") {
  Tensor a = iota_f32(6).view({2, 3});
  Tensor r = a.reshape({3, 2});
  CHECK(same_storage(a, r));
  Tensor t = a.t();
  Tensor c = t.reshape({-1});
  CHECK_FALSE(same_storage(t, c));
  CHECK(vals(c) == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK_FALSE(t.reshape({3, 2}).is_contiguous()); // same shape: a view
  CHECK(t.reshape({2, 3}).is_contiguous());
  CHECK_THROWS_WITH(a.reshape({4}),
                    Catch::Contains("reshape: shape [4] is invalid for an input of 6 elements"));
}

TEST_CASE("permute and transpose", "[view]") {
  Tensor a = iota_f32(24).view({2, 3, 4});
  Tensor p = a.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.strides() == Shape{1, 12, 4});
  CHECK(same_storage(a, p));
  // p[i][j][k] = a[j][k][i] = 12 j + 4 k + i.
  std::vector<float> pv = vals(p);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k)
        REQUIRE(pv[static_cast<size_t>(i * 6 + j * 3 + k)] == 12 * j + 4 * k + i);
  CHECK(a.permute({-1, 0, 1}).shape() == Shape{4, 2, 3});
  CHECK_THROWS_WITH(
      a.permute({0, 1}),
      Catch::Contains("permute: dims [0, 1] do not list the 3 dims of shape [2, 3, 4]"));
  CHECK_THROWS_WITH(a.permute({0, 1, 1}), Catch::Contains("not a permutation"));
  CHECK_THROWS_WITH(a.permute({0, 1, 3}), Catch::Contains("permute: dim 3 is out of range"));

  Tensor m = iota_f32(6).view({2, 3});
  CHECK(vals(m.t()) == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(vals(m.transpose(-1, -2)) == vals(m.t()));
  CHECK(a.transpose(0, 2).shape() == Shape{4, 3, 2});
  CHECK(a.transpose(1, 1).strides() == a.strides());
  Tensor s = tensor<float>({7.0f}).view({});
  CHECK(s.transpose(0, -1).dim() == 0);
  CHECK_THROWS_WITH(m.transpose(0, 2), Catch::Contains("transpose: dim 2 is out of range"));
}

TEST_CASE("expand: size-1 dims get stride 0, -1 keeps, new leading dims", "[view]") {
  Tensor col = tensor<float>({1, 2, 3}).view({3, 1});
  Tensor e = col.expand({3, 4});
  CHECK(e.strides() == Shape{1, 0});
  CHECK(same_storage(col, e));
  CHECK(vals(e) == std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  Tensor f = col.expand({2, -1, 2});
  CHECK(f.shape() == Shape{2, 3, 2});
  CHECK(f.strides()[0] == 0);
  CHECK(vals(f.contiguous()) == std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  CHECK(tensor<float>({4.0f}).view({}).expand({2, 2}).to_vector<float>() ==
        std::vector<float>{4, 4, 4, 4});
  CHECK(col.expand({3, 0}).numel() == 0);
  CHECK(col.expand_as(iota_f32(6).view({3, 2})).shape() == Shape{3, 2});
  CHECK_THROWS_WITH(
      col.expand({4, 4}),
      Catch::Contains(
          "expand: the expanded size (4) must match the existing size (3) at non-singleton dim 0"));
  CHECK_THROWS_WITH(col.expand({-1, 3, 1}),
                    Catch::Contains("expand: size -1 is not allowed in a new leading dim"));
  CHECK_THROWS_WITH(col.expand({3}),
                    Catch::Contains("expand: the number of sizes provided (1) must be at least"));
}

TEST_CASE("slice: Python clamping, steps, empty results", "[view]") {
  Tensor a = iota_f32(10);
  CHECK(vals(a.slice(0, 2, 5)) == std::vector<float>{2, 3, 4});
  CHECK(vals(a.slice(0, -3, 100)) == std::vector<float>{7, 8, 9});
  CHECK(vals(a.slice(0, 1, -6)) == std::vector<float>{1, 2, 3});
  CHECK(vals(a.slice(0, 0, 10, 3)) == std::vector<float>{0, 3, 6, 9});
  CHECK(vals(a.slice(0, 1, 10, 4)) == std::vector<float>{1, 5, 9});
  CHECK(a.slice(0, 8, 2).numel() == 0);
  CHECK(a.slice(0, 20, 30).numel() == 0);
  CHECK(vals(a.slice(0, -100, 2)) == std::vector<float>{0, 1});
  Tensor s = a.slice(0, 2, 8, 2);
  CHECK(s.storage_offset() == 2);
  CHECK(s.strides() == Shape{2});
  CHECK(same_storage(a, s));
  Tensor m = iota_f32(12).view({3, 4});
  CHECK(vals(m.slice(1, 1, 3)) == std::vector<float>{1, 2, 5, 6, 9, 10});
  CHECK(vals(m.slice(-1, 0, 4, 2).slice(0, 1, 3)) == std::vector<float>{4, 6, 8, 10});
  CHECK_THROWS_WITH(a.slice(0, 0, 5, 0), Catch::Contains("slice: step must be positive, got 0"));
  CHECK_THROWS_WITH(a.slice(0, 0, 5, -1), Catch::Contains("slice: step must be positive"));
  CHECK_THROWS_WITH(a.slice(1, 0, 5), Catch::Contains("slice: dim 1 is out of range"));
  CHECK_THROWS_WITH(tensor<float>({1.0f}).view({}).slice(0, 0, 1),
                    Catch::Contains("slice: cannot be applied to a 0-d tensor"));
  CHECK(vals(a.select(0, -1)) == std::vector<float>{9});
}

TEST_CASE("squeeze, unsqueeze, flatten, narrow", "[view]") {
  Tensor a = iota_f32(6).view({2, 1, 3});
  CHECK(a.squeeze().shape() == Shape{2, 3});
  CHECK(a.squeeze(1).shape() == Shape{2, 3});
  CHECK(a.squeeze(-2).shape() == Shape{2, 3});
  CHECK(a.squeeze(0).shape() == Shape{2, 1, 3});
  CHECK(same_storage(a, a.squeeze()));
  CHECK(iota_f32(1).view({1, 1}).squeeze().dim() == 0);
  CHECK_THROWS_WITH(a.squeeze(3), Catch::Contains("squeeze: dim 3 is out of range"));

  Tensor b = iota_f32(6).view({2, 3});
  CHECK(b.unsqueeze(0).shape() == Shape{1, 2, 3});
  CHECK(b.unsqueeze(2).shape() == Shape{2, 3, 1});
  CHECK(b.unsqueeze(-1).shape() == Shape{2, 3, 1});
  CHECK(b.unsqueeze(-3).shape() == Shape{1, 2, 3});
  CHECK(b.t().unsqueeze(1).shape() == Shape{3, 1, 2});
  CHECK(vals(b.t().unsqueeze(1)) == vals(b.t()));
  CHECK(tensor<float>({1.0f}).view({}).unsqueeze(0).shape() == Shape{1});
  CHECK_THROWS_WITH(b.unsqueeze(3), Catch::Contains("unsqueeze: dim 3 is out of range"));
  CHECK_THROWS_WITH(b.unsqueeze(-4), Catch::Contains("unsqueeze: dim -4 is out of range"));

  Tensor c = iota_f32(24).view({2, 3, 4});
  CHECK(c.flatten().shape() == Shape{24});
  CHECK(c.flatten(1).shape() == Shape{2, 12});
  CHECK(c.flatten(0, 1).shape() == Shape{6, 4});
  CHECK(c.flatten(-2, -1).shape() == Shape{2, 12});
  CHECK(c.flatten(1, 1).shape() == Shape{2, 3, 4});
  CHECK(tensor<float>({1.0f}).view({}).flatten().shape() == Shape{1});
  CHECK(vals(c.permute({2, 1, 0}).flatten()) == vals(c.permute({2, 1, 0}).contiguous()));
  CHECK_THROWS_WITH(c.flatten(2, 1), Catch::Contains("flatten: start_dim 2 comes after end_dim 1"));

  Tensor d = iota_f32(10);
  CHECK(vals(d.narrow(0, 2, 3)) == std::vector<float>{2, 3, 4});
  CHECK(vals(d.narrow(0, -3, 2)) == std::vector<float>{7, 8});
  CHECK(d.narrow(0, 10, 0).numel() == 0);
  CHECK_THROWS_WITH(d.narrow(0, 8, 3),
                    Catch::Contains("narrow: start (8) + length (3) exceeds the size 10"));
  CHECK_THROWS_WITH(d.narrow(0, 11, 0), Catch::Contains("narrow: start 11 is out of range"));
  CHECK_THROWS_WITH(d.narrow(0, 0, -1), Catch::Contains("narrow: length must be non-negative"));
}

TEST_CASE("contiguous and clone", "[view]") {
  Tensor a = iota_f32(6).view({2, 3});
  CHECK(a.contiguous().is_same(a));
  Tensor t = a.t();
  Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(same_storage(c, a));
  CHECK(vals(c) == std::vector<float>{0, 3, 1, 4, 2, 5});
  Tensor k = a.clone();
  CHECK_FALSE(same_storage(k, a));
  k.copy_(tensor<float>({9.0f}));
  CHECK(vals(a)[0] == 0.0f);
  CHECK(vals(k) == std::vector<float>(6, 9.0f));
  // Stride-0 and step-sliced inputs.
  Tensor e = tensor<float>({1, 2}).view({2, 1}).expand({2, 3}).contiguous();
  CHECK(vals(e) == std::vector<float>{1, 1, 1, 2, 2, 2});
  CHECK(vals(iota_f32(9).view({3, 3}).slice(1, 0, 3, 2).t().contiguous()) ==
        std::vector<float>{0, 3, 6, 2, 5, 8});
  // Transposes big enough for the tiled path, with ragged tiles and an outer dim.
  Tensor m = iota_f32(3 * 40 * 35).view({3, 40, 35});
  std::vector<float> mt = vals(m.permute({0, 2, 1}).contiguous());
  bool ok = true;
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 35; ++i)
      for (int j = 0; j < 40; ++j)
        ok = ok && mt[static_cast<size_t>(b * 1400 + i * 40 + j)] ==
                       static_cast<float>(b * 1400 + j * 35 + i);
  CHECK(ok);
  std::vector<float> outer_t = vals(m.permute({2, 1, 0}).contiguous()); // src dense dim is 0
  CHECK(outer_t[1] == 1400.0f);
  CHECK(outer_t[3] == 35.0f);
  CHECK(outer_t[3 * 40] == 1.0f);
  // A large dense clone (the parallel memcpy path).
  Tensor big = iota_f32(300000);
  std::vector<float> bv = vals(big.clone());
  CHECK(bv[0] == 0.0f);
  CHECK(bv[123457] == 123457.0f);
  CHECK(bv[299999] == 299999.0f);
  CHECK(iota_f32(0).clone().numel() == 0);
}
