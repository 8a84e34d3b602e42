// The backward formulas of the op table (runtime/ops/ops.def), in terms of other kiln ops so
// that a backward pass is itself recorded (create_graph) and traceable. g is the gradient of
// the result, a and b the inputs, r the result; each input's gradient is summed down to its
// shape (sum_to) and cast to its dtype.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>

#include "runtime/autograd/autograd.h"
#include "runtime/autograd/node.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/ops/view_geometry.h"

namespace kiln::autograd {
namespace {

/// The dims a reduction's attribute names (all when empty), wrapped.
std::vector<int64_t> reduced_dims(const Attrs& attrs, int64_t rank) {
  std::vector<int64_t> dims = attrs.ints(0);
  if (dims.empty())
    for (int64_t d = 0; d < rank; ++d)
      dims.push_back(d);
  for (int64_t& d : dims)
    d = wrap_dim(d, rank, "backward");
  return dims;
}

/// A reduction's result (or its gradient) with the reduced dims back as size 1.
Tensor unsqueeze_reduced(const Tensor& t, std::span<const int64_t> dims, bool keepdim,
                         int64_t rank) {
  if (keepdim || rank == 0) return t;
  Shape sizes;
  size_t k = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(dims.begin(), dims.end(), d) != dims.end())
      sizes.push_back(1);
    else
      sizes.push_back(t.sizes()[k++]);
  }
  return reshape(t, sizes);
}

/// The gradient for input meta m: g summed to its shape, in its dtype.
Tensor fit(const Tensor& g, const TensorMeta& m) {
  Tensor r = sum_to(g, m.sizes);
  return r.dtype() == m.dtype ? r : r.to(m.dtype);
}

Tensor sign_of(const Tensor& a) { return (a > 0.0).to(a.dtype()) - (a < 0.0).to(a.dtype()); }

[[noreturn]] void not_implemented(Op op) {
  throw Error(std::string("autograd: the derivative of ") + std::string(op_name(op)) +
              " is not implemented yet");
}

} // namespace

Tensor sum_to(const Tensor& g, IntList sizes) {
  if (g.sizes() == Shape(sizes.begin(), sizes.end())) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(sizes.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (d < lead || (sizes[static_cast<size_t>(d - lead)] == 1 && g.size(d) != 1))
      dims.push_back(d);
  Tensor s = dims.empty() ? g : sum(g, dims, true, g.dtype());
  return reshape(s, sizes);
}

bool differentiable(Op op) {
  switch (schema(op).kind) {
  case OpKind::factory:
  case OpKind::random: return false;
  default: break;
  }
  switch (op) {
  case Op::argmax:
  case Op::argmin:
  case Op::eq:
  case Op::ne:
  case Op::lt:
  case Op::le:
  case Op::gt:
  case Op::ge:
  case Op::logical_and:
  case Op::logical_or:
  case Op::logical_not: return false;
  default: return true;
  }
}

SavePlan save_plan(Op op) {
  switch (op) {
  case Op::exp:
  case Op::sqrt:
  case Op::rsqrt:
  case Op::tanh:
  case Op::sigmoid:
  case Op::relu: return {false, true};
  case Op::neg:
  case Op::add:
  case Op::sub:
  case Op::floor:
  case Op::ceil:
  case Op::round:
  case Op::cast:
  case Op::sum:
  case Op::cumsum:
  case Op::view:
  case Op::permute:
  case Op::expand:
  case Op::slice:
  case Op::copy:
  case Op::cat:
  case Op::pad:
  case Op::floor_divide: return {false, false};
  case Op::div:
  case Op::pow:
  case Op::prod:
  case Op::amax:
  case Op::amin: return {true, true};
  default: return {true, false};
  }
}

std::vector<Tensor> op_backward(Op op, const Attrs& attrs, std::span<const Tensor> in,
                                std::span<const TensorMeta> meta, std::span<const Tensor> outputs,
                                std::span<const Tensor> grads, const std::vector<bool>& needed) {
  std::vector<Tensor> out(in.size());
  if (grads.empty() || !grads[0].defined() ||
      std::none_of(needed.begin(), needed.end(), [](bool n) { return n; }))
    return out;
  const Tensor& g = grads[0];
  const Tensor r = outputs.empty() ? Tensor() : outputs[0];
  auto set = [&](size_t k, const std::function<Tensor()>& f) {
    if (k < needed.size() && needed[k]) out[k] = fit(f(), meta[k]);
  };
  const Tensor a = in.size() > 0 ? in[0] : Tensor();
  const Tensor b = in.size() > 1 ? in[1] : Tensor();
  switch (op) {
  // ---- pointwise ----
  case Op::neg: set(0, [&] { return -g; }); break;
  case Op::abs: set(0, [&] { return g * sign_of(a); }); break;
  case Op::exp: set(0, [&] { return g * r; }); break;
  case Op::log: set(0, [&] { return g / a; }); break;
  case Op::sqrt: set(0, [&] { return g / (r * 2.0); }); break;
  case Op::rsqrt: set(0, [&] { return g * r * r * r * -0.5; }); break;
  case Op::sin: set(0, [&] { return g * cos(a); }); break;
  case Op::cos: set(0, [&] { return -(g * sin(a)); }); break;
  case Op::tanh: set(0, [&] { return g * (1.0 - r * r); }); break;
  case Op::sigmoid: set(0, [&] { return g * r * (1.0 - r); }); break;
  case Op::relu: set(0, [&] { return g * (r > 0.0).to(g.dtype()); }); break;
  case Op::erf:
    set(0, [&] { return g * exp(-(a * a)) * (2.0 / std::sqrt(std::numbers::pi)); });
    break;
  case Op::floor:
  case Op::ceil:
  case Op::round: set(0, [&] { return zeros_like(g); }); break;
  case Op::cast: set(0, [&] { return g; }); break;
  case Op::add:
    set(0, [&] { return g; });
    set(1, [&] { return g; });
    break;
  case Op::sub:
    set(0, [&] { return g; });
    set(1, [&] { return -g; });
    break;
  case Op::mul:
    set(0, [&] { return g * b; });
    set(1, [&] { return g * a; });
    break;
  case Op::div:
    set(0, [&] { return g / b; });
    set(1, [&] { return -(g * r / b); });
    break;
  case Op::pow:
    // d/da a^b = b a^(b-1); d/db = a^b ln a, 0 where a = 0 and b >= 0 (PyTorch's rule).
    set(0, [&] { return g * b * pow(a, b - 1.0); });
    set(1, [&] {
      const Tensor d = g * r * log(a);
      return where((a == 0.0) && (b >= 0.0), zeros_like(d), d);
    });
    break;
  case Op::maximum:
  case Op::minimum: {
    // The chosen operand takes the gradient; ties split it, as PyTorch.
    const Tensor pick = op == Op::maximum ? (a > b) : (a < b);
    set(0, [&] { return where(a == b, g * 0.5, where(pick, g, zeros_like(g))); });
    set(1, [&] { return where(a == b, g * 0.5, where(pick, zeros_like(g), g)); });
    break;
  }
  case Op::where:
    set(1, [&] { return where(a, g, zeros_like(g)); });
    set(2, [&] { return where(a, zeros_like(g), g); });
    break;
  case Op::floor_divide:
    set(0, [&] { return zeros_like(g); });
    set(1, [&] { return zeros_like(g); });
    break;
  case Op::remainder:
    set(0, [&] { return g; });
    set(1, [&] { return -(g * floor_divide(a, b)); });
    break;
  // ---- reductions ----
  case Op::sum: {
    const Shape& sizes = meta[0].sizes; // the input is not saved
    const int64_t rank = static_cast<int64_t>(sizes.size());
    const std::vector<int64_t> dims = reduced_dims(attrs, rank);
    set(0, [&] { return expand(unsqueeze_reduced(g, dims, attrs.b(1), rank), sizes); });
    break;
  }
  case Op::prod: {
    const std::vector<int64_t> dims = reduced_dims(attrs, a.dim());
    set(0, [&] {
      const Tensor gk = unsqueeze_reduced(g, dims, attrs.b(1), a.dim());
      const Tensor rk = unsqueeze_reduced(r, dims, attrs.b(1), a.dim());
      return gk * rk / a; // the inputs' zeros are not special-cased yet
    });
    break;
  }
  case Op::amax:
  case Op::amin: {
    const std::vector<int64_t> dims = reduced_dims(attrs, a.dim());
    set(0, [&] {
      // Shared evenly among the elements equal to the extremum.
      const Tensor rk = unsqueeze_reduced(r, dims, attrs.b(1), a.dim());
      const Tensor mask = (a == rk).to(g.dtype());
      const Tensor count = sum(mask, dims, true, g.dtype());
      return unsqueeze_reduced(g, dims, attrs.b(1), a.dim()) * mask / count;
    });
    break;
  }
  case Op::cumsum: {
    const int64_t rank = static_cast<int64_t>(meta[0].sizes.size()); // the input is not saved
    const int64_t d = rank == 0 ? 0 : wrap_dim(attrs.i(0), rank, "cumsum");
    // The reversed cumulative sum: the total minus what came before.
    set(0, [&] {
      if (rank == 0) return g;
      return sum(g, {d}, true, g.dtype()) - cumsum(g, d, g.dtype()) + g;
    });
    break;
  }
  // ---- views and data movement ----
  case Op::view: set(0, [&] { return reshape(g, meta[0].sizes); }); break;
  case Op::permute: {
    const std::vector<int64_t>& p = attrs.ints(0);
    std::vector<int64_t> inverse(p.size());
    for (size_t k = 0; k < p.size(); ++k)
      inverse[static_cast<size_t>(wrap_dim(p[k], static_cast<int64_t>(p.size()), "permute"))] =
          static_cast<int64_t>(k);
    set(0, [&] { return permute(g, inverse); });
    break;
  }
  case Op::expand: set(0, [&] { return g; }); break; // fit sums it down
  case Op::slice:
    set(0, [&] {
      const Shape& sizes = meta[0].sizes;
      const int64_t d = wrap_dim(attrs.i(0), static_cast<int64_t>(sizes.size()), "slice");
      const SliceGeometry geo =
          slice_geometry(sizes, contiguous_strides(sizes), d, attrs.i(1), attrs.i(2), attrs.i(3));
      const int64_t stride = contiguous_strides(sizes)[static_cast<size_t>(d)];
      const int64_t start = stride == 0 ? 0 : geo.offset / stride;
      const int64_t len = geo.sizes[static_cast<size_t>(d)];
      if (attrs.i(3) == 1) {
        // Zeros around the slice, by padding (differentiable again).
        std::vector<int64_t> pads(2 * (sizes.size() - static_cast<size_t>(d)), 0);
        pads[pads.size() - 2] = start;
        pads[pads.size() - 1] = sizes[static_cast<size_t>(d)] - start - len;
        return pad(g, pads);
      }
      Tensor z = zeros(sizes, TensorOptions(g.dtype()).device(g.device()));
      const NoGradGuard no_grad; // a strided slice's gradient is not differentiable again
      z.slice(d, start, start + (len - 1) * attrs.i(3) + 1, attrs.i(3)).copy_(g);
      return z;
    });
    break;
  case Op::copy: set(0, [&] { return g; }); break;
  case Op::cat: {
    const int64_t d = wrap_dim(attrs.i(0), g.dim(), "cat");
    int64_t at = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      const Shape& s = meta[k].sizes;
      if (s.size() == 1 && s[0] == 0) continue; // skipped by cat
      const int64_t n = s[static_cast<size_t>(d)];
      set(k, [&] { return narrow(g, d, at, n); });
      at += n;
    }
    break;
  }
  case Op::pad: {
    std::vector<int64_t> pads = attrs.ints(0);
    for (int64_t& p : pads)
      p = -p; // padding crops back, cropping pads with zeros
    set(0, [&] { return pad(g, pads); });
    break;
  }
  case Op::index_select: {
    const int64_t d = a.dim() == 0 ? 0 : wrap_dim(attrs.i(0), a.dim(), "index_select");
    set(0, [&] {
      if (a.dim() == 0) return sum(g, {}, false, g.dtype()).reshape({});
      // Rows of g added into the rows they came from: one_hot(index)^T @ g, dim d first.
      const int64_t n = a.size(d);
      Tensor gd = transpose(g, 0, d).contiguous();
      const Shape moved = gd.sizes();
      gd = reshape(gd, {moved[0], -1});
      const Tensor oh = one_hot(reshape(b, {-1}), n).to(g.dtype());
      Tensor rows = matmul(transpose(oh, 0, 1), gd);
      Shape back = moved;
      back[0] = n;
      return transpose(reshape(rows, back), 0, d);
    });
    break;
  }
  case Op::gather: {
    const int64_t d = a.dim() == 0 ? 0 : wrap_dim(attrs.i(0), a.dim(), "gather");
    set(0, [&] {
      bool fits = a.dim() > 0 && b.dim() == a.dim();
      for (int64_t k = 0; fits && k < a.dim(); ++k)
        fits = k == d || b.size(k) == a.size(k);
      KILN_CHECK(fits, "autograd: gather's derivative needs an index of the input's sizes but "
                       "along dim (not implemented for smaller ones yet)");
      // Each position adds its gradient to the element it read: one_hot along a new last dim.
      const Tensor oh = one_hot(b, a.size(d)).to(g.dtype()); // [..index.., n]
      const Tensor summed = sum(oh * unsqueeze(g, -1), {d}, false, g.dtype());
      std::vector<int64_t> perm;
      for (int64_t k = 0; k < a.dim() - 1; ++k)
        perm.push_back(k);
      perm.insert(perm.begin() + d, a.dim() - 1);
      return permute(summed, perm);
    });
    break;
  }
  case Op::matmul:
    set(0, [&] { return matmul(g, transpose(b, -1, -2)); });
    set(1, [&] { return matmul(transpose(a, -1, -2), g); });
    break;
  default: not_implemented(op);
  }
  return out;
}

} // namespace kiln::autograd
