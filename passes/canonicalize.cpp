// canonicalize: algebraic simplifications that keep every result bit-identical and typed alike.
#include <cmath>
#include <functional>
#include <numeric>

#include "ir/builder.h"
#include "ir/infer.h"
#include "passes/passes.h"

namespace kiln::passes {

namespace {

/// True when v is a constant input with at least one element, or a `full` node, whose every
/// element satisfies pred (given as a double, which holds every element value of interest
/// exactly, and the operand's dtype).
bool all_elements(const ir::Value* v, const std::function<bool(double, DType)>& pred) {
  if (v->is_constant()) {
    const Tensor& t = v->constant();
    if (t.numel() == 0) return false;
    DType dt = t.dtype();
    return visit_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      const T* p = static_cast<const T*>(t.raw_data());
      for (int64_t i = 0; i < t.numel(); ++i) {
        double d;
        if constexpr (std::is_same_v<T, bool>)
          d = p[i] ? 1.0 : 0.0;
        else
          d = static_cast<double>(static_cast<compute_t<T>>(p[i]));
        if (!pred(d, dt)) return false;
      }
      return true;
    });
  }
  const ir::Node* n = v->producer();
  if (!n || n->op() != Op::full) return false;
  // full(sizes, value, dtype): one value converted to dtype. Only a value of the dtype's
  // own kind counts, so that no conversion question (0.5 to an integer) arises.
  const Scalar& s = n->attrs().scalar(1);
  DType dt = n->attrs().dtype(2);
  if (numel_of(n->attrs().ints(0)) == 0) return false;
  if (is_floating(dt) ? !s.is_floating() : s.is_floating()) return false;
  return pred(s.to_double(), dt);
}

bool is_one(const ir::Value* v) {
  return all_elements(v, [](double d, DType) { return d == 1.0; });
}

/// x + z == x bit for bit: any zero for integer and bool results; for float results only a
/// float -0.0, since -0.0 + +0.0 = +0.0.
bool is_additive_identity(const ir::Value* z, DType result) {
  return all_elements(z, [result](double d, DType dt) {
    if (d != 0.0) return false;
    if (!is_floating(result)) return true;
    return is_floating(dt) && std::signbit(d);
  });
}

/// x - z == x bit for bit: any zero for integers; for float results +0.0 (an integer zero
/// converts to +0.0), since -0.0 - -0.0 = +0.0.
bool is_subtractive_identity(const ir::Value* z, DType result) {
  return all_elements(z, [result](double d, DType) {
    return d == 0.0 && (!is_floating(result) || !std::signbit(d));
  });
}

bool is_graph_output(const ir::Value* v) {
  for (const ir::Use& u : v->uses())
    if (u.kind == ir::Use::Kind::graph_output) return true;
  return false;
}

/// Whether v shares storage with a graph input or a graph output: it, or a value it is a
/// view of, is an input or an output.
bool shares_storage_with_io(const ir::Value* v) {
  for (;;) {
    if (v->is_input() || is_graph_output(v)) return true;
    const ir::Node* p = v->producer();
    if (p->schema().kind != OpKind::view) return false;
    v = p->input(0);
  }
}

/// May `old`, the fresh result of a non-view node, be replaced by x? Only when the type is
/// the same and no caller-visible alias appears.
bool may_replace_fresh(const ir::Value* old, const ir::Value* x) {
  if (x->type() != old->type()) return false;
  return !is_graph_output(old) || !shares_storage_with_io(x);
}

/// A new single-result node before `at`, when its inferred type equals `want`; else null.
ir::Value* build_if_same_type(ir::Graph& g, ir::Node* at, Op op, std::vector<ir::Value*> ins,
                              Attrs attrs, const ir::Type& want) {
  Expected<std::vector<ir::Type>> types = ir::infer_types(op, ins, attrs);
  if (!types || types->size() != 1 || (*types)[0] != want) return nullptr;
  ir::Builder b(g);
  b.set_insertion_point(at);
  b.set_location(at->location());
  return b.create(op, std::move(ins), std::move(attrs));
}

/// dims with negative entries wrapped, or empty when one is out of range.
std::vector<int64_t> wrapped_dims(const std::vector<int64_t>& dims) {
  auto rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> r;
  for (int64_t d : dims) {
    int64_t w = d < 0 ? d + rank : d;
    if (w < 0 || w >= rank) return {};
    r.push_back(w);
  }
  return r;
}

ir::Value* fold_mul(const ir::Node* n) {
  ir::Value* out = n->output();
  ir::Value* a = n->input(0);
  ir::Value* b = n->input(1);
  if (is_one(b) && may_replace_fresh(out, a)) return a;
  if (is_one(a) && may_replace_fresh(out, b)) return b;
  return nullptr;
}

ir::Value* fold_add(const ir::Node* n) {
  ir::Value* out = n->output();
  DType rt = out->type().dtype();
  ir::Value* a = n->input(0);
  ir::Value* b = n->input(1);
  if (is_additive_identity(b, rt) && may_replace_fresh(out, a)) return a;
  if (is_additive_identity(a, rt) && may_replace_fresh(out, b)) return b;
  return nullptr;
}

ir::Value* fold_sub(ir::Graph& g, ir::Node* n) {
  ir::Value* out = n->output();
  const ir::Type& t = out->type();
  ir::Value* a = n->input(0);
  ir::Value* b = n->input(1);
  if (is_subtractive_identity(b, t.dtype()) && may_replace_fresh(out, a)) return a;
  // x - x = 0 for integers only: for floats NaN - NaN and Inf - Inf are NaN.
  if (a == b && is_integral(t.dtype()) && !t.wrapped_number())
    return build_if_same_type(g, n, Op::full, {},
                              {std::vector<int64_t>(t.sizes()), Scalar(int64_t{0}), t.dtype()}, t);
  return nullptr;
}

ir::Value* fold_neg(const ir::Node* n) {
  const ir::Node* inner = n->input(0)->producer();
  if (!inner || inner->op() != Op::neg) return nullptr;
  ir::Value* x = inner->input(0);
  return may_replace_fresh(n->output(), x) ? x : nullptr;
}

ir::Value* fold_cast(const ir::Node* n) {
  ir::Value* x = n->input(0);
  if (x->type().dtype() != n->attrs().dtype(0)) return nullptr;
  return may_replace_fresh(n->output(), x) ? x : nullptr;
}

ir::Value* fold_permute(ir::Graph& g, ir::Node* n) {
  ir::Value* out = n->output();
  if (n->input(0)->type() == out->type()) return n->input(0);
  const ir::Node* inner = n->input(0)->producer();
  if (!inner || inner->op() != Op::permute) return nullptr;
  std::vector<int64_t> p = wrapped_dims(inner->attrs().ints(0));
  std::vector<int64_t> q = wrapped_dims(n->attrs().ints(0));
  if (p.size() != q.size() || p.size() != inner->attrs().ints(0).size() ||
      q.size() != n->attrs().ints(0).size())
    return nullptr;
  // permute(y, q)[i] = y[q[i]] and y = permute(x, p): dim i of the result is dim p[q[i]] of x.
  std::vector<int64_t> r(q.size());
  for (size_t i = 0; i < q.size(); ++i)
    r[i] = p[static_cast<size_t>(q[i])];
  ir::Value* x = inner->input(0);
  std::vector<int64_t> identity(r.size());
  std::iota(identity.begin(), identity.end(), int64_t{0});
  if (r == identity && x->type() == out->type()) return x;
  return build_if_same_type(g, n, Op::permute, {x}, {r}, out->type());
}

ir::Value* fold_view(ir::Graph& g, ir::Node* n) {
  ir::Value* out = n->output();
  if (n->input(0)->type() == out->type()) return n->input(0);
  const ir::Node* inner = n->input(0)->producer();
  if (!inner || inner->op() != Op::view) return nullptr;
  ir::Value* x = inner->input(0);
  if (x->type() == out->type()) return x;
  return build_if_same_type(g, n, Op::view, {x}, n->attrs(), out->type());
}

ir::Value* fold_expand(const ir::Node* n) {
  return n->input(0)->type() == n->output()->type() ? n->input(0) : nullptr;
}

/// The value that replaces n's result, or null to keep n.
ir::Value* simplify(ir::Graph& g, ir::Node* n) {
  switch (n->op()) {
  case Op::mul: return fold_mul(n);
  case Op::add: return fold_add(n);
  case Op::sub: return fold_sub(g, n);
  case Op::neg: return fold_neg(n);
  case Op::cast: return fold_cast(n);
  case Op::permute: return fold_permute(g, n);
  case Op::view: return fold_view(g, n);
  case Op::expand: return fold_expand(n);
  default: return nullptr;
  }
}

} // namespace

Expected<void> canonicalize(ir::Graph& g, PassContext& ctx) {
  // Forward: a rewrite changes only the operands of later nodes, which are reached after it.
  for (ir::Node* n = g.first_node(); n;) {
    ir::Node* next = n->next();
    if (ir::Value* r = simplify(g, n)) {
      KILN_ASSERT(r->type() == n->output()->type(), "canonicalize: ", n->name(),
                  " replaced by a value of type ", r->type().str(), " instead of ",
                  n->output()->type().str());
      n->output()->replace_all_uses_with(r);
      g.erase(n);
      ctx.changed = true;
    }
    n = next;
  }
  return {};
}

} // namespace kiln::passes
