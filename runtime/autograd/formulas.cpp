// The backward formulas of the op table (runtime/ops/ops.def), in terms of other kiln ops so
// that a backward pass is itself recorded (create_graph) and traceable. g is the gradient of
// the result, a and b the inputs, r the result; each input's gradient is summed down to its
// shape (sum_to) and cast to its dtype.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
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

// ---- convolution and pooling ----

/// t reversed along dim d (an index_select of the indices in reverse).
Tensor flip(const Tensor& t, int64_t d) {
  const int64_t n = t.size(d);
  if (n <= 1) return t;
  return index_select(t, d, arange(n - 1, -1, -1, TensorOptions(DType::i64).device(t.device())));
}

/// conv2d's input gradient: for y = conv2d(x, w) with x of spatial size (h, wd), the gradient
/// g of y spread out by the stride (zeros between its elements), padded so that each input
/// position sees the outputs its window fed, then a stride-1 convolution (the forward's
/// dilation) with the weight flipped and its channels transposed within each group. The pad
/// crops where the padding exceeds the dilated kernel or where the last rows were never read,
/// so the result has exactly the input's size.
Tensor conv2d_input_grad(const Tensor& g, const Tensor& w, int64_t h, int64_t wd,
                         const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                         const std::vector<int64_t>& dilation, int64_t groups) {
  const int64_t n = g.size(0), o = g.size(1), oh = g.size(2), ow = g.size(3);
  const int64_t cg = w.size(1), kh = w.size(2), kw = w.size(3);
  const int64_t sh = stride[0], sw = stride[1];
  Tensor spread = g;
  if (sh != 1 || sw != 1) {
    // [N, O, OH, 1, OW, 1] padded to [N, O, OH, sh, OW, sw]: each element then stride - 1 zeros.
    spread = pad(reshape(g, {n, o, oh, 1, ow, 1}), {0, sw - 1, 0, 0, 0, sh - 1});
    spread = reshape(spread, {n, o, oh * sh, ow * sw});
  }
  // Position j of the padded gradient holds output (j - left) / stride; input i reads
  // positions i .. i + dilation * (k - 1).
  const int64_t left_h = dilation[0] * (kh - 1) - padding[0];
  const int64_t left_w = dilation[1] * (kw - 1) - padding[1];
  spread = pad(spread, {left_w, wd + padding[1] - ow * sw, left_h, h + padding[0] - oh * sh});
  // [O, Cg, kh, kw] as [G, O/G, Cg, ...] to [G, Cg, O/G, ...]: [C, O/G, kh, kw], flipped.
  Tensor wt = reshape(w, {groups, o / groups, cg, kh, kw});
  wt = reshape(transpose(wt, 1, 2), {groups * cg, o / groups, kh, kw});
  wt = flip(flip(wt, 2), 3);
  return conv2d(spread, wt, Tensor(), {1, 1}, {0, 0}, dilation, groups);
}

/// conv2d's weight gradient: a convolution of the input (channels as the batch, the images
/// as the reduced channels, per group) with the gradient as the kernel, where the forward's
/// stride becomes the dilation and its dilation the stride. The input is padded (or cropped)
/// to exactly the extent the windows cover, so the result is [O, Cg, kh, kw].
Tensor conv2d_weight_grad(const Tensor& x, const Tensor& g, int64_t kh, int64_t kw,
                          const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                          const std::vector<int64_t>& dilation, int64_t groups) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t oh = g.size(2), ow = g.size(3);
  const int64_t hn = (oh - 1) * stride[0] + dilation[0] * (kh - 1) + 1;
  const int64_t wn = (ow - 1) * stride[1] + dilation[1] * (kw - 1) + 1;
  Tensor xp = pad(x, {padding[1], wn - wd - padding[1], padding[0], hn - h - padding[0]});
  // [N, C, ...] as [N, G, Cg, ...] to [Cg, G * N, ...]: group k's images are channels k*N...
  xp = permute(reshape(xp, {n, groups, c / groups, hn, wn}), {2, 1, 0, 3, 4});
  xp = reshape(xp, {c / groups, groups * n, hn, wn});
  const Tensor gw = conv2d(xp, transpose(g, 0, 1), Tensor(), dilation, {0, 0}, stride, groups);
  return transpose(gw, 0, 1); // [Cg, O, kh, kw] to [O, Cg, kh, kw]
}

/// The adjoint of reading a pool's windows: cols [B, K, OH, OW] holds, per output and window
/// offset k = ky * kw + kx, what goes back to that element; the sum lands on [B, 1, h, wd]
/// (contributions of overlapping windows add, those on the padding drop). It is conv2d's input
/// gradient for the weight [K, 1, kh, kw] that picks offset k into channel k.
Tensor fold_windows(const Tensor& cols, int64_t kh, int64_t kw, int64_t h, int64_t wd,
                    const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                    const std::vector<int64_t>& dilation) {
  const int64_t k = kh * kw;
  const Tensor ids =
      arange(int64_t{0}, k, int64_t{1}, TensorOptions(DType::i64).device(cols.device()));
  const Tensor pick = reshape(eq(unsqueeze(ids, 1), ids).to(cols.dtype()), {k, 1, kh, kw});
  return conv2d_input_grad(cols, pick, h, wd, stride, padding, dilation, 1);
}

/// one_hot(index, n) in `dtype`, without one_hot's host check of the index range (the forward
/// op checked it), so that a traced backward does not read the index on the host; negative
/// indices count from the end, as the forward ops take them.
Tensor classes(const Tensor& index, int64_t n, DType dtype) {
  Tensor i = index.to(DType::i64);
  i = where(i < 0, i + n, i);
  const Tensor all = arange(Scalar(int64_t{0}), Scalar(n), Scalar(int64_t{1}),
                            TensorOptions(DType::i64).device(index.device()));
  return eq(unsqueeze(i, -1), all).to(dtype);
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
  case Op::avg_pool2d:
  case Op::floor_divide: return {false, false};
  case Op::div:
  case Op::pow:
  case Op::prod:
  case Op::max_pool2d:
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
      // Each element's derivative is the product of the others. Counted per reduced slice:
      // without zeros that is r / a; with one zero, only the zero's is not 0 (the product of
      // the rest); with more, all are 0 (as PyTorch's prod_backward).
      const Tensor zero = a == 0.0;
      const Tensor nonzero = where(zero, 1.0, a);
      const Tensor zeros = sum(zero, dims, true, a.dtype());
      const Tensor rest = prod(nonzero, dims, true); // the product of the nonzero elements
      return gk * where(zeros == 0.0, rest / nonzero, where(zero && zeros == 1.0, rest, 0.0));
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
      const Tensor oh = classes(reshape(b, {-1}), n, g.dtype());
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
      const Tensor oh = classes(b, a.size(d), g.dtype()); // [..index.., n]
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
    set(1, [&] {
      if (b.dim() != 2 || a.dim() < 2) return matmul(transpose(a, -1, -2), g);
      // A matrix b (a weight) under a batched a: one product over all rows, rather than one
      // per batch summed afterwards. Stored transposed (linear's weight.t()), the product is
      // formed as (g^T a)^T, so that the gradient the transpose hands on to the weight is
      // contiguous (as PyTorch's mm_mat2_backward): no transposing copy into .grad().
      const Tensor a2 = reshape(a, {-1, a.size(-1)}), g2 = reshape(g, {-1, g.size(-1)});
      if (b.stride(0) == 1 && b.stride(1) != 1 && b.size(0) > 1)
        return transpose(matmul(transpose(g2, 0, 1), a2), 0, 1);
      return matmul(transpose(a2, 0, 1), g2);
    });
    break;
  case Op::scatter: {
    const int64_t d = a.dim() == 0 ? 0 : wrap_dim(attrs.i(0), a.dim(), "scatter");
    // The written places take nothing from a; src's elements get the gradient of the places
    // they were written to (every one of a repeated target, as PyTorch), zero where unread.
    set(0, [&] {
      return scatter(g, d, b, zeros(b.sizes(), TensorOptions(g.dtype()).device(g.device())));
    });
    set(2, [&] {
      const Tensor s = gather(g, d, b);
      const Shape& sizes = meta[2].sizes;
      if (s.sizes() == sizes) return s;
      std::vector<int64_t> pads;
      for (size_t k = sizes.size(); k-- > 0;)
        pads.insert(pads.end(), {0, sizes[k] - s.sizes()[k]});
      return pad(s, pads);
    });
    break;
  }
  case Op::conv2d: {
    const std::vector<int64_t>& stride = attrs.ints(0);
    const std::vector<int64_t>& padding = attrs.ints(1);
    const std::vector<int64_t>& dilation = attrs.ints(2);
    const int64_t groups = attrs.i(3);
    set(0, [&] {
      return conv2d_input_grad(g, b, a.size(2), a.size(3), stride, padding, dilation, groups);
    });
    set(1, [&] {
      return conv2d_weight_grad(a, g, b.size(2), b.size(3), stride, padding, dilation, groups);
    });
    set(2, [&] { return sum(g, {0, 2, 3}, false, g.dtype()); });
    break;
  }
  case Op::max_pool2d: {
    const std::vector<int64_t>& kernel = attrs.ints(0);
    const std::vector<int64_t>& stride = attrs.ints(1);
    const std::vector<int64_t>& padding = attrs.ints(2);
    const std::vector<int64_t>& dilation = attrs.ints(3);
    set(0, [&] {
      const int64_t rank = a.dim(), h = a.size(-2), wd = a.size(-1);
      const int64_t oh = r.size(-2), ow = r.size(-1);
      const int64_t kh = kernel[0], kw = kernel[1], k = kh * kw;
      Tensor first; // [..., K, OH, OW]: the offset each window's maximum came from
      {
        const NoGradGuard no_grad; // a mask: nothing to differentiate
        // The input padded with -inf (never the maximum) to the extent the windows cover.
        const int64_t hn = (oh - 1) * stride[0] + dilation[0] * (kh - 1) + 1;
        const int64_t wn = (ow - 1) * stride[1] + dilation[1] * (kw - 1) + 1;
        const Tensor xp =
            pad(a, {padding[1], wn - wd - padding[1], padding[0], hn - h - padding[0]},
                -std::numeric_limits<double>::infinity());
        std::vector<Tensor> windows;
        for (int64_t ky = 0; ky < kh; ++ky) {
          const Tensor rows = slice(xp, rank - 2, ky * dilation[0],
                                    ky * dilation[0] + (oh - 1) * stride[0] + 1, stride[0]);
          for (int64_t kx = 0; kx < kw; ++kx)
            windows.push_back(slice(rows, rank - 1, kx * dilation[1],
                                    kx * dilation[1] + (ow - 1) * stride[1] + 1, stride[1]));
        }
        // The first offset holding the maximum (the kernel's scan order), as PyTorch; in a
        // window with a NaN (its maximum then), the last NaN, as PyTorch's kernel takes it.
        const Tensor s = stack(windows, rank - 2), m = unsqueeze(r, rank - 2);
        const Tensor hit = s == m, nan = s != s;
        const Tensor nans = sum(nan, {rank - 2}, true);
        first = where(m != m, nan && (cumsum(nan, rank - 2) == nans),
                      hit && (cumsum(hit, rank - 2) == 1));
      }
      const Tensor cols = where(first, unsqueeze(g, rank - 2), 0.0);
      const Tensor dx =
          fold_windows(reshape(cols, {-1, k, oh, ow}), kh, kw, h, wd, stride, padding, dilation);
      return reshape(dx, meta[0].sizes);
    });
    break;
  }
  case Op::avg_pool2d: {
    const std::vector<int64_t>& kernel = attrs.ints(0);
    const std::vector<int64_t>& stride = attrs.ints(1);
    const std::vector<int64_t>& padding = attrs.ints(2);
    const bool count_include_pad = attrs.b(4);
    set(0, [&] {
      const Shape& sizes = meta[0].sizes; // the input is not saved
      const int64_t h = sizes[sizes.size() - 2], wd = sizes[sizes.size() - 1];
      const int64_t oh = g.size(-2), ow = g.size(-1);
      const int64_t kh = kernel[0], kw = kernel[1];
      // Each output's 1 / divisor, by the kernel's rules: the window clipped to input plus
      // padding when padding counts, else to the input; a window with no input gives 0.
      std::vector<double> scale(static_cast<size_t>(oh * ow));
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t y0 = oy * stride[0] - padding[0], x0 = ox * stride[1] - padding[1];
          const int64_t y1 = std::min(y0 + kh, h + padding[0]);
          const int64_t x1 = std::min(x0 + kw, wd + padding[1]);
          const int64_t iy = std::min(y1, h) - std::max<int64_t>(y0, 0);
          const int64_t ix = std::min(x1, wd) - std::max<int64_t>(x0, 0);
          const int64_t divisor = count_include_pad ? (y1 - y0) * (x1 - x0) : iy * ix;
          scale[static_cast<size_t>(oy * ow + ox)] =
              iy <= 0 || ix <= 0 ? 0.0 : 1.0 / static_cast<double>(divisor);
        }
      }
      const Tensor per = tensor(scale, {oh, ow}).to(g.dtype()).to(g.device());
      // Every element of a window gets its output's gradient over the divisor.
      const Tensor ones_kernel = ones({1, 1, kh, kw}, TensorOptions(g.dtype()).device(g.device()));
      const Tensor dx = conv2d_input_grad(reshape(g * per, {-1, 1, oh, ow}), ones_kernel, h, wd,
                                          stride, padding, {1, 1}, 1);
      return reshape(dx, sizes);
    });
    break;
  }
  default: not_implemented(op);
  }
  return out;
}

} // namespace kiln::autograd
