// Folding per-channel affine chains (eval-mode batch norms) into convolutions (see freeze.h).
#include "frontend/freeze.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/builder.h"
#include "ir/node.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"

namespace kiln::frontend {
namespace {

class Folder {
public:
  Folder(ir::Graph& g, std::span<const Tensor> bound) : g_(g), bound_(bound) {
    for (const ir::InPlaceWrite& w : g.writes())
      written_.insert(w.target);
  }

  int64_t run(std::vector<HostReadGuard>& reads) {
    int64_t folded = 0;
    for (ir::Node* n : g_.node_list())
      if (n->op() == Op::conv2d && fold(n)) ++folded;
    for (const ir::Value* v : read_)
      reads.push_back({bound_[v->index()].impl_ptr(), bound_[v->index()].version(), v->name(),
                       "folded into a convolution"});
    return folded;
  }

private:
  /// Whether v is computed from captured tensors the graph does not write and constants only.
  bool frozen(const ir::Value* v) {
    if (auto it = frozen_.find(v); it != frozen_.end()) return it->second;
    bool ok;
    if (v->is_input()) {
      ok = v->is_constant() || (v->input_kind() == ir::InputKind::parameter && !written_.count(v) &&
                                bound_[v->index()].defined());
    } else {
      const ir::Node* p = v->producer();
      ok = p->schema().kind != OpKind::random && p->op() != Op::empty;
      for (const ir::Value* in : p->inputs())
        ok = ok && frozen(in);
    }
    frozen_[v] = ok;
    return ok;
  }

  /// v's value now (v frozen), evaluated eagerly; the captured tensors read are recorded.
  Tensor value(const ir::Value* v) {
    if (auto it = values_.find(v); it != values_.end()) return it->second;
    Tensor t;
    if (v->is_constant()) {
      t = v->constant();
    } else if (v->is_input()) {
      t = bound_[v->index()];
      read_.insert(v);
    } else {
      const ir::Node* p = v->producer();
      std::vector<Tensor> args;
      for (const ir::Value* in : p->inputs())
        args.push_back(value(in));
      t = dispatch(p->op(), args, p->attrs()).at(v->index());
    }
    values_[v] = t;
    return t;
  }

  /// A frozen operand's value as one number per channel ([c]), when its type broadcasts per
  /// channel against a conv result of type y (a scalar, [c], [1, c, 1, 1], [c, 1, 1], ...).
  std::optional<Tensor> per_channel(const ir::Value* o, const ir::Type& y) {
    const Shape& s = o->type().sizes();
    const int64_t c = y.sizes()[1];
    // A scalar (a C++ number is an f64 one) counts in the conv's dtype, as the op computes.
    if (s.empty() && is_floating(o->type().dtype()))
      return value(o).to(y.dtype()).reshape({1}).expand({c}).contiguous();
    if (o->type().dtype() != y.dtype() || s.size() > 4) return std::nullopt;
    Shape four(4 - s.size(), 1);
    four.insert(four.end(), s.begin(), s.end());
    if (four[0] != 1 || four[2] != 1 || four[3] != 1 || (four[1] != 1 && four[1] != c))
      return std::nullopt;
    return value(o).reshape({1, four[1], 1, 1}).expand({1, c, 1, 1}).reshape({c}).contiguous();
  }

  bool fold(ir::Node* conv) {
    const ir::Type& y_type = conv->output()->type();
    // (A graph's constants are CPU tensors: a device conv keeps its affine ops.)
    if (!is_floating(y_type.dtype()) || !y_type.is_static() || y_type.sizes().size() != 4 ||
        !y_type.device().is_cpu())
      return false;
    ir::Value* w = conv->input(1);
    ir::Value* bias = conv->num_inputs() > 2 ? conv->input(2) : nullptr;
    if (!frozen(w) || (bias != nullptr && !frozen(bias))) return false;
    const int64_t c = y_type.sizes()[1];
    // y = conv * scale + shift, link by link.
    Tensor scale, shift;
    ir::Value* y = conv->output();
    ir::Value* end = nullptr;
    for (;;) {
      if (y->uses().size() != 1 || y->uses()[0].kind != ir::Use::Kind::operand) break;
      ir::Node* link = y->uses()[0].user;
      const Op op = link->op();
      if ((op != Op::add && op != Op::sub && op != Op::mul && op != Op::div) ||
          link->output()->type() != y_type)
        break;
      const uint32_t slot = y->uses()[0].slot;
      const ir::Value* o = link->input(1 - slot);
      if (o == y || !frozen(o) || (op == Op::div && slot == 1)) break;
      std::optional<Tensor> v = per_channel(o, y_type);
      if (!v) break;
      if (!scale.defined()) {
        scale = ones({c}, TensorOptions{}.dtype(y_type.dtype()));
        shift = bias != nullptr ? value(bias).reshape({c}).contiguous()
                                : zeros({c}, TensorOptions{}.dtype(y_type.dtype()));
      }
      switch (op) {
      case Op::add: shift = add(shift, *v); break;
      case Op::sub:
        if (slot == 0) {
          shift = sub(shift, *v);
        } else { // o - y
          scale = neg(scale);
          shift = sub(*v, shift);
        }
        break;
      case Op::mul:
        scale = mul(scale, *v);
        shift = mul(shift, *v);
        break;
      default: // y / o
        scale = div(scale, *v);
        shift = div(shift, *v);
      }
      end = link->output();
      y = end;
    }
    if (end == nullptr) return false;
    const Tensor wv = value(w);
    const Tensor folded_w = mul(wv, scale.reshape({c, 1, 1, 1})).contiguous();
    ir::Builder b(g_);
    b.set_insertion_point(conv);
    ir::Value* wc = g_.add_constant(folded_w, false, w->name() + ".folded");
    ir::Value* bc = g_.add_constant(shift, false, "conv_bias.folded");
    ir::Value* out = b.create(Op::conv2d, {conv->input(0), wc, bc}, conv->attrs());
    end->replace_all_uses_with(out);
    return true;
  }

  ir::Graph& g_;
  std::span<const Tensor> bound_;
  std::unordered_set<const ir::Value*> written_;
  std::unordered_map<const ir::Value*, bool> frozen_;
  std::unordered_map<const ir::Value*, Tensor> values_;
  std::unordered_set<const ir::Value*> read_;
};

} // namespace

int64_t fold_conv_affine(ir::Graph& g, std::span<const Tensor> bound,
                         std::vector<HostReadGuard>& reads) {
  return Folder(g, bound).run(reads);
}

} // namespace kiln::frontend
