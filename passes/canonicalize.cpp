// canonicalize: algebraic simplifications that keep every result bit-identical and its type.
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "ir/builder.h"
#include "ir/infer.h"
#include "passes/aliasing.h"
#include "passes/passes.h"
#include "runtime/ops/dispatch.h"

namespace kiln::passes {

namespace {

/// Element 0 of data of dtype t, converted to double (exact for every dtype but large
/// integers, which are never 0 or 1; the sign of a zero is kept).
double element_as_double(const void* data, DType t) {
  return visit_dtype(t, [&](auto tag) -> double {
    using T = decltype(tag);
    T e;
    std::memcpy(&e, data, sizeof(T));
    return static_cast<double>(static_cast<compute_t<T>>(e));
  });
}

/// The value every element of v holds, when v is a constant input with at least one element,
/// all bitwise equal, or a `full` node (its value as the eager kernel stores it in its dtype).
std::optional<double> splat_value(const ir::Value* v) {
  if (v->is_constant()) {
    const Tensor& t = v->constant();
    const int64_t n = t.numel();
    if (n < 1) return std::nullopt;
    const auto* p = static_cast<const unsigned char*>(t.raw_data());
    const auto size = static_cast<size_t>(t.itemsize());
    for (int64_t k = 1; k < n; ++k)
      if (std::memcmp(p + static_cast<size_t>(k) * size, p, size) != 0) return std::nullopt;
    return element_as_double(p, t.dtype());
  }
  const ir::Node* n = v->producer();
  if (!n || n->op() != Op::full) return std::nullopt;
  // The kernel decides what the scalar becomes in the dtype (1.5 in i32 is 1): ask it.
  std::vector<Tensor> none;
  Attrs one_element{std::vector<int64_t>{}, n->attrs().scalar(1), n->attrs().dtype(2)};
  try {
    Tensor e = dispatch(Op::full, none, one_element).at(0);
    return element_as_double(e.raw_data(), e.dtype());
  } catch (const Error&) {
    return std::nullopt;
  }
}

bool is_one(const ir::Value* v) {
  std::optional<double> s = splat_value(v);
  return s && *s == 1.0;
}

/// A zero of either sign (for integer and bool results, where there is only one).
bool is_zero(const ir::Value* v) {
  std::optional<double> s = splat_value(v);
  return s && *s == 0.0;
}

/// A zero of the given sign, as it reaches a floating computation (an integer 0 is +0.0).
bool is_signed_zero(const ir::Value* v, bool negative) {
  std::optional<double> s = splat_value(v);
  return s && *s == 0.0 && std::signbit(*s) == negative;
}

/// Whether the uses of `old`, a fresh result, may move to `replacement`: a graph output must
/// not become an alias of a graph input or of another output, which eager code would have
/// returned as a separate tensor.
bool may_forward(const ir::Graph& g, const ir::Value* old, const ir::Value* replacement) {
  if (!is_graph_output(old)) return true;
  const ir::Value* root = storage_root(replacement);
  if (root->is_input()) return false;
  for (const ir::Value* o : g.outputs())
    if (o != old && storage_root(o) == root) return false;
  return true;
}

/// dims wrapped into [0, rank), or nullopt when one is out of range.
std::optional<std::vector<int64_t>> wrap_dims(const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> r;
  r.reserve(dims.size());
  for (int64_t d : dims) {
    int64_t w = d < 0 ? d + rank : d;
    if (w < 0 || w >= rank) return std::nullopt;
    r.push_back(w);
  }
  return r;
}

bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

class Canonicalizer {
public:
  explicit Canonicalizer(ir::Graph& g) : g_(g), b_(g) {}

  /// The value that may replace n's result, or null. Its type equals the result's.
  ir::Value* simplify(ir::Node* n) {
    switch (n->op()) {
    case Op::mul:
      return fresh(n, binary_identity(n, true, [](const ir::Value* v) { return is_one(v); }));
    case Op::add: return fresh(n, simplify_add(n));
    case Op::sub: return simplify_sub(n);
    case Op::neg: return fresh(n, simplify_neg(n));
    case Op::cast: return fresh(n, same_type(n, n->input(0)));
    case Op::permute: return simplify_permute(n);
    case Op::view: return simplify_view(n);
    case Op::expand: return same_type_and_sizes(n, n->input(0));
    case Op::max_pool2d: return simplify_max_pool(n);
    case Op::copy: return simplify_copy(n);
    default: return nullptr;
    }
  }

private:
  const ir::Type& result_type(const ir::Node* n) const { return n->output()->type(); }

  /// v when its type is exactly n's result type, else null.
  ir::Value* same_type(const ir::Node* n, ir::Value* v) const {
    return v && v->type() == result_type(n) ? v : nullptr;
  }

  /// v when n's result has v's sizes (so a view op of v is the identity) and v's type.
  ir::Value* same_type_and_sizes(const ir::Node* n, ir::Value* v) const {
    return v && v->type().sizes() == result_type(n).sizes() ? same_type(n, v) : nullptr;
  }

  /// A replacement of a fresh result (an elementwise op) by an existing value: refused when
  /// it would make a graph output alias an input or another output.
  ir::Value* fresh(const ir::Node* n, ir::Value* replacement) const {
    return replacement && may_forward(g_, n->output(), replacement) ? replacement : nullptr;
  }

  /// op(x, e) or (when commutative) op(e, x) with e an identity element of the op: x.
  template <typename IsUnit>
  ir::Value* binary_identity(const ir::Node* n, bool commutative, IsUnit is_unit) const {
    for (size_t i = 0; i < (commutative ? 2u : 1u); ++i) {
      ir::Value* x = n->input(i);
      if (x->type() == result_type(n) && is_unit(n->input(1 - i))) return x;
    }
    return nullptr;
  }

  ir::Value* simplify_add(const ir::Node* n) const {
    // -0.0 is the only floating identity of +: -0.0 + 0.0 = +0.0.
    if (is_floating(result_type(n).dtype()))
      return binary_identity(n, true, [](const ir::Value* v) { return is_signed_zero(v, true); });
    return binary_identity(n, true, [](const ir::Value* v) { return is_zero(v); });
  }

  ir::Value* simplify_sub(ir::Node* n) {
    const DType t = result_type(n).dtype();
    if (n->input(0) == n->input(1) && is_integral(t)) {
      // x - x is 0 for integers (wrapping cannot change that), never for floats (NaN, Inf).
      std::vector<int64_t> sizes(result_type(n).sizes().begin(), result_type(n).sizes().end());
      return build(n, Op::full, {}, {sizes, Scalar(int64_t{0}), t});
    }
    // +0.0 is the floating identity of -: -0.0 - 0.0 = -0.0, but x - (-0.0) = x + 0.0.
    if (is_floating(t))
      return fresh(n, binary_identity(n, false,
                                      [](const ir::Value* v) { return is_signed_zero(v, false); }));
    return fresh(n, binary_identity(n, false, [](const ir::Value* v) { return is_zero(v); }));
  }

  ir::Value* simplify_neg(const ir::Node* n) const {
    const ir::Node* inner = n->input(0)->producer();
    if (!inner || inner->op() != Op::neg) return nullptr;
    return same_type(n, inner->input(0));
  }

  /// copy(x) -> x when nothing but the copy can see x's buffer: x is a fresh result of this
  /// graph (not an input or a constant), or views of one, each value on the way with one use,
  /// and x has the copy's type. Autograd's first gradient of a leaf is such a copy (the
  /// engine clones what the backward computed into .grad(): a bias's is a view of a sum).
  ir::Value* simplify_copy(const ir::Node* n) const {
    ir::Value* x = n->input(0);
    for (const ir::Value* v = x;; v = v->producer()->input(0)) {
      if (v->is_input() || live_uses(v) != 1) return nullptr;
      if (v->producer()->schema().kind != OpKind::view) break;
    }
    return fresh(n, same_type(n, x));
  }

  /// v's uses but those by nodes whose results are unused (left for dead-code-elimination:
  /// permute(permute(x)) became x earlier in this walk, the inner permute still reads x).
  static size_t live_uses(const ir::Value* v) {
    size_t n = 0;
    for (const ir::Use& u : v->uses()) {
      bool dead = u.kind == ir::Use::Kind::operand;
      for (size_t k = 0; dead && k < u.user->num_outputs(); ++k)
        dead = !u.user->output(k)->has_uses();
      n += dead ? 0 : 1;
    }
    return n;
  }

  ir::Value* simplify_permute(ir::Node* n) {
    ir::Value* x = n->input(0);
    const int64_t rank = x->type().rank();
    std::optional<std::vector<int64_t>> q = wrap_dims(n->attrs().ints(0), rank);
    if (!q) return nullptr;
    const ir::Node* inner = x->producer();
    if (!inner || inner->op() != Op::permute) return is_identity(*q) ? same_type(n, x) : nullptr;
    // result[i] = inner[q[i]] = base[p[q[i]]].
    ir::Value* base = inner->input(0);
    std::optional<std::vector<int64_t>> p = wrap_dims(inner->attrs().ints(0), rank);
    if (!p || p->size() != q->size()) return nullptr;
    std::vector<int64_t> r(q->size());
    for (size_t i = 0; i < r.size(); ++i)
      r[i] = (*p)[static_cast<size_t>((*q)[i])];
    if (is_identity(r))
      if (ir::Value* v = same_type(n, base)) return v;
    return build(n, Op::permute, {base}, {r});
  }

  ir::Value* simplify_view(ir::Node* n) {
    ir::Value* x = n->input(0);
    if (ir::Value* v = same_type_and_sizes(n, x)) return v;
    const ir::Node* inner = x->producer();
    if (!inner || inner->op() != Op::view) return nullptr;
    ir::Value* base = inner->input(0);
    if (ir::Value* v = same_type_and_sizes(n, base)) return v;
    return build(n, Op::view, {base}, n->attrs());
  }

  /// max_pool2d with windows that tile the input (kernel = stride, no padding or dilation,
  /// sizes divisible): amax over the window dims of a view [.., H/kh, kh, W/kw, kw]. The same
  /// elements in the same order (a window row by row), so the same maximum and the same
  /// first NaN; and a reduction the generated code fuses with what computes its operand.
  ir::Value* simplify_max_pool(ir::Node* n) {
    ir::Value* x = n->input(0);
    const ir::Type& t = x->type();
    const Attrs& a = n->attrs();
    const std::vector<int64_t>&k = a.ints(0), &s = a.ints(1), &p = a.ints(2), &d = a.ints(3);
    if ((t.rank() != 3 && t.rank() != 4) || !t.is_static() || t.numel() == 0 ||
        t.dtype() == DType::bool_ || k.size() != 2 || s != k || p != std::vector<int64_t>{0, 0} ||
        d != std::vector<int64_t>{1, 1})
      return nullptr;
    const int64_t h = t.sizes()[static_cast<size_t>(t.rank() - 2)];
    const int64_t w = t.sizes()[static_cast<size_t>(t.rank() - 1)];
    if (k[0] < 1 || k[1] < 1 || h % k[0] != 0 || w % k[1] != 0) return nullptr;
    std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end() - 2);
    sizes.insert(sizes.end(), {h / k[0], k[0], w / k[1], k[1]});
    const int64_t r = static_cast<int64_t>(sizes.size());
    if (!ir::infer_types(Op::view, std::span<const ir::Type>(&t, 1), Attrs{sizes}))
      return nullptr; // strides a view cannot take
    b_.set_insertion_point(n);
    b_.set_location(n->location());
    ir::Value* windows = b_.create(Op::view, {x}, Attrs{sizes});
    if (ir::Value* m =
            build(n, Op::amax, {windows}, Attrs{std::vector<int64_t>{r - 3, r - 1}, false}))
      return m;
    g_.erase(windows->producer());
    return nullptr;
  }

  /// A new node before n, built only when inference accepts it and gives exactly n's
  /// result type; else null (and nothing is created).
  ir::Value* build(const ir::Node* n, Op op, std::vector<ir::Value*> inputs, Attrs attrs) {
    Expected<std::vector<ir::Type>> types = ir::infer_types(op, inputs, attrs);
    if (!types || types->size() != 1 || (*types)[0] != result_type(n)) return nullptr;
    b_.set_insertion_point(const_cast<ir::Node*>(n));
    b_.set_location(n->location());
    return b_.create(op, std::move(inputs), std::move(attrs));
  }

  ir::Graph& g_;
  ir::Builder b_;
};

} // namespace

Expected<void> canonicalize(ir::Graph& g, PassContext& ctx) {
  Canonicalizer c(g);
  // Forward: a rewrite changes only the operands of later nodes, so chains (x * 1 * 1,
  // neg(neg(neg(neg(x)))), three permutes) simplify in one walk.
  for (ir::Node* n = g.first_node(); n;) {
    ir::Node* next = n->next();
    if (n->num_outputs() == 1) {
      if (ir::Value* r = c.simplify(n)) {
        KILN_ASSERT(r->type() == n->output()->type(), "canonicalize: ", n->name(),
                    " replaced by a value of type ", r->type().str(), " instead of ",
                    n->output()->type().str());
        n->output()->replace_all_uses_with(r);
        g.erase(n);
        ctx.changed = true;
      }
    }
    n = next;
  }
  return {};
}

} // namespace kiln::passes
