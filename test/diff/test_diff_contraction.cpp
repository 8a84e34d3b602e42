// Differential tests of the contractions and windows: matmul (1-d, 2-d, batched, broadcast
// batch dims, transposed operands, empty contraction), bmm, linear, conv2d (stride, padding,
// dilation, groups, bias, unbatched), max_pool2d, avg_pool2d and adaptive_avg_pool2d.
// Values are Values::exact: products and sums of them are exact, so the accumulation order
// of a library call or generated loop cannot change the result.
#include "diff/diff_testing.h"

using namespace kiln;
using namespace kiln::diff;

namespace {

const std::vector<DType>& contraction_dtypes() {
  static const std::vector<DType> ts = {DType::f32,  DType::f64, DType::f16,
                                        DType::bf16, DType::i32, DType::i64};
  return ts;
}

Tensor exact(Shape shape, DType t, uint64_t seed, Layout layout = Layout::contiguous) {
  return make_input(std::move(shape), t, Values::exact, seed, layout);
}

} // namespace

TEST_CASE("diff: matmul over ranks batch broadcasts and layouts", "[diff]") {
  struct MatmulCase {
    std::string label;
    Shape a, b;
    Layout la = Layout::contiguous, lb = Layout::contiguous;
  };
  const std::vector<MatmulCase> cases = {
      {"7x33 and 33x5", {7, 33}, {33, 5}},
      {"1x1 and 1x1", {1, 1}, {1, 1}},
      {"33 and 33 (dot)", {33}, {33}},
      {"33 and 33x5", {33}, {33, 5}},
      {"7x33 and 33", {7, 33}, {33}},
      {"2x7x9 and 2x9x17", {2, 7, 9}, {2, 9, 17}},
      {"2x1x7x9 and 3x9x4 (batch broadcast)", {2, 1, 7, 9}, {3, 9, 4}},
      {"7x9 and 2x9x4 (batch broadcast)", {7, 9}, {2, 9, 4}},
      {"transposed 7x33 and transposed 33x5",
       {7, 33},
       {33, 5},
       Layout::transposed,
       Layout::transposed},
      {"step-2 slice 7x33 and 33x5", {7, 33}, {33, 5}, Layout::sliced},
      {"7x0 and 0x5 (empty contraction)", {7, 0}, {0, 5}},
      {"0x9 and 9x5 (no rows)", {0, 9}, {9, 5}},
      {"17x65 and 65x31", {17, 65}, {65, 31}},
  };
  uint64_t seed = 19000;
  for (DType t : contraction_dtypes()) {
    for (const MatmulCase& m : cases) {
      // The dtypes other than f32 run the cases that differ in kind, not only in size.
      if (t != DType::f32 &&
          (m.label == "1x1 and 1x1" || m.label == "33 and 33x5" ||
           m.label == "7x9 and 2x9x4 (batch broadcast)" || m.label == "0x9 and 9x5 (no rows)" ||
           m.label == "step-2 slice 7x33 and 33x5" || m.label == "2x7x9 and 2x9x17"))
        continue;
      Case c;
      c.op = "matmul";
      c.variant = dtype_str(t) + " " + m.label;
      c.inputs = {exact(m.a, t, ++seed, m.la), exact(m.b, t, ++seed, m.lb)};
      c.fn = [](const Inputs& in) { return Outputs{matmul(in[0], in[1])}; };
      c.may_refuse = t != DType::f32;
      check(c);
    }
  }
  // NaN and Inf propagate through a contraction (inf * 0 = NaN) in any order.
  Case s;
  s.op = "matmul with NaN and Inf";
  s.variant = "f32 7x33 and 33x5";
  s.inputs = {make_input({7, 33}, DType::f32, Values::exact_special, ++seed),
              make_input({33, 5}, DType::f32, Values::exact, ++seed)};
  s.fn = [](const Inputs& in) { return Outputs{matmul(in[0], in[1])}; };
  check(s);
}

TEST_CASE("diff: bmm and linear with and without bias", "[diff]") {
  uint64_t seed = 20000;
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    Tensor x = exact({4, 7, 9}, t, ++seed);
    Tensor y = exact({4, 9, 6}, t, ++seed);
    Tensor w = exact({6, 9}, t, ++seed);
    Tensor bias = exact({6}, t, ++seed);
    CHECK(check_bundle(
        "bmm and linear", dtype_str(t) + " 4x7x9", {x, y, w, bias},
        {{"bmm", [](const Inputs& in) { return bmm(in[0], in[1]); }, true},
         {"bmm of transposed",
          [](const Inputs& in) { return bmm(in[1].transpose(1, 2), in[0].transpose(1, 2)); }, true},
         {"linear", [](const Inputs& in) { return linear(in[0], in[2], in[3]); }, true},
         {"linear without bias", [](const Inputs& in) { return linear(in[0], in[2]); }, true},
         {"linear 2-d input",
          [](const Inputs& in) { return linear(in[0].select(0, 1), in[2], in[3]); }, true},
         {"linear 1-d weight", [](const Inputs& in) { return linear(in[0], in[2].select(0, 0)); },
          true},
         {"linear then relu", [](const Inputs& in) { return relu(linear(in[0], in[2], in[3])); },
          true},
         {"matmul then bias then sum",
          [](const Inputs& in) { return (in[0].matmul(in[1]) + in[3]).sum({-1}); }, true}}));
  }
}

TEST_CASE("diff: conv2d over strides paddings dilations and groups", "[diff]") {
  struct ConvCase {
    std::string label;
    Shape x, w;
    bool bias;
    std::vector<int64_t> stride, padding, dilation;
    int64_t groups;
  };
  const std::vector<ConvCase> cases = {
      {"1x3x9x11 3x3 kernel", {1, 3, 9, 11}, {4, 3, 3, 3}, false, {1, 1}, {0, 0}, {1, 1}, 1},
      {"2x3x9x11 bias stride 2 padding 1",
       {2, 3, 9, 11},
       {5, 3, 3, 3},
       true,
       {2, 2},
       {1, 1},
       {1, 1},
       1},
      {"1x2x10x10 dilation 2", {1, 2, 10, 10}, {3, 2, 3, 3}, true, {1, 1}, {0, 0}, {2, 2}, 1},
      {"1x4x7x7 groups 2", {1, 4, 7, 7}, {6, 2, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 2},
      {"1x4x7x7 depthwise", {1, 4, 7, 7}, {4, 1, 3, 3}, false, {1, 1}, {1, 1}, {1, 1}, 4},
      {"1x3x5x5 1x1 kernel", {1, 3, 5, 5}, {2, 3, 1, 1}, true, {1, 1}, {0, 0}, {1, 1}, 1},
      {"1x1x3x3 kernel larger than input padded",
       {1, 1, 3, 3},
       {1, 1, 5, 5},
       false,
       {1, 1},
       {2, 2},
       {1, 1},
       1},
      {"1x2x6x9 asymmetric stride and padding",
       {1, 2, 6, 9},
       {2, 2, 2, 3},
       true,
       {1, 2},
       {0, 1},
       {1, 1},
       1},
      {"3x7x7 unbatched", {3, 7, 7}, {2, 3, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 1},
  };
  uint64_t seed = 21000;
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (const ConvCase& cc : cases) {
      Case c;
      c.op = "conv2d";
      c.variant = dtype_str(t) + " " + cc.label;
      c.inputs = {exact(cc.x, t, ++seed), exact(cc.w, t, ++seed)};
      if (cc.bias) c.inputs.push_back(exact({cc.w[0]}, t, ++seed));
      c.fn = [cc](const Inputs& in) {
        Tensor b = in.size() > 2 ? in[2] : Tensor();
        return Outputs{conv2d(in[0], in[1], b, cc.stride, cc.padding, cc.dilation, cc.groups)};
      };
      c.may_refuse = t != DType::f32;
      check(c);
    }
  }
  // Non-contiguous input and conv feeding pointwise ops and a reduction.
  for (DType t : {DType::f32, DType::f16}) {
    Case c;
    c.op = "conv2d chains";
    c.variant = dtype_str(t) + " 2x3x8x8 permuted";
    c.inputs = {make_input({2, 3, 8, 8}, t, Values::exact, ++seed, Layout::permuted),
                exact({4, 3, 3, 3}, t, ++seed), exact({4}, t, ++seed)};
    c.fn = [](const Inputs& in) {
      Tensor y = conv2d(in[0], in[1], in[2], {1, 1}, {1, 1});
      return Outputs{y, relu(y) + 1, y.sum({1}), max_pool2d(relu(y), {2, 2})};
    };
    check(c);
  }
}

TEST_CASE("diff: max_pool2d avg_pool2d and adaptive_avg_pool2d", "[diff]") {
  uint64_t seed = 22000;
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64}) {
    const bool f = is_floating(t);
    // exact_special: NaN must win a max window, -inf and +inf must survive.
    Tensor x = make_input({2, 3, 9, 11}, t, f ? Values::exact_special : Values::exact, ++seed);
    Tensor xt = make_input({1, 2, 8, 7}, t, Values::exact, ++seed, Layout::transposed);
    Tensor small = make_input({1, 1, 3, 3}, t, Values::exact, ++seed);
    const bool must = t == DType::f32;
    CHECK(check_bundle(
        "pooling", dtype_str(t) + " 2x3x9x11", {x, xt, small},
        {{"max_pool2d 2", [](const Inputs& in) { return max_pool2d(in[0], {2}); }, must},
         {"max_pool2d 3 stride 2 padding 1",
          [](const Inputs& in) {
            return max_pool2d(in[0], {3, 3}, {2, 2}, {1, 1});
          },
          must},
         {"max_pool2d dilation 2",
          [](const Inputs& in) {
            return max_pool2d(in[0], {2, 3}, {1, 1}, {0, 1}, {2, 2});
          },
          must},
         {"max_pool2d ceil_mode",
          [](const Inputs& in) {
            return max_pool2d(in[0], {2, 2}, {2, 2}, {0, 0}, {1, 1}, true);
          },
          must},
         {"max_pool2d of transposed",
          [](const Inputs& in) {
            return max_pool2d(in[1], {3, 2});
          },
          must},
         {"max_pool2d all padding window",
          [](const Inputs& in) {
            return max_pool2d(in[2], {2, 2}, {2, 2}, {1, 1});
          },
          must},
         {"avg_pool2d 2", [](const Inputs& in) { return avg_pool2d(in[0], {2}); }, must},
         {"avg_pool2d 3 stride 2 padding 1 count pad",
          [](const Inputs& in) {
            return avg_pool2d(in[0], {3, 3}, {2, 2}, {1, 1});
          },
          must},
         {"avg_pool2d 3 stride 2 padding 1 no count pad",
          [](const Inputs& in) {
            return avg_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}, false, false);
          },
          must},
         {"avg_pool2d ceil_mode",
          [](const Inputs& in) {
            return avg_pool2d(in[0], {2, 2}, {2, 2}, {1, 0}, true);
          },
          must},
         {"avg_pool2d of transposed",
          [](const Inputs& in) {
            return avg_pool2d(in[1], {2, 2});
          },
          must},
         {"adaptive_avg_pool2d 1x1",
          [](const Inputs& in) {
            return adaptive_avg_pool2d(in[1], {1, 1});
          },
          must},
         {"adaptive_avg_pool2d 4x7",
          [](const Inputs& in) {
            return adaptive_avg_pool2d(in[1], {4, 7});
          },
          must},
         {"max_pool2d then pointwise", [](const Inputs& in) {
            return max_pool2d(in[0], {2, 2}) * 2 - 1;
          }}}));
  }
}
