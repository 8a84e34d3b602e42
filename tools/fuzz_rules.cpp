// The rule table of `kiln fuzz` and the builder that draws random valid programs from it:
// each rule picks operands among the program's values (or adds inputs), and a step is kept
// only when the eager run of it succeeds, so every generated program is valid.
#include "tools/fuzz_rules.h"

#include <algorithm>
#include <numeric>

#include "runtime/accuracy.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/tensor_impl.h"

namespace kiln::tools {
namespace {

using X = std::span<const Tensor>;

bool any(const Tensor&) { return true; }
bool floating(const Tensor& t) { return is_floating(t.dtype()); }
bool ranked(const Tensor& t) { return t.dim() >= 1; }
bool float_ranked(const Tensor& t) { return floating(t) && ranked(t) && t.numel() > 0; }
bool four_d(const Tensor& t) { return floating(t) && t.dim() == 4; }

/// A dim of t (negative half the time).
int64_t random_dim(ProgramBuilder& b, const Tensor& t) {
  int64_t d = b.uniform(0, t.dim() - 1);
  return b.coin(0.3) ? d - t.dim() : d;
}

Scalar step_scalar(const Step& s) {
  return s.number == static_cast<double>(static_cast<int64_t>(s.number))
             ? Scalar(static_cast<int64_t>(s.number))
             : Scalar(s.number);
}

// ---- makers: choose operands and parameters ----

bool make_unary(ProgramBuilder& b, Step& s) {
  auto v = b.pick(any);
  if (!v) return false;
  s.operands = {*v};
  return true;
}

bool make_unary_float(ProgramBuilder& b, Step& s) {
  auto v = b.pick(floating);
  if (!v) return false;
  s.operands = {*v};
  return true;
}

bool make_binary(ProgramBuilder& b, Step& s) {
  auto a = b.pick(any);
  if (!a) return false;
  ValueRef o = b.partner(b.tensor(*a), false);
  s.operands = b.coin(0.5) ? std::vector<ValueRef>{*a, o} : std::vector<ValueRef>{o, *a};
  return true;
}

bool make_scalar_op(ProgramBuilder& b, Step& s) {
  if (!make_unary(b, s)) return false;
  s.number = b.one_of({2.0, -1.5, 0.5, 3.0, -2.0, 0.25});
  return true;
}

bool make_int_divisor(ProgramBuilder& b, Step& s) {
  if (!make_unary(b, s)) return false;
  s.number = static_cast<double>(b.one_of<int64_t>({2, 3, -2, 5}));
  return true;
}

bool make_clamp(ProgramBuilder& b, Step& s) {
  if (!make_unary(b, s)) return false;
  s.ints = {b.uniform(-2, 0), b.uniform(0, 3)};
  return true;
}

bool make_cast(ProgramBuilder& b, Step& s) {
  if (!make_unary(b, s)) return false;
  s.ints = {static_cast<int64_t>(b.random_dtype(false))};
  return true;
}

bool make_where(ProgramBuilder& b, Step& s) {
  auto a = b.pick(any);
  if (!a) return false;
  const Tensor& t = b.tensor(*a);
  auto cond = b.pick([&](const Tensor& c) {
    return c.dtype() == DType::bool_ && c.dim() <= t.dim() && c.numel() > 0;
  });
  ValueRef c = cond ? *cond : b.new_input(t.sizes(), DType::bool_);
  s.operands = {c, *a, b.partner(t, false)};
  return true;
}

bool make_masked_fill(ProgramBuilder& b, Step& s) {
  auto a = b.pick(any);
  if (!a) return false;
  Shape sizes = b.tensor(*a).sizes();
  for (int64_t& d : sizes)
    if (b.coin(0.3)) d = 1;
  s.operands = {*a, b.new_input(sizes, DType::bool_)};
  s.number = b.one_of({0.0, -1.0, 2.5});
  return true;
}

bool make_reduce_of(ProgramBuilder& b, Step& s, bool (*ok)(const Tensor&),
                    bool inputs_only = false) {
  auto v = inputs_only ? b.pick_input(ok, /*pristine=*/true) : b.pick(ok);
  if (!v) return false;
  const Tensor& t = b.tensor(*v);
  s.operands = {*v};
  s.ints = {b.coin(0.5)}; // keepdim first, then the dims
  for (int64_t d = 0; d < t.dim(); ++d)
    if (b.coin(0.5)) s.ints.push_back(b.coin(0.3) ? d - t.dim() : d);
  return true;
}

bool make_reduce(ProgramBuilder& b, Step& s) { return make_reduce_of(b, s, ranked); }

/// A variance of a program input no step wrote: a computed value may hold rows of equal values
/// (expand, a broadcast copy_, fill_), whose variance is 0 eagerly and the square of a reordered
/// mean's rounding compiled, with nothing in the reference to scale the difference by.
bool make_var(ProgramBuilder& b, Step& s) { return make_reduce_of(b, s, ranked, true); }

/// A product of a few values only: a long one overflows to Inf in one order and meets a zero
/// first in another (0 or NaN), an honest difference.
bool make_prod(ProgramBuilder& b, Step& s) {
  return make_reduce_of(b, s, [](const Tensor& t) { return ranked(t) && t.numel() <= 8; });
}

bool make_reduce_one(ProgramBuilder& b, Step& s) {
  auto v = b.pick(ranked);
  if (!v) return false;
  s.operands = {*v};
  s.ints = {random_dim(b, b.tensor(*v)), b.coin(0.5)};
  return true;
}

bool make_dim(ProgramBuilder& b, Step& s) {
  auto v = b.pick(float_ranked);
  if (!v) return false;
  s.operands = {*v};
  s.ints = {random_dim(b, b.tensor(*v))};
  return true;
}

bool make_permute(ProgramBuilder& b, Step& s) {
  auto v = b.pick([](const Tensor& t) { return t.dim() >= 2; });
  if (!v) return false;
  s.operands = {*v};
  s.ints.resize(static_cast<size_t>(b.tensor(*v).dim()));
  std::iota(s.ints.begin(), s.ints.end(), 0);
  for (size_t k = s.ints.size(); k > 1; --k)
    std::swap(s.ints[k - 1],
              s.ints[static_cast<size_t>(b.uniform(0, static_cast<int64_t>(k) - 1))]);
  return true;
}

bool make_slice(ProgramBuilder& b, Step& s) {
  auto v = b.pick(ranked);
  if (!v) return false;
  const Tensor& t = b.tensor(*v);
  int64_t d = random_dim(b, t);
  int64_t size = t.size(d);
  int64_t start = b.uniform(0, std::max<int64_t>(size - 1, 0));
  int64_t end = b.coin(0.2) ? size + 3 : b.uniform(start, size);
  s.operands = {*v};
  s.ints = {d, start, end, b.uniform(1, 3)};
  return true;
}

bool make_select(ProgramBuilder& b, Step& s) {
  auto v = b.pick([](const Tensor& t) { return t.dim() >= 1 && t.numel() > 0; });
  if (!v) return false;
  const Tensor& t = b.tensor(*v);
  int64_t d = random_dim(b, t);
  s.operands = {*v};
  s.ints = {d, b.uniform(-t.size(d), t.size(d) - 1)};
  return true;
}

bool make_expand(ProgramBuilder& b, Step& s) {
  auto v = b.pick([](const Tensor& t) {
    return std::count(t.sizes().begin(), t.sizes().end(), 1) > 0 || t.dim() < 3;
  });
  if (!v) return false;
  Shape sizes = b.tensor(*v).sizes();
  for (int64_t& d : sizes)
    if (d == 1 && b.coin(0.7)) d = b.uniform(2, 5);
  if (sizes.size() < 4 && b.coin(0.4)) sizes.insert(sizes.begin(), b.uniform(1, 3));
  s.operands = {*v};
  s.ints = sizes;
  return true;
}

bool make_reshape(ProgramBuilder& b, Step& s) {
  auto v = b.pick(any);
  if (!v) return false;
  Shape sizes = b.tensor(*v).sizes();
  s.operands = {*v};
  int kind = static_cast<int>(b.uniform(0, 2));
  if (kind == 0 || sizes.size() < 2) {
    sizes = {-1}; // flatten
  } else if (kind == 1) {
    size_t k = static_cast<size_t>(b.uniform(0, static_cast<int64_t>(sizes.size()) - 2));
    sizes[k] *= sizes[k + 1]; // merge two neighbours
    sizes.erase(sizes.begin() + static_cast<int64_t>(k) + 1);
  } else {
    size_t k = static_cast<size_t>(b.uniform(0, static_cast<int64_t>(sizes.size()) - 1));
    int64_t f = b.one_of<int64_t>({1, 2, 3});
    if (sizes[k] % f != 0) f = 1;
    sizes[k] /= f; // split one dim
    sizes.insert(sizes.begin() + static_cast<int64_t>(k), f);
  }
  if (sizes.size() > 1 && b.coin(0.3)) sizes[static_cast<size_t>(b.uniform(0, 1))] = -1;
  s.ints = sizes;
  return true;
}

bool make_squeeze_like(ProgramBuilder& b, Step& s) {
  auto v = b.pick(any);
  if (!v) return false;
  s.operands = {*v};
  s.ints = {b.uniform(-b.tensor(*v).dim() - 1, b.tensor(*v).dim())};
  return true;
}

bool make_in_place_binary(ProgramBuilder& b, Step& s) {
  auto a = b.coin(0.4) ? b.pick_input(any) : b.pick(any);
  if (!a) return false;
  s.operands = {*a, b.partner(b.tensor(*a), true)};
  return true;
}

/// A floating target and a source of its dtype and sizes: exp computed in a coarser dtype and
/// stored into a finer one would differ from the reference by the coarser rounding.
bool make_exp_into(ProgramBuilder& b, Step& s) {
  auto a = b.coin(0.4) ? b.pick_input(floating) : b.pick(floating);
  if (!a) return false;
  const Tensor t = b.tensor(*a);
  auto same =
      b.pick([&](const Tensor& o) { return o.dtype() == t.dtype() && o.sizes() == t.sizes(); });
  s.operands = {*a, same ? *same : b.new_input(t.sizes(), t.dtype())};
  return true;
}

bool make_in_place_unary(ProgramBuilder& b, Step& s) {
  auto a = b.coin(0.4) ? b.pick_input(any) : b.pick(any);
  if (!a) return false;
  s.operands = {*a};
  s.ints = {b.uniform(-2, 0), b.uniform(0, 3)};
  s.number = b.one_of({0.0, 1.5, -2.0});
  return true;
}

bool make_in_place_mask(ProgramBuilder& b, Step& s) {
  auto a = b.coin(0.4) ? b.pick_input(any) : b.pick(any);
  if (!a) return false;
  Shape sizes = b.tensor(*a).sizes();
  for (int64_t& d : sizes)
    if (b.coin(0.3)) d = 1;
  s.operands = {*a, b.new_input(sizes, DType::bool_)};
  s.number = b.one_of({0.0, -1.0, 2.5});
  return true;
}

bool make_matmul(ProgramBuilder& b, Step& s) {
  auto a = b.pick(float_ranked);
  if (!a) return false;
  const Tensor& t = b.tensor(*a);
  int64_t k = t.size(-1);
  Shape w = {k, b.one_of<int64_t>({1, 3, 8, 16, 17})};
  if (b.coin(0.2))
    w = {k};
  else if (t.dim() >= 3 && b.coin(0.3))
    w.insert(w.begin(), t.size(-3));
  s.operands = {*a, b.new_input(w, b.coin(0.8) ? t.dtype() : b.random_dtype(true))};
  return true;
}

bool make_linear(ProgramBuilder& b, Step& s) {
  auto a = b.pick(float_ranked);
  if (!a) return false;
  const Tensor& t = b.tensor(*a);
  int64_t out = b.one_of<int64_t>({1, 4, 8, 16, 33});
  s.operands = {*a, b.new_input({out, t.size(-1)}, t.dtype())};
  if (b.coin(0.7)) s.operands.push_back(b.new_input({out}, t.dtype()));
  return true;
}

/// scaled_dot_product_attention: queries [..., L, D] (a value of the program), keys
/// [..., S, D] and values [..., S, E] of its batch dims; causal, or with a boolean mask, or
/// neither (ints: causal, masked).
bool make_attention(ProgramBuilder& b, Step& s) {
  auto q = b.pick([](const Tensor& t) { return float_ranked(t) && t.dim() >= 2; });
  if (!q) return false;
  const Tensor& t = b.tensor(*q);
  Shape k(t.sizes().begin(), t.sizes().end()), v = k;
  const int64_t keys = b.coin(0.5) ? t.size(-2) : b.uniform(1, 40);
  k[k.size() - 2] = v[v.size() - 2] = keys;
  v.back() = b.one_of<int64_t>({1, 5, 8, 16});
  const DType dt = t.dtype();
  s.operands = {*q, b.new_input(k, dt), b.new_input(v, dt)};
  const bool causal = b.coin(0.5);
  const bool masked = !causal && b.coin(0.4);
  if (masked) s.operands.push_back(b.new_input({t.size(-2), keys}, DType::bool_));
  s.ints = {causal ? 1 : 0, masked ? 1 : 0};
  return true;
}

bool make_conv2d(ProgramBuilder& b, Step& s) {
  auto x = b.coin(0.5) ? b.pick(four_d) : std::nullopt;
  ValueRef in = x ? *x
                  : b.new_input({b.uniform(1, 2), b.one_of<int64_t>({1, 2, 3, 4}), b.uniform(3, 9),
                                 b.uniform(3, 9)},
                                b.coin(0.8) ? DType::f32 : b.random_dtype(true));
  const Tensor& t = b.tensor(in);
  int64_t c = t.size(1);
  int64_t groups = c > 0 && b.coin(0.3) ? c : 1;
  int64_t out = groups * b.uniform(1, 3);
  int64_t kh = b.uniform(1, 3), kw = b.uniform(1, 3);
  s.operands = {in, b.new_input({out, c / groups, kh, kw}, t.dtype())};
  if (b.coin(0.6)) s.operands.push_back(b.new_input({out}, t.dtype()));
  s.ints = {b.uniform(1, 2), b.uniform(0, 1), b.uniform(1, 2), groups}; // stride pad dil groups
  return true;
}

bool make_pool(ProgramBuilder& b, Step& s) {
  auto x = b.pick(four_d);
  if (!x) return false;
  s.operands = {*x};
  s.ints = {b.uniform(1, 3), b.uniform(1, 2), b.uniform(0, 1)}; // kernel stride pad
  return true;
}

/// A layer norm of a program input (as make_var: on equal values it divides a rounding
/// difference by sqrt(eps)).
bool make_layer_norm(ProgramBuilder& b, Step& s) {
  auto v = b.pick_input(float_ranked, /*pristine=*/true);
  if (!v) return false;
  const Tensor& t = b.tensor(*v);
  int64_t n = t.dim() >= 2 && b.coin(0.3) ? 2 : 1;
  Shape norm(t.sizes().end() - n, t.sizes().end());
  s.operands = {*v};
  if (b.coin(0.7)) {
    s.operands.push_back(b.new_input(norm, t.dtype()));
    s.operands.push_back(b.new_input(norm, t.dtype()));
  }
  s.ints = {n};
  return true;
}

bool make_cat(ProgramBuilder& b, Step& s) {
  auto v = b.pick(ranked);
  if (!v) return false;
  const Tensor& t = b.tensor(*v);
  int64_t d = random_dim(b, t);
  Shape other = t.sizes();
  other[static_cast<size_t>(d < 0 ? d + t.dim() : d)] = b.uniform(0, 4);
  s.operands = {*v, b.new_input(other, b.coin(0.8) ? t.dtype() : b.random_dtype(false))};
  s.ints = {d};
  return true;
}

bool make_pad(ProgramBuilder& b, Step& s) {
  auto v = b.pick(ranked);
  if (!v) return false;
  s.operands = {*v};
  s.ints = {b.uniform(0, 2), b.uniform(0, 2)};
  if (b.tensor(*v).dim() >= 2 && b.coin(0.5)) {
    s.ints.push_back(b.uniform(0, 1));
    s.ints.push_back(b.uniform(0, 2));
  }
  s.number = b.one_of({0.0, 1.5});
  return true;
}

// ---- appliers that read parameters ----

Shape tail(const Step& s, size_t from) {
  return Shape(s.ints.begin() + static_cast<int64_t>(from), s.ints.end());
}

Tensor in_place(const Tensor& t, auto&& write) {
  Tensor self = t;
  write(self);
  return self;
}

constexpr RuleTraits kExact{};
constexpr RuleTraits kInexact{.exact = false};
constexpr RuleTraits kAmplifies{.exact = false, .needs_exact = true};
constexpr RuleTraits kStep{.needs_exact = true}; // or correctly rounded, ill-conditioned near 0
constexpr RuleTraits kSums{.exact = false, .sums = true};
constexpr RuleTraits kSumsOfExact{.exact = false, .needs_exact = true, .sums = true};
constexpr RuleTraits kWrite{.in_place = true};
constexpr RuleTraits kWriteOfExact{.needs_exact = true, .in_place = true};
constexpr RuleTraits kWriteExp{.exact = false, .needs_exact = true, .in_place = true};

const Rule kRules[] = {
    // pointwise, exact
    {"neg", "pointwise", kExact, make_unary, [](X x, const Step&) { return neg(x[0]); }},
    {"abs", "pointwise", kExact, make_unary, [](X x, const Step&) { return abs(x[0]); }},
    {"relu", "pointwise", kExact, make_unary, [](X x, const Step&) { return relu(x[0]); }},
    {"sqrt", "pointwise", kStep, make_unary, [](X x, const Step&) { return sqrt(x[0]); }},
    {"clamp", "pointwise", kExact, make_clamp,
     [](X x, const Step& s) { return clamp(x[0], Scalar(s.ints[0]), Scalar(s.ints[1])); }},
    {"add", "pointwise", kExact, make_binary, [](X x, const Step&) { return add(x[0], x[1]); }},
    {"sub", "pointwise", kExact, make_binary, [](X x, const Step&) { return sub(x[0], x[1]); }},
    {"mul", "pointwise", kExact, make_binary, [](X x, const Step&) { return mul(x[0], x[1]); }},
    {"div", "pointwise", kStep, make_binary, [](X x, const Step&) { return div(x[0], x[1]); }},
    {"maximum", "pointwise", kExact, make_binary,
     [](X x, const Step&) { return maximum(x[0], x[1]); }},
    {"minimum", "pointwise", kExact, make_binary,
     [](X x, const Step&) { return minimum(x[0], x[1]); }},
    {"add_scalar", "pointwise", kExact, make_scalar_op,
     [](X x, const Step& s) { return add(x[0], step_scalar(s)); }},
    {"mul_scalar", "pointwise", kExact, make_scalar_op,
     [](X x, const Step& s) { return mul(step_scalar(s), x[0]); }},
    {"where", "pointwise", kExact, make_where,
     [](X x, const Step&) { return where(x[0], x[1], x[2]); }},
    {"masked_fill", "pointwise", kExact, make_masked_fill,
     [](X x, const Step& s) { return masked_fill(x[0], x[1], step_scalar(s)); }},
    // pointwise through vector math
    {"exp", "pointwise", kAmplifies, make_unary, [](X x, const Step&) { return exp(x[0]); }},
    {"log", "pointwise", kAmplifies, make_unary, [](X x, const Step&) { return log(x[0]); }},
    {"rsqrt", "pointwise", kAmplifies, make_unary, [](X x, const Step&) { return rsqrt(x[0]); }},
    {"sin", "pointwise", kAmplifies, make_unary, [](X x, const Step&) { return sin(x[0]); }},
    {"cos", "pointwise", kAmplifies, make_unary, [](X x, const Step&) { return cos(x[0]); }},
    {"tanh", "pointwise", kInexact, make_unary, [](X x, const Step&) { return tanh(x[0]); }},
    {"sigmoid", "pointwise", kInexact, make_unary, [](X x, const Step&) { return sigmoid(x[0]); }},
    {"erf", "pointwise", kInexact, make_unary, [](X x, const Step&) { return erf(x[0]); }},
    {"gelu", "pointwise", kInexact, make_unary_float,
     [](X x, const Step&) { return gelu(x[0]); }},
    {"gelu_tanh", "pointwise", kInexact, make_unary_float,
     [](X x, const Step&) { return gelu(x[0], "tanh"); }},
    {"silu", "pointwise", kInexact, make_unary_float, [](X x, const Step&) { return silu(x[0]); }},
    {"pow", "pointwise", kAmplifies, make_binary, [](X x, const Step&) { return pow(x[0], x[1]); }},
    {"pow_scalar", "pointwise", kAmplifies, make_scalar_op,
     [](X x, const Step& s) { return pow(x[0], step_scalar(s)); }},
    // pointwise, discontinuous: only on exact values
    {"floor", "pointwise", kStep, make_unary, [](X x, const Step&) { return floor(x[0]); }},
    {"ceil", "pointwise", kStep, make_unary, [](X x, const Step&) { return ceil(x[0]); }},
    {"round", "pointwise", kStep, make_unary, [](X x, const Step&) { return round(x[0]); }},
    {"cast", "pointwise", kStep, make_cast,
     [](X x, const Step& s) { return x[0].to(static_cast<DType>(s.ints[0])); }},
    {"logical_not", "pointwise", kStep, make_unary,
     [](X x, const Step&) { return logical_not(x[0]); }},
    {"eq", "pointwise", kStep, make_binary, [](X x, const Step&) { return eq(x[0], x[1]); }},
    {"lt", "pointwise", kStep, make_binary, [](X x, const Step&) { return lt(x[0], x[1]); }},
    {"ge", "pointwise", kStep, make_binary, [](X x, const Step&) { return ge(x[0], x[1]); }},
    {"ne_scalar", "pointwise", kStep, make_scalar_op,
     [](X x, const Step& s) { return ne(x[0], step_scalar(s)); }},
    {"logical_and", "pointwise", kStep, make_binary,
     [](X x, const Step&) { return logical_and(x[0], x[1]); }},
    {"logical_or", "pointwise", kStep, make_binary,
     [](X x, const Step&) { return logical_or(x[0], x[1]); }},
    {"remainder", "pointwise", kStep, make_int_divisor,
     [](X x, const Step& s) { return remainder(x[0], step_scalar(s)); }},
    {"floor_divide", "pointwise", kStep, make_int_divisor,
     [](X x, const Step& s) { return floor_divide(x[0], step_scalar(s)); }},
    // reductions
    {"sum", "reduction", kSums, make_reduce,
     [](X x, const Step& s) { return sum(x[0], tail(s, 1), s.ints[0] != 0); }},
    {"mean", "reduction", kSums, make_reduce,
     [](X x, const Step& s) { return mean(x[0], tail(s, 1), s.ints[0] != 0); }},
    {"prod", "reduction", kSums, make_prod,
     [](X x, const Step& s) { return prod(x[0], tail(s, 1), s.ints[0] != 0); }},
    {"amax", "reduction", kExact, make_reduce,
     [](X x, const Step& s) { return amax(x[0], tail(s, 1), s.ints[0] != 0); }},
    {"amin", "reduction", kExact, make_reduce,
     [](X x, const Step& s) { return amin(x[0], tail(s, 1), s.ints[0] != 0); }},
    {"var", "reduction", kSumsOfExact, make_var,
     [](X x, const Step& s) { return var(x[0], tail(s, 1), s.ints[0] != 0); }},
    {"argmax", "reduction", kStep, make_reduce_one,
     [](X x, const Step& s) { return argmax(x[0], s.ints[0], s.ints[1] != 0); }},
    {"argmin", "reduction", kStep, make_reduce_one,
     [](X x, const Step& s) { return argmin(x[0], s.ints[0], s.ints[1] != 0); }},
    {"cumsum", "reduction", kSums, make_reduce_one,
     [](X x, const Step& s) { return cumsum(x[0], s.ints[0]); }},
    // views and copies
    {"permute", "view", kExact, make_permute,
     [](X x, const Step& s) { return x[0].permute(s.ints); }},
    {"slice", "view", kExact, make_slice,
     [](X x, const Step& s) { return x[0].slice(s.ints[0], s.ints[1], s.ints[2], s.ints[3]); }},
    {"select", "view", kExact, make_select,
     [](X x, const Step& s) { return x[0].select(s.ints[0], s.ints[1]); }},
    {"expand", "view", kExact, make_expand,
     [](X x, const Step& s) { return x[0].expand(s.ints); }},
    {"reshape", "view", kExact, make_reshape,
     [](X x, const Step& s) { return x[0].reshape(s.ints); }},
    {"view", "view", kExact, make_reshape, [](X x, const Step& s) { return x[0].view(s.ints); }},
    {"unsqueeze", "view", kExact, make_squeeze_like,
     [](X x, const Step& s) { return x[0].unsqueeze(s.ints[0]); }},
    {"squeeze", "view", kExact, make_unary, [](X x, const Step&) { return x[0].squeeze(); }},
    {"contiguous", "view", kExact, make_unary,
     [](X x, const Step&) { return x[0].contiguous(); }},
    // in place, on inputs and intermediates
    {"add_", "inplace", kWrite, make_in_place_binary,
     [](X x, const Step&) { return in_place(x[0], [&](Tensor& t) { t.add_(x[1]); }); }},
    {"sub_", "inplace", kWrite, make_in_place_binary,
     [](X x, const Step&) { return in_place(x[0], [&](Tensor& t) { t.sub_(x[1]); }); }},
    {"mul_", "inplace", kWrite, make_in_place_binary,
     [](X x, const Step&) { return in_place(x[0], [&](Tensor& t) { t.mul_(x[1]); }); }},
    {"div_", "inplace", kWriteOfExact, make_in_place_binary,
     [](X x, const Step&) { return in_place(x[0], [&](Tensor& t) { t.div_(x[1]); }); }},
    {"copy_", "inplace", kWrite, make_in_place_binary,
     [](X x, const Step&) { return in_place(x[0], [&](Tensor& t) { t.copy_(x[1]); }); }},
    {"relu_", "inplace", kWrite, make_in_place_unary,
     [](X x, const Step&) { return in_place(x[0], [](Tensor& t) { t.relu_(); }); }},
    {"clamp_", "inplace", kWrite, make_in_place_unary, [](X x, const Step& s) {
       return in_place(x[0], [&](Tensor& t) { t.clamp_(Scalar(s.ints[0]), Scalar(s.ints[1])); });
     }},
    {"fill_", "inplace", kWrite, make_in_place_unary,
     [](X x, const Step& s) { return in_place(x[0], [&](Tensor& t) { t.fill_(s.number); }); }},
    {"masked_fill_", "inplace", kWrite, make_in_place_mask, [](X x, const Step& s) {
       return in_place(x[0], [&](Tensor& t) { t.masked_fill_(x[1], step_scalar(s)); });
     }},
    {"exp_into", "inplace", kWriteExp, make_exp_into,
     [](X x, const Step&) { return in_place(x[0], [&](Tensor& t) { t.copy_(exp(x[1])); }); }},
    // contractions
    {"matmul", "matmul", kSums, make_matmul, [](X x, const Step&) { return matmul(x[0], x[1]); }},
    {"linear", "matmul", kSums, make_linear, [](X x, const Step&) {
       return linear(x[0], x[1], x.size() > 2 ? x[2] : Tensor());
     }},
    {"attention", "matmul", kSums, make_attention, [](X x, const Step& s) {
       return scaled_dot_product_attention(x[0], x[1], x[2], s.ints[1] ? x[3] : Tensor(), 0.0,
                                           s.ints[0] != 0);
     }},
    {"conv2d", "conv", kSums, make_conv2d, [](X x, const Step& s) {
       return conv2d(x[0], x[1], x.size() > 2 ? x[2] : Tensor(), {s.ints[0], s.ints[0]},
                     {s.ints[1], s.ints[1]}, {s.ints[2], s.ints[2]}, s.ints[3]);
     }},
    {"max_pool2d", "conv", kExact, make_pool, [](X x, const Step& s) {
       return max_pool2d(x[0], {s.ints[0], s.ints[0]}, {s.ints[1], s.ints[1]},
                         {s.ints[2], s.ints[2]});
     }},
    {"avg_pool2d", "conv", kSums, make_pool, [](X x, const Step& s) {
       return avg_pool2d(x[0], {s.ints[0], s.ints[0]}, {s.ints[1], s.ints[1]},
                         {s.ints[2], s.ints[2]});
     }},
    // normalisations
    {"softmax", "norm", kSums, make_dim,
     [](X x, const Step& s) { return softmax(x[0], s.ints[0]); }},
    {"log_softmax", "norm", kSums, make_dim,
     [](X x, const Step& s) { return log_softmax(x[0], s.ints[0]); }},
    {"layer_norm", "norm", kSumsOfExact, make_layer_norm, [](X x, const Step& s) {
       Shape norm(x[0].sizes().end() - s.ints[0], x[0].sizes().end());
       return layer_norm(x[0], norm, x.size() > 1 ? x[1] : Tensor(),
                         x.size() > 2 ? x[2] : Tensor());
     }},
    // data movement (eager kernels inside compiled plans)
    {"cat", "data", kExact, make_cat, [](X x, const Step& s) { return cat({x[0], x[1]}, s.ints[0]); }},
    {"pad", "data", kExact, make_pad,
     [](X x, const Step& s) { return pad(x[0], s.ints, s.number); }},
};

/// How often each group is drawn, relative to the others (pointwise rules are many).
double group_weight(std::string_view g) {
  if (g == "pointwise") return 0.6;
  if (g == "view") return 1.5;
  if (g == "inplace") return 1.0;
  return 1.2;
}

} // namespace

std::span<const Rule> fuzz_rules() { return kRules; }

const Rule* find_rule(std::string_view name) {
  for (const Rule& r : kRules)
    if (r.name == name) return &r;
  return nullptr;
}

std::vector<const Rule*> select_rules(const std::vector<std::string>& names) {
  std::vector<const Rule*> out;
  for (const Rule& r : kRules) {
    bool wanted = names.empty();
    for (const std::string& n : names)
      wanted = wanted || n == r.name || n == r.group;
    if (wanted) out.push_back(&r);
  }
  return out;
}

ProgramBuilder::ProgramBuilder(uint64_t seed, Program& program) : rng_(seed), p_(program) {}

int64_t ProgramBuilder::uniform(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
}

bool ProgramBuilder::coin(double p) { return std::bernoulli_distribution(p)(rng_); }

std::optional<ValueRef> ProgramBuilder::pick(const std::function<bool(const Tensor&)>& ok) {
  std::vector<size_t> fits;
  for (size_t k = 0; k < slots_.size(); ++k)
    if ((!need_exact_ || slots_[k].exact) && ok(slots_[k].tensor)) fits.push_back(k);
  if (fits.empty()) return std::nullopt;
  // The latest value most of the time: chains of ops on one value are what fusion sees.
  size_t k = coin(0.6) ? fits.back() : fits[static_cast<size_t>(uniform(0, fits.size() - 1))];
  return slots_[k].ref;
}

std::optional<ValueRef> ProgramBuilder::pick_input(const std::function<bool(const Tensor&)>& ok,
                                                   bool pristine) {
  std::vector<size_t> fits;
  for (size_t k = 0; k < slots_.size(); ++k)
    if (slots_[k].ref.input && (!pristine || !slots_[k].written) && ok(slots_[k].tensor))
      fits.push_back(k);
  if (fits.empty()) return std::nullopt;
  return slots_[fits[static_cast<size_t>(uniform(0, fits.size() - 1))]].ref;
}

Tensor ProgramBuilder::tensor(ValueRef r) const {
  for (const Slot& s : slots_)
    if (s.ref == r) return s.tensor;
  KILN_UNREACHABLE("fuzz: a value the program does not hold");
}

ValueRef ProgramBuilder::new_input(Shape sizes, DType dtype, Layout layout) {
  size_t index = p_.inputs.size();
  p_.inputs.push_back({sizes, dtype, layout});
  ValueRef r{true, static_cast<int>(index)};
  Tensor t =
      make_input(sizes, layout_strides(sizes, layout), dtype, p_.input_seed, index, p_.specials);
  slots_.push_back({r, t, true});
  return r;
}

Shape ProgramBuilder::random_shape(int min_rank, int max_rank) {
  Shape s(static_cast<size_t>(uniform(min_rank, max_rank)));
  int64_t numel = 1;
  for (int64_t& d : s) {
    d = coin(0.02) ? 0 : one_of<int64_t>({1, 2, 3, 4, 5, 7, 8, 16, 17, 33});
    if (numel * d > 4096) d = 1;
    numel *= std::max<int64_t>(d, 1);
  }
  return s;
}

DType ProgramBuilder::random_dtype(bool floating_only) {
  if (floating_only || coin(0.7))
    return one_of({DType::f32, DType::f32, DType::f32, DType::f64, DType::f16, DType::bf16});
  return one_of({DType::i32, DType::i64, DType::bool_});
}

ValueRef ProgramBuilder::partner(const Tensor& a, bool into_a) {
  if (coin(0.4)) {
    auto v = pick([&](const Tensor& t) {
      if (t.dim() > a.dim() && into_a) return false;
      try {
        return !into_a || broadcast_shapes(a.sizes(), t.sizes(), "fuzz") == a.sizes();
      } catch (const Error&) {
        return false;
      }
    });
    if (v) return *v;
  }
  Shape sizes = a.sizes();
  for (int64_t& d : sizes)
    if (coin(0.25)) d = 1;
  while (!sizes.empty() && coin(0.2))
    sizes.erase(sizes.begin());
  if (!into_a && sizes.size() < 4 && coin(0.1)) sizes.insert(sizes.begin(), 2);
  return new_input(sizes, coin(0.6) ? a.dtype() : random_dtype(false));
}

void ProgramBuilder::mark_written(const Tensor& written, bool exact) {
  const Storage* storage = written.impl().storage.get();
  for (Slot& s : slots_)
    if (s.tensor.impl().storage.get() == storage) {
      s.written = true;
      s.exact = s.exact && exact;
    }
}

bool ProgramBuilder::loses_precision(const Tensor& out, std::span<const ValueRef> operands) const {
  // The rule's floor is a few eps of the output's dtype: an f32 rounding difference carried
  // into an f64 result would exceed it honestly.
  if (!is_floating(out.dtype())) return false;
  for (ValueRef r : operands)
    for (const Slot& sl : slots_)
      if (sl.ref == r && !sl.exact && is_floating(sl.tensor.dtype()) &&
          dtype_eps(sl.tensor.dtype()) > dtype_eps(out.dtype()))
        return true;
  return false;
}

std::optional<ProgramBuilder::Slot> ProgramBuilder::apply(const Rule& rule, const Step& s) {
  std::vector<Tensor> x;
  bool exact = true, floating_in = false;
  for (ValueRef r : s.operands) {
    x.push_back(tensor(r));
    floating_in = floating_in || is_floating(x.back().dtype());
    for (const Slot& sl : slots_)
      if (sl.ref == r) exact = exact && sl.exact;
  }
  Tensor out;
  try {
    out = rule.apply(x, s);
  } catch (const Error&) {
    return std::nullopt; // not a valid use of the op (shapes, dtypes)
  }
  // Integer and bool arithmetic is exact whatever the rule (a sum of integers); anything
  // computed in floating point (sin of a bool) rounds.
  exact = exact && (rule.traits.exact || (!floating_in && !is_floating(out.dtype())));
  // An inexact value stored as an integer (copy_ into an int tensor) is a discontinuity.
  if (loses_precision(out, s.operands) || (!exact && !is_floating(out.dtype())))
    return std::nullopt;
  return Slot{ValueRef{false, static_cast<int>(p_.steps.size())}, out, exact};
}

bool ProgramBuilder::try_step(const Rule& rule) {
  const size_t inputs = p_.inputs.size(), slots = slots_.size();
  Step s{std::string(rule.name), {}, {}, 0, {}, DType::f32};
  need_exact_ = rule.traits.needs_exact;
  bool made = rule.make(*this, s);
  need_exact_ = false;
  std::optional<Slot> result = made ? apply(rule, s) : std::nullopt;
  if (!result) { // draw another step
    p_.inputs.resize(inputs);
    slots_.resize(slots);
    return false;
  }
  s.sizes = result->tensor.sizes();
  s.dtype = result->tensor.dtype();
  p_.steps.push_back(std::move(s));
  slots_.push_back(*result);
  if (rule.traits.in_place) mark_written(result->tensor, result->exact);
  return true;
}

void ProgramBuilder::choose_outputs() {
  std::vector<bool> used(p_.steps.size(), false);
  for (const Step& s : p_.steps)
    for (ValueRef r : s.operands)
      if (!r.input) used[static_cast<size_t>(r.index)] = true;
  for (size_t k = 0; k < p_.steps.size(); ++k) {
    const Rule* rule = find_rule(p_.steps[k].rule);
    if (!used[k] && !rule->traits.in_place) p_.outputs.push_back({false, static_cast<int>(k)});
  }
  if (p_.outputs.empty() && !p_.steps.empty())
    p_.outputs.push_back({false, static_cast<int>(p_.steps.size() - 1)});
}

void ProgramBuilder::generate(int steps, const std::vector<const Rule*>& rules) {
  KILN_ASSERT(!rules.empty(), "fuzz: no rules to draw from");
  std::vector<double> weights;
  for (const Rule* r : rules)
    weights.push_back(group_weight(r->group));
  std::discrete_distribution<size_t> draw(weights.begin(), weights.end());
  for (int k = 0, n = static_cast<int>(uniform(1, 3)); k < n; ++k)
    new_input(random_shape(0, 4), random_dtype(false),
              one_of({Layout::contiguous, Layout::contiguous, Layout::reversed, Layout::stepped}));
  for (int attempts = 0; static_cast<int>(p_.steps.size()) < steps && attempts < 40 * steps;
       ++attempts)
    try_step(*rules[draw(rng_)]);
  choose_outputs();
}

Program generate_program(uint64_t seed, uint64_t index, const std::vector<const Rule*>& rules) {
  Program p;
  // splitmix64 of (seed, index): programs of one run are independent of each other.
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  p.input_seed = z ^ (z >> 31);
  ProgramBuilder b(p.input_seed, p);
  p.specials = b.coin(0.3);
  b.generate(static_cast<int>(b.uniform(1, 10)), rules);
  return p;
}

} // namespace kiln::tools
