// Inference of the view primitives (view, permute, expand, slice) and the view geometry
// they share with reshape: results carry the aliasing strides.
#include <algorithm>
#include <vector>

#include "runtime/error.h"
#include "runtime/ops/op.h"
#include "runtime/ops/view_geometry.h"

namespace kiln {

Shape infer_view_sizes(IntList sizes, IntList input_sizes, const char* op) {
  int64_t numel = numel_of(input_sizes);
  int64_t known = 1;
  int64_t infer_at = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      KILN_CHECK(infer_at < 0, op, ": only one dimension can be inferred (-1), got sizes ",
                 shape_str(sizes));
      infer_at = static_cast<int64_t>(i);
      continue;
    }
    KILN_CHECK(sizes[i] >= 0, op, ": invalid size ", sizes[i], " in ", shape_str(sizes));
    KILN_CHECK(!__builtin_mul_overflow(known, sizes[i], &known), op, ": shape ", shape_str(sizes),
               " has more elements than fit in int64");
  }
  Shape out = sizes.vec();
  if (infer_at >= 0) {
    KILN_CHECK(known != 0, op, ": cannot reshape a tensor of ", numel, " elements (shape ",
               shape_str(input_sizes), ") into shape ", shape_str(sizes),
               " because the size of -1 is ambiguous");
    KILN_CHECK(numel % known == 0, op, ": shape ", shape_str(sizes), " is invalid for an input of ",
               numel, " elements (shape ", shape_str(input_sizes), ")");
    out[static_cast<size_t>(infer_at)] = numel / known;
  } else {
    KILN_CHECK(known == numel, op, ": shape ", shape_str(sizes), " is invalid for an input of ",
               numel, " elements (shape ", shape_str(input_sizes), ")");
  }
  return out;
}

std::optional<Shape> view_strides(IntList old_sizes, IntList old_strides, IntList new_sizes) {
  // A transcription of PyTorch's computeStride_impl (aten/src/ATen/TensorUtils.cpp).
  const int64_t new_rank = static_cast<int64_t>(new_sizes.size());
  if (old_sizes.empty()) return Shape(new_sizes.size(), 1);
  int64_t numel = numel_of(old_sizes);
  if (numel == 0 && old_sizes == new_sizes) return old_strides.vec();
  Shape new_strides(new_sizes.size());
  if (numel == 0) {
    // Strides are arbitrary without elements: use the ones a fresh tensor would have.
    for (int64_t d = new_rank - 1; d >= 0; --d) {
      new_strides[d] =
          d == new_rank - 1 ? 1 : std::max<int64_t>(new_sizes[d + 1], 1) * new_strides[d + 1];
    }
    return new_strides;
  }
  int64_t view_d = new_rank - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_sizes[tensor_d];
    // At the end of a chunk of dims that are contiguous relative to each other, map the
    // view's dims onto it.
    if (tensor_d == 0 || (old_sizes[tensor_d - 1] != 1 &&
                          old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

SliceGeometry slice_geometry(IntList sizes, IntList strides, int64_t dim, int64_t start,
                             int64_t end, int64_t step) {
  KILN_CHECK(!sizes.empty(), "slice: cannot be applied to a 0-d tensor");
  int64_t d = wrap_dim(dim, static_cast<int64_t>(sizes.size()), "slice");
  KILN_CHECK(step >= 1, "slice: step must be positive, got ", step);
  const int64_t n = sizes[d];
  // Python's clamping: negative bounds count from the end, then clamp into [0, n].
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  SliceGeometry g{sizes.vec(), strides.vec(), 0};
  // Written so that a huge step (x[0:n:INT64_MAX]) cannot overflow: ceil((end - start) / step).
  g.sizes[d] = end > start ? (end - start - 1) / step + 1 : 0;
  // Only a result of at most one element can overflow here (a larger one spans storage that
  // exists), and its stride is never used: keep the input's then.
  if (__builtin_mul_overflow(strides[d], step, &g.strides[d])) g.strides[d] = strides[d];
  g.offset = start * strides[d];
  return g;
}

namespace ops {
namespace {

/// Strides of a metadata record (empty means contiguous for non-view producers).
Shape strides_of(const TensorMeta& m) {
  return m.strides.empty() && !m.sizes.empty() ? contiguous_strides(m.sizes) : m.strides;
}

TensorMeta with_geometry(const TensorMeta& in, Shape sizes, Shape strides) {
  TensorMeta out = in;
  out.sizes = std::move(sizes);
  out.strides = std::move(strides);
  out.wrapped_number = false;
  return out;
}

} // namespace

std::vector<TensorMeta> infer_view(std::span<const TensorMeta> in, const Attrs& a) {
  const TensorMeta& x = in[0];
  Shape sizes = infer_view_sizes(a.ints(0), x.sizes, "view");
  Shape old_strides = strides_of(x);
  std::optional<Shape> strides = view_strides(x.sizes, old_strides, sizes);
  KILN_CHECK(strides.has_value(), "view: size ", shape_str(sizes),
             " is not compatible with the input's strides ", shape_str(old_strides), " (shape ",
             shape_str(x.sizes), "); use reshape(...) instead");
  return {with_geometry(x, std::move(sizes), std::move(*strides))};
}

std::vector<TensorMeta> infer_permute(std::span<const TensorMeta> in, const Attrs& a) {
  const TensorMeta& x = in[0];
  const std::vector<int64_t>& dims = a.ints(0);
  const int64_t rank = static_cast<int64_t>(x.sizes.size());
  KILN_CHECK(static_cast<int64_t>(dims.size()) == rank, "permute: dims ", shape_str(dims),
             " do not list the ", rank, " dims of shape ", shape_str(x.sizes));
  Shape old_strides = strides_of(x);
  Shape sizes(dims.size()), strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], rank, "permute");
    KILN_CHECK(!seen[static_cast<size_t>(d)], "permute: dims ", shape_str(dims),
               " are not a permutation (dim ", dims[i], " repeats) of shape ", shape_str(x.sizes));
    seen[static_cast<size_t>(d)] = true;
    sizes[i] = x.sizes[static_cast<size_t>(d)];
    strides[i] = old_strides[static_cast<size_t>(d)];
  }
  return {with_geometry(x, std::move(sizes), std::move(strides))};
}

std::vector<TensorMeta> infer_expand(std::span<const TensorMeta> in, const Attrs& a) {
  // PyTorch's inferExpandGeometry.
  const TensorMeta& x = in[0];
  const std::vector<int64_t>& target = a.ints(0);
  const int64_t rank = static_cast<int64_t>(target.size());
  const int64_t in_rank = static_cast<int64_t>(x.sizes.size());
  KILN_CHECK(rank >= in_rank, "expand: the number of sizes provided (", rank,
             ") must be at least the number of dims of the tensor (", in_rank, "); sizes ",
             shape_str(target), ", tensor shape ", shape_str(x.sizes));
  Shape old_strides = strides_of(x);
  Shape sizes(target.size()), strides(target.size());
  for (int64_t i = rank - 1; i >= 0; --i) {
    int64_t d = i - (rank - in_rank);
    int64_t size = d >= 0 ? x.sizes[d] : 1;
    int64_t stride = d >= 0 ? old_strides[d] : (i + 1 < rank ? sizes[i + 1] * strides[i + 1] : 1);
    int64_t want = target[i];
    if (want == -1) {
      KILN_CHECK(d >= 0, "expand: size -1 is not allowed in a new leading dim (dim ", i,
                 " of sizes ", shape_str(target), ")");
      want = size;
    }
    KILN_CHECK(want >= 0, "expand: invalid size ", want, " in ", shape_str(target));
    if (size != want) {
      KILN_CHECK(size == 1, "expand: the expanded size (", want, ") must match the existing size (",
                 size, ") at non-singleton dim ", i, "; target sizes ", shape_str(target),
                 ", tensor shape ", shape_str(x.sizes));
      size = want;
      stride = 0;
    }
    sizes[i] = size;
    strides[i] = stride;
  }
  checked_numel(sizes, "expand");
  return {with_geometry(x, std::move(sizes), std::move(strides))};
}

std::vector<TensorMeta> infer_slice(std::span<const TensorMeta> in, const Attrs& a) {
  const TensorMeta& x = in[0];
  SliceGeometry g = slice_geometry(x.sizes, strides_of(x), a.i(0), a.i(1), a.i(2), a.i(3));
  return {with_geometry(x, std::move(g.sizes), std::move(g.strides))};
}

} // namespace ops
} // namespace kiln
