// The public view and data-movement ops: view/reshape/permute/expand/slice and the shape
// helpers built on them, contiguous/clone, and cat/stack/split/chunk/index_select/gather/
// scatter/pad.
#include <numeric>

#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/ops/view_geometry.h"

namespace kiln {

// ---- views ----

Tensor view(const Tensor& a, IntList sizes) { return dispatch1(Op::view, {a}, Attrs{sizes.vec()}); }

Tensor reshape(const Tensor& a, IntList sizes) {
  Shape s = infer_view_sizes(sizes, a.sizes(), "reshape");
  // A view when the strides allow one, else a copy (PyTorch's reshape contract).
  if (view_strides(a.sizes(), a.strides(), s)) return view(a, s);
  return view(contiguous(a), s);
}

Tensor permute(const Tensor& a, IntList dims) {
  return dispatch1(Op::permute, {a}, Attrs{dims.vec()});
}

Tensor transpose(const Tensor& a, int64_t d0, int64_t d1) {
  int64_t r = a.dim();
  int64_t w0 = wrap_dim(d0, r, "transpose"), w1 = wrap_dim(d1, r, "transpose");
  Shape perm(static_cast<size_t>(r));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  if (r > 0) std::swap(perm[static_cast<size_t>(w0)], perm[static_cast<size_t>(w1)]);
  return permute(a, perm);
}

Tensor expand(const Tensor& a, IntList sizes) {
  return dispatch1(Op::expand, {a}, Attrs{sizes.vec()});
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  const int64_t r = a.dim();
  KILN_CHECK(dim >= -r - 1 && dim <= r, "unsqueeze: dim ", dim,
             " is out of range for a tensor of rank ", r, " (expected in [", -r - 1, ", ", r, "])");
  const int64_t d = dim < 0 ? dim + r + 1 : dim;
  Shape s = a.sizes();
  s.insert(s.begin() + d, 1);
  return view(a, s);
}

Tensor squeeze(const Tensor& a) {
  Shape s;
  for (int64_t n : a.sizes())
    if (n != 1) s.push_back(n);
  return view(a, s);
}

Tensor squeeze(const Tensor& a, int64_t dim) {
  int64_t d = wrap_dim(dim, a.dim(), "squeeze");
  Shape s = a.sizes();
  if (a.dim() > 0 && s[static_cast<size_t>(d)] == 1) s.erase(s.begin() + d);
  return view(a, s);
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return dispatch1(Op::slice, {a}, Attrs{dim, start, end, step});
}

Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  KILN_CHECK(a.dim() > 0, "narrow: cannot be applied to a 0-d tensor");
  int64_t d = wrap_dim(dim, a.dim(), "narrow");
  int64_t n = a.size(d);
  KILN_CHECK(start >= -n && start <= n, "narrow: start ", start, " is out of range for dim ", dim,
             " of size ", n, " (shape ", shape_str(a.sizes()), ")");
  if (start < 0) start += n;
  KILN_CHECK(length >= 0, "narrow: length must be non-negative, got ", length);
  KILN_CHECK(length <= n - start, "narrow: start (", start, ") + length (", length,
             ") exceeds the size ", n, " of dim ", dim, " (shape ", shape_str(a.sizes()), ")");
  return slice(a, d, start, start + length, 1);
}

Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  if (a.dim() == 0) return reshape(a, {1});
  int64_t s = wrap_dim(start_dim, a.dim(), "flatten");
  int64_t e = wrap_dim(end_dim, a.dim(), "flatten");
  KILN_CHECK(s <= e, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim, " (shape ",
             shape_str(a.sizes()), ")");
  if (s == e) return a;
  Shape out(a.sizes().begin(), a.sizes().begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d)
    n *= a.size(d);
  out.push_back(n);
  out.insert(out.end(), a.sizes().begin() + e + 1, a.sizes().end());
  return reshape(a, out);
}

Tensor contiguous(const Tensor& a) {
  if (a.is_contiguous()) return a;
  return dispatch1(Op::copy, {a});
}

Tensor clone(const Tensor& a) { return dispatch1(Op::copy, {a}); }

// ---- data movement ----

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  return dispatch1(Op::cat, std::span<const Tensor>(tensors), Attrs{dim});
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].defined(), "stack: tensor ", i, " is undefined");
    KILN_CHECK(tensors[i].sizes() == tensors[0].sizes(),
               "stack: expects each tensor to be equal size, but got ",
               shape_str(tensors[0].sizes()), " at entry 0 and ", shape_str(tensors[i].sizes()),
               " at entry ", i);
  }
  const int64_t r = tensors[0].dim();
  KILN_CHECK(dim >= -r - 1 && dim <= r, "stack: dim ", dim, " is out of range for tensors of rank ",
             r, " (expected in [", -r - 1, ", ", r, "])");
  const int64_t d = dim < 0 ? dim + r + 1 : dim;
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors)
    parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  KILN_CHECK(a.dim() > 0, "split: cannot split a 0-d tensor");
  int64_t d = wrap_dim(dim, a.dim(), "split");
  int64_t n = a.size(d);
  KILN_CHECK(split_size >= 0, "split: split_size must be non-negative, got ", split_size);
  KILN_CHECK(split_size > 0 || n == 0,
             "split: split_size can only be 0 if the dimension size is 0, "
             "got split_size 0 for dim ",
             dim, " of shape ", shape_str(a.sizes()));
  std::vector<Tensor> out;
  if (n == 0) {
    out.push_back(slice(a, d, 0, 0, 1));
    return out;
  }
  for (int64_t s = 0; s < n; s += split_size)
    out.push_back(slice(a, d, s, s + split_size, 1));
  return out;
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  KILN_CHECK(a.dim() > 0, "chunk: cannot chunk a 0-d tensor");
  KILN_CHECK(chunks > 0, "chunk: expected chunks > 0, got ", chunks);
  int64_t d = wrap_dim(dim, a.dim(), "chunk");
  int64_t n = a.size(d);
  if (n == 0) {
    // PyTorch returns `chunks` empty pieces here.
    std::vector<Tensor> out;
    for (int64_t i = 0; i < chunks; ++i)
      out.push_back(slice(a, d, 0, 0, 1));
    return out;
  }
  // ceil(n / chunks) without overflowing for a huge chunk count.
  return split(a, n / chunks + (n % chunks != 0 ? 1 : 0), d);
}

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  return dispatch1(Op::index_select, {a, index}, Attrs{dim});
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  return dispatch1(Op::gather, {a, index}, Attrs{dim});
}

Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  return dispatch1(Op::scatter, {a, index, src}, Attrs{dim});
}

Tensor pad(const Tensor& a, std::vector<int64_t> pads, double value) {
  return dispatch1(Op::pad, {a}, Attrs{std::move(pads), value});
}

} // namespace kiln
