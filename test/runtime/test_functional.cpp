// The nn functional composites against hand-computed values: layer_norm, batch_norm (running
// stats), dropout, embedding, one_hot, cross_entropy, mse_loss, scaled_dot_product_attention.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <kiln/kiln.h>

using namespace kiln;

namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

void check_close(const std::vector<float>& got, const std::vector<double>& expected,
                 double tol = 1e-5) {
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(expected[i]).margin(tol).epsilon(tol));
  }
}

/// Reference attention on [B, L, E] x [B, S, E] x [B, S, Ev] in double; mask[i][j] false or
/// causal j > i drops a score.
std::vector<double> naive_attention(const Tensor& tq, const Tensor& tk, const Tensor& tv,
                                    double scale, const std::vector<std::vector<bool>>& keep) {
  const std::vector<double> q = tq.to_vector<double>(), k = tk.to_vector<double>(),
                            v = tv.to_vector<double>();
  const int64_t b = tq.size(0), l = tq.size(1), e = tq.size(2), s = tk.size(1), ev = tv.size(2);
  std::vector<double> out(static_cast<size_t>(b * l * ev), 0.0);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t i = 0; i < l; ++i) {
      std::vector<double> sc(static_cast<size_t>(s));
      double mx = -INFINITY;
      for (int64_t j = 0; j < s; ++j) {
        double d = 0;
        for (int64_t x = 0; x < e; ++x)
          d += q[(bi * l + i) * e + x] * k[(bi * s + j) * e + x];
        sc[j] = keep.empty() || keep[i][j] ? d * scale : -INFINITY;
        mx = std::max(mx, sc[j]);
      }
      double z = 0;
      for (double& x : sc)
        z += (x = std::exp(x - mx));
      for (int64_t j = 0; j < s; ++j)
        for (int64_t x = 0; x < ev; ++x)
          out[(bi * l + i) * ev + x] += sc[j] / z * v[(bi * s + j) * ev + x];
    }
  return out;
}

} // namespace

// ---- layer_norm ----

TEST_CASE("layer_norm normalises the trailing dims with biased variance", "[functional]") {
  Tensor x = tensor<float>({1, 2, 3, 4, 6, 8}, {2, 3});
  const double a = 1.0 / std::sqrt(2.0 / 3.0 + 1e-5), b = 2.0 / std::sqrt(8.0 / 3.0 + 1e-5);
  check_close(values(layer_norm(x, {3})), {-a, 0, a, -b, 0, b});
  Tensor w = tensor<float>({1, 2, 3}), bias = tensor<float>({0, 1, -1});
  check_close(values(layer_norm(x, {3}, w, bias)), {-a, 1, 3 * a - 1, -b, 1, 3 * b - 1});
  check_close(values(layer_norm(x, {3}, {}, bias, 0.0)),
              {-1.224744871, 1, 0.224744871, -1.224744871, 1, 0.224744871});
  // Two normalised dims: all four elements of each [2, 2] block share statistics.
  Tensor x3 = tensor<float>({0, 0, 2, 2, 1, 3, 1, 3}, {2, 2, 2});
  check_close(values(layer_norm(x3, {2, 2}, {}, {}, 0.0)), {-1, -1, 1, 1, -1, 1, -1, 1});
  // A transposed input and bf16, which normalises in f32 and rounds once.
  check_close(values(layer_norm(x.t(), {2}, {}, {}, 0.0)), {-1, 1, -1, 1, -1, 1});
  Tensor yb = layer_norm(to(x, DType::bf16), {3});
  CHECK(yb.dtype() == DType::bf16);
  check_close(values(yb), {-a, 0, a, -b, 0, b}, 1e-2);
}

TEST_CASE("layer_norm errors", "[functional]") {
  Tensor x = zeros({2, 4});
  CHECK_THROWS_WITH(
      layer_norm(x, {3}),
      Catch::Contains(
          "layer_norm: normalized_shape [3] does not match the trailing dims of input [2, 4]"));
  CHECK_THROWS_WITH(layer_norm(x, {1, 2, 4}), Catch::Contains("does not match the trailing dims"));
  CHECK_THROWS_WITH(
      layer_norm(x, {4}, zeros({3})),
      Catch::Contains("layer_norm: weight of shape [3] does not match normalized_shape [4]"));
  CHECK_THROWS_WITH(
      layer_norm(x, {4}, {}, zeros({2, 2})),
      Catch::Contains("layer_norm: bias of shape [2, 2] does not match normalized_shape [4]"));
  CHECK_THROWS_WITH(layer_norm(zeros({2, 4}, DType::i64), {4}),
                    Catch::Contains("layer_norm: expected a floating input, got i64"));
}

// ---- batch_norm ----

TEST_CASE("batch_norm training uses batch stats and updates the running stats in place",
          "[functional]") {
  Tensor x = tensor<float>({1, 2, 3, 6}, {2, 2}); // channel 0: {1, 3}, channel 1: {2, 6}
  Tensor rm = zeros({2}), rv = ones({2});
  const uint64_t vm = rm.version(), vv = rv.version();
  Tensor y = batch_norm(x, rm, rv, {}, {}, /*training=*/true, 0.1, 0.0);
  check_close(values(y), {-1, -1, 1, 1});
  // mean {2, 4}; unbiased variance {2, 8} for the running update.
  check_close(values(rm), {0.2, 0.4});
  check_close(values(rv), {0.9 + 0.2, 0.9 + 0.8});
  CHECK(rm.version() > vm);
  CHECK(rv.version() > vv);
  // A second step moves them again.
  batch_norm(x, rm, rv, {}, {}, true, 0.5, 0.0);
  check_close(values(rm), {0.1 + 1.0, 0.2 + 2.0});
  check_close(values(rv), {0.55 + 1.0, 0.85 + 4.0});
  // Weight and bias scale and shift each channel.
  Tensor z = batch_norm(x, {}, {}, tensor<float>({2, 3}), tensor<float>({1, -1}), true, 0.1, 0.0);
  check_close(values(z), {-1, -4, 3, 2});
}

TEST_CASE("batch_norm on NCHW reduces over N, H and W", "[functional]") {
  // Channel 0 holds {0, 2, 4, 6}, channel 1 holds {1, 1, 1, 1}.
  Tensor x = tensor<float>({0, 2, 1, 1, 4, 6, 1, 1}, {2, 2, 1, 2});
  Tensor rm = zeros({2}), rv = zeros({2});
  Tensor y = batch_norm(x, rm, rv, {}, {}, true, 1.0, 0.0);
  const double s = 1.0 / std::sqrt(5.0); // biased variance of {0, 2, 4, 6} is 5
  std::vector<float> got = values(y);
  check_close({got[0], got[1], got[4], got[5]}, {-3 * s, -s, s, 3 * s});
  check_close(values(rm), {3, 1});
  check_close(values(rv), {20.0 / 3.0, 0}); // unbiased
  CHECK(std::isnan(got[2]));                // a constant channel with eps = 0 divides 0 by 0
}

TEST_CASE("batch_norm eval uses the running stats and leaves them alone", "[functional]") {
  Tensor x = tensor<float>({1, 2, 3, 6}, {2, 2});
  Tensor rm = tensor<float>({1, 2}), rv = tensor<float>({4, 16});
  const uint64_t vm = rm.version();
  Tensor y = batch_norm(x, rm, rv, tensor<float>({1, 2}), tensor<float>({0, 1}), false, 0.1, 0.0);
  check_close(values(y), {0, 1, 1, 3});
  check_close(values(rm), {1, 2});
  CHECK(rm.version() == vm);
  Tensor yb = batch_norm(to(x, DType::bf16), rm, rv, {}, {}, false, 0.1, 0.0);
  CHECK(yb.dtype() == DType::bf16);
  check_close(values(yb), {0, 0, 1, 1});
}

TEST_CASE("batch_norm errors", "[functional]") {
  Tensor x = zeros({4, 3});
  CHECK_THROWS_WITH(
      batch_norm(zeros({3}), {}, {}, {}, {}, true),
      Catch::Contains("batch_norm: expected an input with at least 2 dims (N, C, ...), got [3]"));
  CHECK_THROWS_WITH(batch_norm(x, zeros({4}), ones({4}), {}, {}, true),
                    Catch::Contains("batch_norm: running_mean should contain 3 elements (the "
                                    "channels of input [4, 3]), got [4]"));
  CHECK_THROWS_WITH(batch_norm(x, {}, {}, ones({2}), {}, true),
                    Catch::Contains("batch_norm: weight should contain 3 elements"));
  CHECK_THROWS_WITH(
      batch_norm(zeros({1, 3}), {}, {}, {}, {}, true),
      Catch::Contains(
          "batch_norm: expected more than 1 value per channel when training, got input [1, 3]"));
  CHECK_THROWS_WITH(
      batch_norm(x, {}, {}, {}, {}, false),
      Catch::Contains("batch_norm: running_mean and running_var are required in eval mode"));
  CHECK_THROWS_WITH(
      batch_norm(x, zeros({3}), {}, {}, {}, true),
      Catch::Contains("batch_norm: running_mean and running_var must be given together"));
  CHECK_THROWS_WITH(batch_norm(zeros({4, 3}, DType::i64), {}, {}, {}, {}, true),
                    Catch::Contains("batch_norm: expected a floating input, got i64"));
}

// ---- dropout ----

TEST_CASE("dropout keeps when rand < 1 - p and scales by 1 / (1 - p)", "[functional]") {
  Tensor x = add(rand({4000}), 1.0);
  CHECK(dropout(x, 0.0, true).is_same(x));
  CHECK(dropout(x, 0.7, false).is_same(x));
  CHECK(values(dropout(x, 1.0, true)) == std::vector<float>(4000, 0.0f));
  manual_seed(7);
  std::vector<float> r = values(rand_like(x));
  manual_seed(7);
  std::vector<float> d = values(dropout(x, 0.25, true));
  std::vector<float> xs = values(x);
  const float scale = 1.0f / 0.75f;
  int kept = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    INFO("element " << i);
    if (r[i] < 0.75f) {
      CHECK(d[i] == xs[i] * scale);
      ++kept;
    } else {
      CHECK(d[i] == 0.0f);
    }
  }
  CHECK(kept / 4000.0 == Approx(0.75).margin(0.03));
  // Seeded reproducibility.
  manual_seed(11);
  std::vector<float> a = values(dropout(x, 0.5, true));
  manual_seed(11);
  CHECK(values(dropout(x, 0.5, true)) == a);
  CHECK(values(dropout(x, 0.5, true)) != a); // the stream moved on
}

TEST_CASE("dropout errors and dtypes", "[functional]") {
  CHECK_THROWS_WITH(dropout(ones({3}), 1.5, true),
                    Catch::Contains("dropout: probability has to be between 0 and 1, but got 1.5"));
  CHECK_THROWS_WITH(dropout(ones({3}), -0.1, false),
                    Catch::Contains("dropout: probability has to be between 0 and 1"));
  CHECK_THROWS_WITH(dropout(ones({3}, DType::i64), 0.5, true),
                    Catch::Contains("dropout: expected a floating input, got i64"));
  Tensor y = dropout(ones({64}, DType::bf16), 0.5, true);
  CHECK(y.dtype() == DType::bf16);
  for (float v : values(y))
    CHECK((v == 0.0f || v == 2.0f));
  // p = 1 multiplies by zero, so NaN stays NaN as in PyTorch.
  CHECK(std::isnan(values(dropout(tensor<float>({NAN}), 1.0, true))[0]));
}

// ---- embedding and one_hot ----

TEST_CASE("embedding gathers rows and keeps the index shape", "[functional]") {
  Tensor w = reshape(
      arange(Scalar(int64_t{0}), Scalar(int64_t{12}), Scalar(int64_t{1}), DType::f32), {4, 3});
  Tensor idx = tensor<int64_t>({1, 3, 0, 1}, {2, 2});
  Tensor e = embedding(w, idx);
  CHECK(e.sizes() == Shape{2, 2, 3});
  CHECK(values(e) == std::vector<float>{3, 4, 5, 9, 10, 11, 0, 1, 2, 3, 4, 5});
  Tensor e0 = embedding(w, scalar_tensor(int64_t{2}));
  CHECK(e0.sizes() == Shape{3});
  CHECK(values(e0) == std::vector<float>{6, 7, 8});
  CHECK(values(embedding(w, to(tensor<int64_t>({3}), DType::i32))) ==
        std::vector<float>{9, 10, 11});
  CHECK(embedding(w, tensor<int64_t>(std::vector<int64_t>{}, {0, 2})).sizes() == Shape{0, 2, 3});
  CHECK_THROWS_WITH(
      embedding(zeros({4}), idx),
      Catch::Contains("embedding: weight must be 2-d [num_embeddings, dim], got [4]"));
  CHECK_THROWS_WITH(embedding(w, zeros({2})),
                    Catch::Contains("embedding: indices must be an integer tensor, got f32"));
  CHECK_THROWS_AS(embedding(w, tensor<int64_t>({4})), kiln::Error);
  // Python's argument order (F.embedding(input, weight)) is told apart, not read as a 2-d
  // integer weight.
  CHECK_THROWS_WITH(embedding(idx, w), Catch::Contains("embedding: the arguments look swapped") &&
                                           Catch::Contains("torch::embedding, weight first"));
}

TEST_CASE("one_hot encodes class indices as i64", "[functional]") {
  Tensor y = one_hot(tensor<int64_t>({0, 2, 1}), 3);
  CHECK(y.dtype() == DType::i64);
  CHECK(y.sizes() == Shape{3, 3});
  CHECK(y.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 0, 0, 1, 0, 1, 0});
  Tensor y2 = one_hot(tensor<int64_t>({1, 0, 3, 1}, {2, 2}), -1); // infers 4 classes
  CHECK(y2.sizes() == Shape{2, 2, 4});
  CHECK(y2.to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0});
  CHECK(one_hot(tensor<int64_t>(std::vector<int64_t>{}), 4).sizes() == Shape{0, 4});
  CHECK(one_hot(scalar_tensor(int64_t{1}), 2).to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK_THROWS_WITH(one_hot(tensor<int64_t>({0, -1}), 3),
                    Catch::Contains("one_hot: class values must be non-negative, got -1"));
  CHECK_THROWS_WITH(
      one_hot(tensor<int64_t>({0, 3}), 3),
      Catch::Contains("one_hot: class values must be smaller than num_classes (3), got 3"));
  CHECK_THROWS_WITH(one_hot(zeros({2}), 3),
                    Catch::Contains("one_hot: indices must be an integer tensor, got f32"));
  CHECK_THROWS_WITH(
      one_hot(tensor<int64_t>(std::vector<int64_t>{}), -1),
      Catch::Contains("one_hot: cannot infer the number of classes from an empty tensor"));
  CHECK_THROWS_WITH(
      one_hot(tensor<int64_t>({0}), -2),
      Catch::Contains("one_hot: num_classes must be -1 (infer) or non-negative, got -2"));
}

// ---- losses ----

TEST_CASE("cross_entropy is the mean negative log-softmax at the target", "[functional]") {
  Tensor logits = tensor<float>({1, 2, 3, 1, 1, 1}, {2, 3});
  Tensor target = tensor<int64_t>({2, 0});
  const double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0,
               l1 = std::log(3.0);
  CHECK(cross_entropy(logits, target).item<float>() == Approx((l0 + l1) / 2));
  CHECK(cross_entropy(logits, target, "sum").item<float>() == Approx(l0 + l1));
  check_close(values(cross_entropy(logits, target, "none")), {l0, l1});
  CHECK(cross_entropy(logits, to(target, DType::i32)).item<float>() == Approx((l0 + l1) / 2));
  // Unbatched logits with a 0-d target.
  CHECK(cross_entropy(tensor<float>({1, 2, 3}), scalar_tensor(int64_t{2})).item<float>() ==
        Approx(l0));
  // Spatial targets: [N, C, d] logits against [N, d] targets.
  Tensor spatial = permute(reshape(logits, {1, 2, 3}), {0, 2, 1}); // [1, 3, 2]
  Tensor loss = cross_entropy(spatial, tensor<int64_t>({2, 0}, {1, 2}), "none");
  CHECK(loss.sizes() == Shape{1, 2});
  check_close(values(loss), {l0, l1});
}

TEST_CASE("cross_entropy's ignore_index and label smoothing, nll_loss and BCE with logits, as "
          "PyTorch's",
          "[functional]") {
  Tensor logits = tensor<double>({1, 2, 3, 1, 1, 1, 0.5, -1, 2}, {3, 3});
  Tensor target = tensor<int64_t>({2, -100, 0});
  auto lse = [](double a, double b, double c) {
    return std::log(std::exp(a) + std::exp(b) + std::exp(c));
  };
  const double n0 = lse(1, 2, 3) - 3, n2 = lse(0.5, -1, 2) - 0.5;
  // The ignored row adds nothing and is not counted.
  CHECK(cross_entropy(logits, target).item<double>() == Approx((n0 + n2) / 2).epsilon(1e-12));
  check_close(values(cross_entropy(logits, target, "none")), {n0, 0.0, n2});
  CHECK(nll_loss(log_softmax(logits, 1), target, "sum").item<double>() ==
        Approx(n0 + n2).epsilon(1e-12));
  CHECK(cross_entropy(logits, tensor<int64_t>({2, 1, 0}), "mean", 1).item<double>() ==
        Approx((n0 + n2) / 2).epsilon(1e-12));
  // Label smoothing e: (1 - e) nll + e / C * (-sum of the row's log-probabilities).
  const double s0 = 3 * lse(1, 2, 3) - 6, s2 = 3 * lse(0.5, -1, 2) - 1.5;
  const double e = 0.1;
  CHECK(cross_entropy(logits, target, "mean", -100, e).item<double>() ==
        Approx((1 - e) * (n0 + n2) / 2 + e / 3 * (s0 + s2) / 2).epsilon(1e-12));
  CHECK_THROWS_WITH(cross_entropy(logits, tensor<int64_t>({2, 3, 0})),
                    Catch::Contains("cross_entropy: target 3 is out of bounds for 3 classes"));
  // BCE with logits: stable for large |x|.
  Tensor x = tensor<double>({-2.0, 0.0, 3.0, 800.0, -800.0});
  Tensor y = tensor<double>({0.0, 1.0, 0.25, 0.0, 0.0});
  std::vector<double> want;
  for (size_t i = 0; i < 5; ++i) {
    const double xi = values(x)[i], yi = values(y)[i];
    // -(y log s + (1 - y) log(1 - s)) = (1 - y) x + log(1 + e^-x), here for moderate x.
    want.push_back(std::abs(xi) > 100 ? (xi > 0 ? (1 - yi) * xi : 0.0)
                                      : (1 - yi) * xi + std::log1p(std::exp(-xi)));
  }
  check_close(values(binary_cross_entropy_with_logits(x, y, "none")), want);
}

TEST_CASE("cross_entropy errors", "[functional]") {
  Tensor logits = zeros({2, 3});
  CHECK_THROWS_WITH(cross_entropy(logits, tensor<int64_t>({0, 3})),
                    Catch::Contains("cross_entropy: target 3 is out of bounds for 3 classes"));
  CHECK_THROWS_WITH(cross_entropy(logits, tensor<int64_t>({-1, 0})),
                    Catch::Contains("cross_entropy: target -1 is out of bounds for 3 classes"));
  CHECK_THROWS_WITH(
      cross_entropy(logits, tensor<int64_t>({0, 1, 2})),
      Catch::Contains("cross_entropy: expected target of shape [2] for logits [2, 3], got [3]"));
  CHECK_THROWS_WITH(
      cross_entropy(logits, zeros({2})),
      Catch::Contains(
          "cross_entropy: expected target to hold class indices (an integer dtype), got f32"));
  CHECK_THROWS_WITH(
      cross_entropy(logits, tensor<int64_t>({0, 1}), "avg"),
      Catch::Contains("cross_entropy: reduction must be 'mean', 'sum' or 'none', got 'avg'"));
  CHECK_THROWS_WITH(cross_entropy(zeros({2, 3}, DType::i64), tensor<int64_t>({0, 1})),
                    Catch::Contains("cross_entropy: expected floating logits, got i64"));
}

TEST_CASE("mse_loss reductions", "[functional]") {
  Tensor input = tensor<float>({1, 2, 3}), target = tensor<float>({1, 0, 5});
  CHECK(mse_loss(input, target).item<float>() == Approx(8.0 / 3.0));
  CHECK(mse_loss(input, target, "sum").item<float>() == 8.0f);
  CHECK(values(mse_loss(input, target, "none")) == std::vector<float>{0, 4, 4});
  CHECK(values(mse_loss(reshape(input, {3, 1}), target.slice(0, 0, 1), "none")) ==
        std::vector<float>{0, 1, 4});
  CHECK_THROWS_WITH(
      mse_loss(input, target, "max"),
      Catch::Contains("mse_loss: reduction must be 'mean', 'sum' or 'none', got 'max'"));
}

// ---- attention ----

TEST_CASE("scaled_dot_product_attention matches a hand-written softmax", "[functional]") {
  Tensor q = tensor<float>({0.5f, -1, 1, 0.25f, 0, 2}, {1, 3, 2});
  Tensor k = tensor<float>({1, 0, -0.5f, 1, 2, 1}, {1, 3, 2});
  Tensor v = tensor<float>({1, 2, 3, 4, -5, 6}, {1, 3, 2});
  const double scale = 1.0 / std::sqrt(2.0);
  check_close(values(scaled_dot_product_attention(q, k, v)), naive_attention(q, k, v, scale, {}));
  check_close(values(scaled_dot_product_attention(q, k, v, {}, 0.0, false, 0.3)),
              naive_attention(q, k, v, 0.3, {}));
  // Causal: query i sees keys 0..i.
  std::vector<std::vector<bool>> causal{
      {true, false, false}, {true, true, false}, {true, true, true}};
  check_close(values(scaled_dot_product_attention(q, k, v, {}, 0.0, true)),
              naive_attention(q, k, v, scale, causal));
  // A bool mask (true = keep) and the same mask as an additive float mask.
  std::vector<std::vector<bool>> keep{
      {true, false, true}, {false, true, true}, {true, true, false}};
  Tensor bmask = tensor<bool>({true, false, true, false, true, true, true, true, false}, {3, 3});
  check_close(values(scaled_dot_product_attention(q, k, v, bmask)),
              naive_attention(q, k, v, scale, keep));
  Tensor fmask = masked_fill(zeros({3, 3}), logical_not(bmask), -INFINITY);
  check_close(values(scaled_dot_product_attention(q, k, v, fmask)),
              naive_attention(q, k, v, scale, keep));
  // Batched with broadcast heads and a different value width.
  Tensor qb = reshape(tensor<float>({0.5f, -1, 1, 0.25f, 0, 2, 1, 1, -1, 0, 0.5f, 0.5f}, {2, 3, 2}),
                      {2, 1, 3, 2});
  Tensor kb = reshape(k, {1, 1, 3, 2});
  Tensor vb = reshape(tensor<float>({1, 2, 3}, {3, 1}), {1, 1, 3, 1});
  Tensor out = scaled_dot_product_attention(qb, kb, vb);
  CHECK(out.sizes() == Shape{2, 1, 3, 1});
  check_close(values(out),
              naive_attention(reshape(qb, {2, 3, 2}), expand(k, {2, 3, 2}),
                              expand(reshape(tensor<float>({1, 2, 3}), {1, 3, 1}), {2, 3, 1}),
                              scale, {}));
}

TEST_CASE("scaled_dot_product_attention: masked rows, dropout and errors", "[functional]") {
  Tensor q = ones({1, 2, 2}), k = ones({1, 2, 2}), v = ones({1, 2, 3});
  // A fully masked row gives NaN (PyTorch's math path).
  Tensor mask = tensor<bool>({false, false, true, true}, {2, 2});
  std::vector<float> y = values(scaled_dot_product_attention(q, k, v, mask));
  CHECK(std::isnan(y[0]));
  CHECK(y[3] == Approx(1.0));
  // dropout_p = 1 drops every weight.
  CHECK(values(scaled_dot_product_attention(q, k, v, {}, 1.0)) == std::vector<float>(6, 0.0f));
  manual_seed(3);
  std::vector<float> a = values(scaled_dot_product_attention(q, k, v, {}, 0.5));
  manual_seed(3);
  CHECK(values(scaled_dot_product_attention(q, k, v, {}, 0.5)) == a);
  for (float x : a)
    CHECK((x == 0.0f || x == 1.0f || x == 2.0f)); // weights 0.5 scaled by 2
  CHECK_THROWS_WITH(
      scaled_dot_product_attention(q, k, v, mask, 0.0, true),
      Catch::Contains("scaled_dot_product_attention: attn_mask and is_causal cannot both be set"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, ones({1, 2, 3}), v),
                    Catch::Contains("scaled_dot_product_attention: q [1, 2, 2] and k [1, 2, 3] "
                                    "must have the same embedding size"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, ones({1, 3, 3})),
                    Catch::Contains("scaled_dot_product_attention: k [1, 2, 2] and v [1, 3, 3] "
                                    "must have the same sequence length"));
  CHECK_THROWS_WITH(
      scaled_dot_product_attention(ones({2}), k, v),
      Catch::Contains("scaled_dot_product_attention: expected q, k and v with at least 2 dims"));
  CHECK_THROWS_WITH(
      scaled_dot_product_attention(q, k, v, ones({2, 2}, DType::i64)),
      Catch::Contains("scaled_dot_product_attention: attn_mask must be bool or floating, got i64"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, {}, 1.5),
                    Catch::Contains("dropout: probability has to be between 0 and 1"));
}
