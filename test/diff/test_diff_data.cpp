// Differential tests of the data-movement primitives: copy, cat, index_select, gather,
// scatter and pad, and the composites on them (clone, contiguous, stack, embedding,
// one_hot, tril/triu), over dtypes, dims, empty pieces and non-contiguous operands.
#include <cmath>
#include <limits>

#include "diff/diff_testing.h"

using namespace kiln;
using namespace kiln::diff;

namespace {

/// A deterministic index tensor of values in [0, n) (with repeats).
Tensor index_values(Shape shape, int64_t n, uint64_t seed, DType t = DType::i64) {
  const int64_t count = numel_of(shape);
  std::vector<int64_t> v(static_cast<size_t>(count));
  uint64_t s = seed * 2654435761ULL + 12345;
  for (int64_t i = 0; i < count; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    v[static_cast<size_t>(i)] = static_cast<int64_t>((s >> 33) % static_cast<uint64_t>(n));
  }
  Tensor r = tensor(v).view(shape);
  return t == DType::i64 ? r : r.to(t);
}

} // namespace

TEST_CASE("diff: copy clone and contiguous over dtypes and layouts", "[diff]") {
  uint64_t seed = 14000;
  for (DType t : all_dtypes()) {
    // f32 runs every shape; the other dtypes the 0-d, empty and non-contiguous ones (a
    // contiguous copy is a plain memcpy: the layouts are what matters).
    for (const ShapeCase& s : t == DType::f32 ? pointwise_shapes() : pointwise_shapes_short()) {
      if (s.label == "33" || s.label == "1023") continue;
      Tensor x = make_input(s.shape, t, Values::special, ++seed, s.layout, s.base);
      CHECK(check_bundle(
          "copy", dtype_str(t) + " " + s.label, {x},
          {{"clone", [](const Inputs& in) { return in[0].clone(); }, true},
           {"contiguous", [](const Inputs& in) { return in[0].contiguous(); }, true},
           {"clone of a view", [](const Inputs& in) { return in[0].unsqueeze(0).clone(); }, true},
           {"clone then copy_ into it",
            [](const Inputs& in) {
              Tensor r = zeros_like(in[0]);
              r.copy_(in[0]);
              return r;
            },
            true}}));
    }
  }
}

TEST_CASE("diff: cat along each dim with mixed dtypes and empty pieces", "[diff]") {
  uint64_t seed = 15000;
  for (DType t : sweep_dtypes()) {
    Tensor a = make_input({3, 5, 7}, t, Values::special, ++seed);
    Tensor b = make_input({3, 5, 7}, t, Values::special, ++seed, Layout::transposed);
    Tensor e = make_input({0, 5, 7}, t, Values::special, ++seed);
    Tensor c = make_input({3, 2, 7}, t, Values::special, ++seed, Layout::sliced);
    CHECK(check_bundle("cat", dtype_str(t) + " 3x5x7 pieces", {a, b, e, c},
                       {{"cat dim 0",
                         [](const Inputs& in) {
                           return cat({in[0], in[1]}, 0);
                         },
                         true},
                        {"cat dim 1",
                         [](const Inputs& in) {
                           return cat({in[0], in[3], in[1]}, 1);
                         },
                         true},
                        {"cat dim -1",
                         [](const Inputs& in) {
                           return cat({in[0], in[1]}, -1);
                         },
                         true},
                        {"cat with an empty piece",
                         [](const Inputs& in) {
                           return cat({in[2], in[0], in[2]}, 0);
                         },
                         true},
                        {"cat of one", [](const Inputs& in) { return cat({in[1]}, 2); }, true},
                        {"cat of views",
                         [](const Inputs& in) {
                           return cat({in[0].slice(2, 0, 7, 2), in[1].slice(2, 1, 7, 2)}, 2);
                         },
                         true},
                        {"cat then pointwise",
                         [](const Inputs& in) {
                           return cat({in[0], in[1]}, 1) * 2;
                         }},
                        {"cat of pointwise results", [](const Inputs& in) {
                           return cat({in[0] + 1, -in[1], in[3]}, 1);
                         }}}));
  }
  // Mixed dtypes promote.
  for (auto [ta, tb] : std::vector<std::pair<DType, DType>>{{DType::f16, DType::f32},
                                                            {DType::i32, DType::f16},
                                                            {DType::bool_, DType::i64},
                                                            {DType::bf16, DType::f16}}) {
    Tensor a = make_input({4, 6}, ta, Values::special, ++seed);
    Tensor b = make_input({3, 6}, tb, Values::special, ++seed);
    CHECK(check_bundle("cat mixed dtypes", dtype_str(ta) + " and " + dtype_str(tb), {a, b},
                       {{"cat dim 0",
                         [](const Inputs& in) {
                           return cat({in[0], in[1]}, 0);
                         },
                         true}}));
  }
}

TEST_CASE("diff: index_select gather and scatter", "[diff]") {
  uint64_t seed = 16000;
  for (DType t : sweep_dtypes()) {
    Tensor x = make_input({6, 7, 5}, t, Values::special, ++seed);
    Tensor xt = make_input({7, 6}, t, Values::special, ++seed, Layout::transposed); // 7x6 view
    Tensor src = make_input({6, 7, 5}, t, Values::special, ++seed);
    Tensor idx = index_values({9}, 6, ++seed); // repeats
    Tensor idx32 = index_values({4}, 5, ++seed, DType::i32);
    Tensor g0 = index_values({4, 7, 5}, 6, ++seed); // gather along 0
    Tensor g2 = index_values({6, 7, 3}, 5, ++seed); // gather along 2
    // A scatter index whose entries along dim 1 are a permutation of 0..6 in every row.
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t k = 0; k < 5; ++k)
          perm.push_back((j * 3 + i + k) % 7);
    Tensor sc = tensor(perm).view({6, 4, 5});
    Tensor empty_idx = index_values({0}, 6, ++seed);
    CHECK(check_bundle(
        "indexing", dtype_str(t) + " 6x7x5", {x, xt, src, idx, idx32, g0, g2, sc},
        {{"index_select dim 0", [](const Inputs& in) { return index_select(in[0], 0, in[3]); },
          true},
         {"index_select dim 2 i32 index",
          [](const Inputs& in) { return index_select(in[0], 2, in[4]); }},
         {"index_select of transposed",
          [](const Inputs& in) { return index_select(in[1], 1, in[3].slice(0, 0, 5)); }, true},
         {"index_select dim 1 then pointwise",
          [](const Inputs& in) { return index_select(in[0], 1, in[3].slice(0, 2, 8)) * 2; }},
         {"gather dim 0", [](const Inputs& in) { return gather(in[0], 0, in[5]); }, true},
         {"gather dim 2", [](const Inputs& in) { return gather(in[0], 2, in[6]); }, true},
         {"gather dim -1 of a slice",
          [](const Inputs& in) {
            return gather(in[0].slice(1, 0, 7, 2), -1, in[6].slice(1, 0, 4));
          },
          true},
         {"scatter dim 1", [](const Inputs& in) { return scatter(in[0], 1, in[7], in[2]); }, true},
         {"scatter dim 1 of a pointwise src",
          [](const Inputs& in) { return scatter(in[0], 1, in[7], in[2] + in[2]); }},
         {"index_select with a captured index",
          [](const Inputs& in) {
            return index_select(in[0], 0, tensor<int64_t>({5, 0, 0, 3}));
          },
          true}}));
    CHECK(check_bundle("indexing empty", dtype_str(t) + " 6x7x5", {x, empty_idx},
                       {{"index_select of an empty index",
                         [](const Inputs& in) { return index_select(in[0], 0, in[1]); }, true},
                        {"gather of an empty index",
                         [](const Inputs& in) {
                           return gather(in[0], 0, in[1].view({0, 1, 1}).expand({0, 7, 5}));
                         }},
                        {"index_select of 0-sized input", [](const Inputs& in) {
                           return index_select(in[0].slice(1, 0, 0), 0, tensor<int64_t>({1, 2}));
                         }}}));
  }
}

TEST_CASE("diff: pad with constants on one two and three dims", "[diff]") {
  uint64_t seed = 17000;
  for (DType t : sweep_dtypes()) {
    Tensor x = make_input({3, 5, 7}, t, Values::special, ++seed);
    Tensor xt = make_input({3, 7, 5}, t, Values::special, ++seed, Layout::transposed);
    const bool f32 = t == DType::f32; // a float pad value may be refused for other dtypes
    CHECK(check_bundle("pad", dtype_str(t) + " 3x5x7", {x, xt},
                       {{"pad last dim",
                         [](const Inputs& in) {
                           return pad(in[0], {1, 2});
                         },
                         f32},
                        {"pad two dims with 1.5",
                         [](const Inputs& in) {
                           return pad(in[0], {0, 3, 2, 1}, 1.5);
                         },
                         f32},
                        {"pad three dims with -0.0",
                         [](const Inputs& in) {
                           return pad(in[0], {1, 1, 1, 1, 1, 1}, -0.0);
                         },
                         f32},
                        {"pad with NaN",
                         [](const Inputs& in) {
                           return pad(in[0], {2, 0}, std::nan(""));
                         }},
                        {"pad with -inf",
                         [](const Inputs& in) {
                           return pad(in[0], {0, 1}, -std::numeric_limits<double>::infinity());
                         }},
                        {"crop with negative pads",
                         [](const Inputs& in) {
                           return pad(in[0], {-1, -2});
                         }},
                        {"pad of transposed",
                         [](const Inputs& in) {
                           return pad(in[1], {3, 3, 0, 1});
                         },
                         f32},
                        {"pad then add",
                         [](const Inputs& in) {
                           return pad(in[0], {1, 1}) + 1;
                         }},
                        {"pad of a pointwise result",
                         [](const Inputs& in) {
                           return pad(in[0] * 2, {0, 0, 1, 0});
                         }},
                        {"pad of zero width",
                         [](const Inputs& in) {
                           return pad(in[0], {0, 0});
                         },
                         f32}}));
  }
}

TEST_CASE("diff: embedding one_hot tril and triu", "[diff]") {
  uint64_t seed = 18000;
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    Tensor w = make_input({11, 6}, t, Values::special, ++seed);
    Tensor ids = index_values({3, 4}, 11, ++seed);
    CHECK(check_bundle(
        "embedding", dtype_str(t) + " 11x6 weight 3x4 ids", {w, ids},
        {{"embedding", [](const Inputs& in) { return embedding(in[0], in[1]); }, true},
         {"embedding i32 ids",
          [](const Inputs& in) { return embedding(in[0], in[1].to(DType::i32)); }, true}}));
  }
  for (DType t : sweep_dtypes()) {
    Tensor m = make_input({2, 5, 7}, t, Values::special, ++seed);
    CHECK(check_bundle("tril triu", dtype_str(t) + " 2x5x7", {m},
                       {{"tril", [](const Inputs& in) { return tril(in[0]); }, true},
                        {"tril -2", [](const Inputs& in) { return tril(in[0], -2); }, true},
                        {"triu", [](const Inputs& in) { return triu(in[0]); }, true},
                        {"triu 3", [](const Inputs& in) { return triu(in[0], 3); }, true},
                        {"triu of transposed",
                         [](const Inputs& in) { return triu(in[0].transpose(1, 2), 1); }, true}}));
  }
  // one_hot reads its indices on the host (a graph break), so the second call re-traces.
  Case oh;
  oh.op = "one_hot";
  oh.variant = "i64 3x4 ids";
  oh.inputs = {index_values({3, 4}, 5, ++seed)};
  oh.fn = [](const Inputs& in) { return Outputs{one_hot(in[0], 6), one_hot(in[0], -1)}; };
  oh.expect_replay = false;
  check(oh);
}
