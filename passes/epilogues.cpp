// Matching library epilogues: the pointwise chains after a matmul that oneDNN runs as
// post-ops (see match_library_epilogues in passes/fusion.h).
#include <optional>
#include <unordered_set>

#include "passes/fusion.h"
#include "runtime/error.h"

namespace kiln::passes {

namespace {

bool is_f32_like(const ir::Value* v, const Shape& shape) {
  return v->type().dtype() == DType::f32 && v->type().sizes() == shape;
}

/// The one node that reads v, when nothing else does (no graph output, write or second use).
const ir::Node* sole_user(const ir::Value* v) {
  if (v->uses().size() != 1 || v->uses()[0].kind != ir::Use::Kind::operand) return nullptr;
  return v->uses()[0].user;
}

/// The value of a one-element constant input (a wrapped number), or nullopt.
std::optional<double> constant_value(const ir::Value* v) {
  if (!v->is_constant() || v->type().numel() != 1) return std::nullopt;
  return v->constant().to(DType::f64).item<double>();
}

bool is_constant(const ir::Value* v, double c) {
  auto x = constant_value(v);
  return x && static_cast<float>(*x) == static_cast<float>(c);
}

/// The other input of a binary node `n` reading y, and whether it is n's first input.
const ir::Value* other_input(const ir::Node* n, const ir::Value* y, bool& first) {
  if (n->num_inputs() != 2) return nullptr;
  if (n->input(0) == y && n->input(1) != y) {
    first = false;
    return n->input(1);
  }
  if (n->input(1) == y && n->input(0) != y) {
    first = true;
    return n->input(0);
  }
  return nullptr;
}

/// A node `op(a, c)` or `op(c, a)` with the constant c; returns it or null.
const ir::Node* with_constant(const ir::Node* n, Op op, const ir::Value* a, double c) {
  bool first = false;
  if (!n || n->op() != op) return nullptr;
  const ir::Value* o = other_input(n, a, first);
  return o && is_constant(o, c) ? n : nullptr;
}

class Matcher {
public:
  Matcher(const ir::Node* anchor, LibraryCall& call, std::unordered_set<const ir::Node*>& claimed)
      : call_(call), claimed_(claimed), shape_(anchor->output()->type().sizes()),
        scalars_only_(anchor->op() == Op::conv2d), layout_(anchor->output()->type().strides()) {}

  /// Extends the chain by one op after y (the chain's current result); returns the new
  /// result, or null when the next reader is no epilogue op.
  const ir::Value* step(const ir::Value* y) {
    if (const ir::Value* r = match_gelu_erf(y)) return r;
    if (const ir::Value* r = match_gelu_tanh(y)) return r;
    if (const ir::Value* r = match_silu(y)) return r;
    const ir::Node* u = sole_user(y);
    if (!u || claimed_.count(u) || !is_f32_like(u->output(), shape_)) return nullptr;
    switch (u->op()) {
    // relu stays out: oneDNN's eltwise_relu maps NaN to 0 where kiln's relu keeps it
    // (ops.def), so it runs in a generated kernel after the call (test/fuzz/regressions/
    // relu_nan_after_matmul.kir).
    case Op::relu: return nullptr;
    // So does its eltwise_logistic (sigmoid_nan_after_conv.kir).
    case Op::sigmoid: return nullptr;
    case Op::tanh: return absorb({u}, PostOp{.kind = PostOp::Kind::tanh});
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div: {
      PostOp p{.kind = PostOp::Kind::binary, .op = u->op()};
      const ir::Value* t = other_input(u, y, p.operand_first);
      if (!t) return nullptr;
      if (auto c = constant_value(t)) {
        p.is_scalar = true;
        p.scalar = *c;
        // Also an operand: the eager form of the epilogue reads it.
      }
      if (t->type().dtype() != DType::f32 && !p.is_scalar) return nullptr;
      // After a conv, tensor operands stay in kernels: oneDNN 2.6 reads a whole-tensor one
      // (a residual) fast only in the destination's layout, and its per-channel binary
      // post-ops (a batch norm's four) made the convolution slower than the kernel pass.
      // The exception is a residual beside a conv stored channels-last (passes/layout.h):
      // operand, conv result and sum all in that layout.
      if (!p.is_scalar && scalars_only_ && !is_residual(t, u->output())) return nullptr;
      if (p.operand_first && !p.is_scalar && (u->op() == Op::sub || u->op() == Op::div))
        return nullptr;
      p.operand = call_.operands.size();
      call_.operands.push_back(t);
      return absorb({u}, p);
    }
    default: return nullptr;
    }
  }

private:
  // A node joins one call: a binary op reading two chains' results (two experts' sum) joins
  // the first, and the second chain ends before it.
  const ir::Value* absorb(std::initializer_list<const ir::Node*> nodes, PostOp p) {
    for (const ir::Node* n : nodes)
      if (claimed_.count(n)) return nullptr;
    for (const ir::Node* n : nodes) {
      call_.nodes.push_back(n);
      claimed_.insert(n);
    }
    call_.epilogue.ops.push_back(p);
    return call_.nodes.back()->output();
  }

  /// The two readers of y, or false.
  bool two_users(const ir::Value* y, const ir::Node*& a, const ir::Node*& b) {
    if (y->uses().size() != 2) return false;
    for (const ir::Use& u : y->uses())
      if (u.kind != ir::Use::Kind::operand) return false;
    a = y->uses()[0].user;
    b = y->uses()[1].user;
    return a != b;
  }

  // mul(y, sigmoid(y)), as kiln::silu traces it.
  const ir::Value* match_silu(const ir::Value* y) {
    const ir::Node *a = nullptr, *b = nullptr;
    if (!two_users(y, a, b)) return nullptr;
    if (a->op() != Op::sigmoid) std::swap(a, b);
    if (a->op() != Op::sigmoid || b->op() != Op::mul || sole_user(a->output()) != b) return nullptr;
    bool first = false;
    if (other_input(b, y, first) != a->output() || !is_f32_like(b->output(), shape_))
      return nullptr;
    return absorb({a, b}, PostOp{.kind = PostOp::Kind::silu});
  }

  // mul(mul(y, 0.5), add(erf(mul(y, 1/sqrt(2))), 1)), as kiln::gelu(y, "none") traces it.
  const ir::Value* match_gelu_erf(const ir::Value* y) {
    const ir::Node *a = nullptr, *b = nullptr;
    if (!two_users(y, a, b)) return nullptr;
    constexpr double kSqrtHalf = 0.70710678118654752440;
    if (!with_constant(a, Op::mul, y, 0.5)) std::swap(a, b);
    const ir::Node* half = with_constant(a, Op::mul, y, 0.5);
    const ir::Node* scaled = with_constant(b, Op::mul, y, kSqrtHalf);
    if (!half || !scaled) return nullptr;
    const ir::Node* e = sole_user(scaled->output());
    if (!e || e->op() != Op::erf) return nullptr;
    const ir::Node* plus = with_constant(sole_user(e->output()), Op::add, e->output(), 1);
    if (!plus) return nullptr;
    const ir::Node* out = sole_user(plus->output());
    bool first = false;
    if (!out || out->op() != Op::mul || sole_user(half->output()) != out ||
        other_input(out, plus->output(), first) != half->output() ||
        !is_f32_like(out->output(), shape_))
      return nullptr;
    return absorb({half, scaled, e, plus, out}, PostOp{.kind = PostOp::Kind::gelu_erf});
  }

  // mul(mul(y, 0.5), add(tanh(mul(add(y, mul(mul(mul(y, y), y), 0.044715)), sqrt(2/pi))), 1)),
  // as kiln::gelu(y, "tanh") traces it.
  const ir::Value* match_gelu_tanh(const ir::Value* y) {
    // y's readers: mul(y, 0.5), mul(y, y) (two uses), mul(sq, y), add(y, t).
    if (y->uses().size() != 5) return nullptr;
    const ir::Node *half = nullptr, *sq = nullptr, *cube = nullptr, *sum = nullptr;
    for (const ir::Use& u : y->uses()) {
      if (u.kind != ir::Use::Kind::operand) return nullptr;
      const ir::Node* n = u.user;
      if (with_constant(n, Op::mul, y, 0.5))
        half = n;
      else if (n->op() == Op::mul && n->input(0) == y && n->input(1) == y)
        sq = n;
      else if (n->op() == Op::mul)
        cube = n;
      else if (n->op() == Op::add)
        sum = n;
      else
        return nullptr;
    }
    if (!half || !sq || !cube || !sum || sole_user(sq->output()) != cube) return nullptr;
    bool first = false;
    if (other_input(cube, y, first) != sq->output()) return nullptr;
    const ir::Node* coef =
        with_constant(sole_user(cube->output()), Op::mul, cube->output(), 0.044715);
    if (!coef || sole_user(coef->output()) != sum || other_input(sum, y, first) != coef->output())
      return nullptr;
    const ir::Node* beta =
        with_constant(sole_user(sum->output()), Op::mul, sum->output(), 0.79788456080286535588);
    if (!beta) return nullptr;
    const ir::Node* th = sole_user(beta->output());
    if (!th || th->op() != Op::tanh) return nullptr;
    const ir::Node* plus = with_constant(sole_user(th->output()), Op::add, th->output(), 1);
    if (!plus) return nullptr;
    const ir::Node* out = sole_user(plus->output());
    if (!out || out->op() != Op::mul || sole_user(half->output()) != out ||
        other_input(out, plus->output(), first) != half->output() ||
        !is_f32_like(out->output(), shape_))
      return nullptr;
    return absorb({half, sq, cube, coef, sum, beta, th, plus, out},
                  PostOp{.kind = PostOp::Kind::gelu_tanh});
  }

  LibraryCall& call_;
  std::unordered_set<const ir::Node*>& claimed_;
  Shape shape_;
  /// Whether t, added to a conv result stored in a chosen layout, is a whole tensor in the
  /// same layout, and so is the sum `r`.
  bool is_residual(const ir::Value* t, const ir::Value* r) const {
    return !layout_.empty() && t->type().sizes() == shape_ && t->type().strides() == layout_ &&
           r->type().strides() == layout_;
  }

  bool scalars_only_ = false; // a conv: no tensor operands (but residuals in its layout)
  Shape layout_;              // the anchor's result strides (empty: contiguous)
};

} // namespace

std::vector<LibraryCall> match_library_epilogues(const ir::Graph& g) {
  std::vector<LibraryCall> calls;
  if (!library_epilogues_available()) return calls;
  std::unordered_set<const ir::Node*> claimed;
  for (const ir::Node* n : g.node_list()) {
    if ((n->op() != Op::matmul && n->op() != Op::conv2d) || n->num_outputs() != 1) continue;
    const ir::Value* y = n->output();
    if (y->type().dtype() != DType::f32) continue;
    bool f32_inputs = true;
    for (const ir::Value* v : n->inputs())
      f32_inputs = f32_inputs && v->type().dtype() == DType::f32;
    if (!f32_inputs) continue;
    if (n->op() == Op::matmul &&
        (n->input(0)->type().sizes().size() < 2 || n->input(1)->type().sizes().size() < 2))
      continue;
    LibraryCall call;
    call.anchor = n;
    for (const ir::Value* v : n->inputs())
      call.operands.push_back(v);
    call.epilogue.contraction_operands = call.operands.size();
    Matcher m(n, call, claimed);
    while (const ir::Value* next = m.step(y))
      y = next;
    // A conv without an epilogue is a call of its own when its result is stored in a chosen
    // layout (channels-last): the eager kernel gives contiguous results.
    if (call.nodes.empty() && (n->op() != Op::conv2d || y->type().is_contiguous())) continue;
    call.output = y;
    call.epilogue.sizes = y->type().sizes();
    if (!y->type().is_contiguous())
      call.epilogue.strides.assign(y->type().strides().begin(), y->type().strides().end());
    call.epilogue.dtype = DType::f32;
    const ir::Value* w = n->input(1);
    while (w->producer() && w->producer()->schema().kind == OpKind::view)
      w = w->producer()->input(0);
    call.epilogue.weights_are_parameters =
        w->is_input() && w->input_kind() == ir::InputKind::parameter;
    calls.push_back(std::move(call));
  }
  return calls;
}

} // namespace kiln::passes
