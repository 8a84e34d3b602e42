// Differential tests of the reduction primitives (sum, prod, amax, amin, argmax, argmin,
// cumsum) and of mean/max/min: over each dim, several dims, all dims, keepdim both ways and
// the dtype argument, on every dtype. Values are chosen so that results don't depend on the
// order of accumulation (Values::exact, Values::pow2): any difference is a real bug.
#include "diff/diff_testing.h"

using namespace kiln;
using namespace kiln::diff;

namespace {

struct ReductionShape {
  ShapeCase shape;
  /// Dim lists to reduce over ({} = all dims).
  std::vector<std::vector<int64_t>> dims;
};

std::vector<ReductionShape> reduction_shapes() {
  return {
      {{"0-d", {}}, {{}, {0}, {-1}}},
      {{"empty 4x0", {4, 0}}, {{0}, {1}, {}}},
      {{"empty 0x5", {0, 5}}, {{0}, {1}}},
      {{"one element", {1}}, {{0}, {}}},
      {{"1023", {1023}}, {{0}, {}}},
      {{"7x33", {7, 33}}, {{0}, {1}, {-1}, {0, 1}, {}}},
      {{"2x3x5x7", {2, 3, 5, 7}}, {{0}, {1}, {2}, {3}, {1, 3}, {0, 2, 3}, {-1, -2}, {}}},
      {{"5x1x7", {5, 1, 7}}, {{1}, {0, 2}, {}}},
      {{"7x33 transposed", {7, 33}, Layout::transposed}, {{0}, {1}, {}}},
      {{"7x33 step-2 slice", {7, 33}, Layout::sliced}, {{0}, {1}}},
      {{"7x33 expanded from 7x1", {7, 33}, Layout::expanded, {7, 1}}, {{0}, {1}, {}}},
      {{"2x3x5x7 permuted", {2, 3, 5, 7}, Layout::permuted}, {{1, 2}, {3}, {0}, {}}},
      {{"3x1000", {3, 1000}}, {{1}, {0}}},
      {{"1000x3", {1000, 3}}, {{0}}},
  };
}

/// The shape cases every dtype runs; f32 runs them all.
bool in_short_list(const std::string& label) {
  for (const char* l : {"0-d", "empty 4x0", "7x33 transposed", "3x1000"})
    if (label == l) return true;
  return false;
}

std::string dims_str(const std::vector<int64_t>& dims) {
  if (dims.empty()) return "all dims";
  std::string s = "dims ";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "," : "") + std::to_string(dims[i]);
  return s;
}

/// The single dims of a shape case (for argmax/argmin/cumsum): each dim once, plus -1.
std::vector<int64_t> single_dims(const ReductionShape& r) {
  std::vector<int64_t> d;
  const auto rank = static_cast<int64_t>(r.shape.shape.size());
  for (int64_t i = 0; i < rank; ++i)
    d.push_back(i);
  d.push_back(-1); // also valid for 0-d
  return d;
}

using DimsOp = Tensor (*)(const Tensor&, IntList, bool);

/// How dims_items covers keepdim: both values for every dim list, or one per dim list in
/// turn (starting with false or true), so that two ops of one bundle cover both between them.
enum class Keepdim { both, alternate_from_false, alternate_from_true };

/// op over each dim list of r, with keepdim as `keepdim` says.
std::vector<Item> dims_items(const char* name, DimsOp op, const ReductionShape& r, bool must_run,
                             Keepdim keepdim = Keepdim::both) {
  std::vector<Item> items;
  bool keep_this_time = keepdim == Keepdim::alternate_from_false;
  for (const std::vector<int64_t>& dims : r.dims) {
    keep_this_time = !keep_this_time;
    for (bool keep : {false, true}) {
      if (keepdim != Keepdim::both && keep != keep_this_time) continue;
      items.push_back({std::string(name) + " " + dims_str(dims) + (keep ? " keepdim" : ""),
                       [op, dims, keep](const Inputs& in) { return op(in[0], dims, keep); },
                       must_run});
    }
  }
  return items;
}

Tensor sum_default(const Tensor& a, IntList dims, bool keep) { return kiln::sum(a, dims, keep); }
Tensor prod_of(const Tensor& a, IntList dims, bool keep) { return kiln::prod(a, dims, keep); }
Tensor amax_of(const Tensor& a, IntList dims, bool keep) { return kiln::amax(a, dims, keep); }
Tensor amin_of(const Tensor& a, IntList dims, bool keep) { return kiln::amin(a, dims, keep); }
Tensor max_of(const Tensor& a, IntList dims, bool keep) { return kiln::max(a, dims, keep); }
Tensor min_of(const Tensor& a, IntList dims, bool keep) { return kiln::min(a, dims, keep); }
Tensor mean_of(const Tensor& a, IntList dims, bool keep) { return kiln::mean(a, dims, keep); }

template <typename Body> void for_each_reduction_case(uint64_t seed, Body&& body) {
  for (DType t : sweep_dtypes())
    for (const ReductionShape& r : reduction_shapes())
      if (t == DType::f32 || in_short_list(r.shape.label)) body(t, r, ++seed);
}

Tensor input_for(const ReductionShape& r, DType t, Values v, uint64_t seed) {
  return make_input(r.shape.shape, t, v, seed, r.shape.layout, r.shape.base);
}

/// f32 must reduce every non-empty case; the empty ones may be refused (no identity for
/// max, or an empty flattened argmax) and other dtypes may be refused as the op decides.
bool must_run(DType t, const ReductionShape& r) {
  return t == DType::f32 && numel_of(r.shape.shape) > 0;
}

} // namespace

TEST_CASE("diff: sum and mean over dims with and without keepdim and dtype", "[diff]") {
  for_each_reduction_case(6000, [](DType t, const ReductionShape& r, uint64_t seed) {
    Tensor x = input_for(r, t, Values::exact_special, seed);
    std::vector<Item> items = dims_items("sum", sum_default, r, t == DType::f32);
    std::vector<Item> means =
        dims_items("mean", mean_of, r, t == DType::f32, Keepdim::alternate_from_true);
    items.insert(items.end(), means.begin(), means.end());
    for (DType acc : {DType::f64, DType::f32, DType::i64, DType::f16}) {
      std::vector<int64_t> dims = r.dims.front();
      items.push_back({"sum " + dims_str(dims) + " dtype " + dtype_str(acc),
                       [dims, acc](const Inputs& in) { return sum(in[0], dims, false, acc); },
                       t == DType::f32});
    }
    CHECK(check_bundle("sum", dtype_str(t) + " " + r.shape.label, {x}, std::move(items)));
  });
}

TEST_CASE("diff: prod over dims", "[diff]") {
  for_each_reduction_case(7000, [](DType t, const ReductionShape& r, uint64_t seed) {
    Tensor x = input_for(r, t, Values::pow2, seed);
    CHECK(check_bundle(
        "prod", dtype_str(t) + " " + r.shape.label, {x},
        dims_items("prod", prod_of, r, t == DType::f32, Keepdim::alternate_from_false)));
  });
}

TEST_CASE("diff: amax amin max and min over dims", "[diff]") {
  for_each_reduction_case(8000, [](DType t, const ReductionShape& r, uint64_t seed) {
    Tensor x = input_for(r, t, Values::exact_special, seed);
    std::vector<Item> items;
    // keepdim both ways for every dim list, split between amax/min and amin/max.
    for (auto [name, op, keepdim] : std::vector<std::tuple<const char*, DimsOp, Keepdim>>{
             {"amax", amax_of, Keepdim::alternate_from_false},
             {"amin", amin_of, Keepdim::alternate_from_true},
             {"max", max_of, Keepdim::alternate_from_true},
             {"min", min_of, Keepdim::alternate_from_false}}) {
      std::vector<Item> more = dims_items(name, op, r, must_run(t, r), keepdim);
      items.insert(items.end(), more.begin(), more.end());
    }
    std::optional<Case> c =
        bundle("amax amin", dtype_str(t) + " " + r.shape.label, {x}, std::move(items));
    if (!c) return; // an empty case of a dtype that refuses all
    // Which of two tied zeros of opposite sign an extremum returns depends on the order it
    // combines them in, which kiln leaves unspecified.
    c->compare.zero_sign = false;
    check(*c);
  });
}

TEST_CASE("diff: argmax and argmin pick the first extremum and NaN", "[diff]") {
  for_each_reduction_case(9000, [](DType t, const ReductionShape& r, uint64_t seed) {
    // exact values repeat often, so rows hold ties; every 41st element is NaN or ±Inf.
    Tensor x = input_for(r, t, Values::exact_special, seed);
    std::vector<Item> items;
    // Each dim with keepdim one way for argmax and the other for argmin.
    for (int64_t d : single_dims(r)) {
      const bool keep = (d & 1) != 0;
      std::string dim = " dim " + std::to_string(d);
      items.push_back({"argmax" + dim + (keep ? " keepdim" : ""),
                       [d, keep](const Inputs& in) { return argmax(in[0], d, keep); },
                       must_run(t, r)});
      items.push_back({"argmin" + dim + (keep ? "" : " keepdim"),
                       [d, keep](const Inputs& in) { return argmin(in[0], d, !keep); },
                       must_run(t, r)});
    }
    items.push_back(
        {"argmax flattened", [](const Inputs& in) { return argmax(in[0]); }, must_run(t, r)});
    items.push_back({"argmin flattened keepdim",
                     [](const Inputs& in) { return argmin(in[0], std::nullopt, true); },
                     must_run(t, r)});
    check_bundle("argmax argmin", dtype_str(t) + " " + r.shape.label, {x}, std::move(items));
  });
}

TEST_CASE("diff: cumsum along each dim with and without dtype", "[diff]") {
  for_each_reduction_case(10000, [](DType t, const ReductionShape& r, uint64_t seed) {
    Tensor x = input_for(r, t, Values::exact_special, seed);
    std::vector<Item> items;
    for (int64_t d : single_dims(r)) {
      items.push_back({"cumsum dim " + std::to_string(d),
                       [d](const Inputs& in) { return cumsum(in[0], d); }, t == DType::f32});
      if (d != 0 && r.shape.shape.size() > 0) continue; // the dtype argument on one dim
      for (DType acc : {DType::f64, DType::i64, DType::f16})
        items.push_back({"cumsum dim " + std::to_string(d) + " dtype " + dtype_str(acc),
                         [d, acc](const Inputs& in) { return cumsum(in[0], d, acc); },
                         t == DType::f32});
    }
    CHECK(check_bundle("cumsum", dtype_str(t) + " " + r.shape.label, {x}, std::move(items)));
  });
}

TEST_CASE("diff: each reduction alone on a non-contiguous input", "[diff]") {
  // One op per compiled function, over a transposed f32 and a sliced f16 input.
  struct One {
    const char* name;
    std::function<Tensor(const Tensor&)> fn;
  };
  const std::vector<One> ops = {
      {"sum", [](const Tensor& x) { return x.sum({0}); }},
      {"prod", [](const Tensor& x) { return ((x.abs() < 1.5).to(x.dtype()) + 1).prod({1}); }},
      {"amax", [](const Tensor& x) { return amax(x, {1}, true); }},
      {"amin", [](const Tensor& x) { return amin(x); }},
      {"argmax", [](const Tensor& x) { return argmax(x, 0); }},
      {"argmin", [](const Tensor& x) { return argmin(x, 1, true); }},
      {"cumsum", [](const Tensor& x) { return cumsum(x, 0); }},
  };
  uint64_t seed = 11000;
  for (const One& op : ops)
    for (auto [t, layout, label] : std::vector<std::tuple<DType, Layout, const char*>>{
             {DType::f32, Layout::transposed, "f32 33x7 transposed"},
             {DType::f16, Layout::sliced, "f16 33x7 step-2 slice"},
             {DType::i32, Layout::permuted, "i32 33x7 permuted"}}) {
      Case c;
      c.op = op.name;
      c.variant = label;
      c.inputs = {make_input({33, 7}, t, Values::exact_special, ++seed, layout)};
      auto f = op.fn;
      c.fn = [f](const Inputs& in) { return Outputs{f(in[0])}; };
      check(c);
    }
}
