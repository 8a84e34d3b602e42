// Inference of the data-movement primitives: copy, cat, index_select, gather, scatter, pad.
#include <vector>

#include "runtime/error.h"
#include "runtime/ops/op.h"

namespace kiln::ops {
namespace {

void check_index_dtype(const TensorMeta& index, const char* op) {
  KILN_CHECK(index.dtype == DType::i64 || index.dtype == DType::i32, op,
             ": expected an i64 or i32 index, got ", index.dtype, " (index shape ",
             shape_str(index.sizes), ")");
}

/// PyTorch's cat skips 1-d empty tensors whatever the other shapes are (legacy behaviour).
bool skipped_by_cat(const TensorMeta& t) { return t.sizes.size() == 1 && t.sizes[0] == 0; }

int64_t rank_of(const TensorMeta& t) { return static_cast<int64_t>(t.sizes.size()); }

/// gather/scatter: outside `dim`, the index may not be larger than the input.
void check_index_within_input(const TensorMeta& index, const TensorMeta& x, int64_t dim,
                              const char* op) {
  for (int64_t d = 0; d < rank_of(x); ++d) {
    KILN_CHECK(d == dim || index.sizes[d] <= x.sizes[d], op, ": the index's size ", index.sizes[d],
               " in dim ", d, " exceeds the input's size ", x.sizes[d], " (index shape ",
               shape_str(index.sizes), ", input shape ", shape_str(x.sizes), ", dim ", dim, ")");
  }
}

} // namespace

std::vector<TensorMeta> infer_copy(std::span<const TensorMeta> in, const Attrs&) {
  return {TensorMeta::dense(in[0], in[0].sizes, in[0].dtype)};
}

std::vector<TensorMeta> infer_cat(std::span<const TensorMeta> in, const Attrs& a) {
  DType dtype = in[0].dtype;
  for (size_t i = 1; i < in.size(); ++i)
    dtype = promote_types(dtype, in[i].dtype);
  const TensorMeta* ref = nullptr;
  size_t ref_index = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    KILN_CHECK(!in[i].sizes.empty(), "cat: zero-dimensional tensor (at position ", i,
               ") cannot be concatenated");
    if (!ref && !skipped_by_cat(in[i])) {
      ref = &in[i];
      ref_index = i;
    }
  }
  if (!ref) return {TensorMeta::dense(in[0], {0}, dtype)}; // every input is a 1-d empty tensor
  const int64_t rank = rank_of(*ref);
  const int64_t dim = wrap_dim(a.i(0), rank, "cat");
  Shape sizes = ref->sizes;
  sizes[dim] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (skipped_by_cat(in[i])) continue;
    KILN_CHECK(rank_of(in[i]) == rank, "cat: tensors must have the same number of dims; tensor ",
               ref_index, " has shape ", shape_str(ref->sizes), " but tensor ", i, " has shape ",
               shape_str(in[i].sizes));
    for (int64_t d = 0; d < rank; ++d) {
      if (d == dim) continue;
      KILN_CHECK(in[i].sizes[d] == ref->sizes[d], "cat: sizes of tensors must match except in dim ",
                 dim, "; expected size ", ref->sizes[d], " but got size ", in[i].sizes[d],
                 " in dim ", d, " for tensor ", i, " (shapes ", shape_str(ref->sizes), " and ",
                 shape_str(in[i].sizes), ")");
    }
    sizes[dim] += in[i].sizes[dim];
  }
  return {TensorMeta::dense(*ref, std::move(sizes), dtype)};
}

std::vector<TensorMeta> infer_index_select(std::span<const TensorMeta> in, const Attrs& a) {
  const TensorMeta& x = in[0];
  const TensorMeta& index = in[1];
  const int64_t dim = wrap_dim(a.i(0), rank_of(x), "index_select");
  check_index_dtype(index, "index_select");
  KILN_CHECK(index.sizes.size() <= 1, "index_select: the index must be 1-d or 0-d, got shape ",
             shape_str(index.sizes));
  const int64_t k = numel_of(index.sizes);
  if (x.sizes.empty()) {
    KILN_CHECK(k == 1, "index_select: a 0-d input takes an index of one element, got shape ",
               shape_str(index.sizes));
    return {TensorMeta::dense(x, {}, x.dtype)};
  }
  Shape sizes = x.sizes;
  sizes[dim] = k;
  return {TensorMeta::dense(x, std::move(sizes), x.dtype)};
}

std::vector<TensorMeta> infer_gather(std::span<const TensorMeta> in, const Attrs& a) {
  const TensorMeta& x = in[0];
  const TensorMeta& index = in[1];
  const int64_t dim = wrap_dim(a.i(0), rank_of(x), "gather");
  check_index_dtype(index, "gather");
  KILN_CHECK(rank_of(index) == rank_of(x),
             "gather: the index must have as many dims as the "
             "input; index shape ",
             shape_str(index.sizes), ", input shape ", shape_str(x.sizes));
  check_index_within_input(index, x, dim, "gather");
  return {TensorMeta::dense(x, index.sizes, x.dtype)};
}

std::vector<TensorMeta> infer_scatter(std::span<const TensorMeta> in, const Attrs& a) {
  const TensorMeta& x = in[0];
  const TensorMeta& index = in[1];
  const TensorMeta& src = in[2];
  const int64_t dim = wrap_dim(a.i(0), rank_of(x), "scatter");
  check_index_dtype(index, "scatter");
  KILN_CHECK(src.dtype == x.dtype, "scatter: expected src to have the input's dtype ", x.dtype,
             ", got ", src.dtype);
  KILN_CHECK(rank_of(index) == rank_of(x) && rank_of(src) == rank_of(x),
             "scatter: input, index and src must have the same number of dims; shapes ",
             shape_str(x.sizes), ", ", shape_str(index.sizes), " and ", shape_str(src.sizes));
  for (int64_t d = 0; d < rank_of(x); ++d) {
    KILN_CHECK(index.sizes[d] <= src.sizes[d], "scatter: the index's size ", index.sizes[d],
               " in dim ", d, " exceeds src's size ", src.sizes[d], " (index shape ",
               shape_str(index.sizes), ", src shape ", shape_str(src.sizes), ")");
  }
  check_index_within_input(index, x, dim, "scatter");
  return {TensorMeta::dense(x, x.sizes, x.dtype)};
}

std::vector<TensorMeta> infer_pad(std::span<const TensorMeta> in, const Attrs& a) {
  const TensorMeta& x = in[0];
  const std::vector<int64_t>& pads = a.ints(0);
  const int64_t rank = rank_of(x);
  KILN_CHECK(pads.size() % 2 == 0, "pad: expected (left, right) pairs, got ", pads.size(),
             " pad values ", shape_str(pads));
  KILN_CHECK(static_cast<int64_t>(pads.size() / 2) <= rank, "pad: ", pads.size() / 2,
             " padded dims requested ", shape_str(pads), " but the input has only ", rank,
             " dims (shape ", shape_str(x.sizes), ")");
  Shape sizes = x.sizes;
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    size_t d = static_cast<size_t>(rank) - 1 - i;
    int64_t n = 0;
    KILN_CHECK(!__builtin_add_overflow(x.sizes[d], pads[2 * i], &n) &&
                   !__builtin_add_overflow(n, pads[2 * i + 1], &n) && n >= 0,
               "pad: size ", x.sizes[d], " of dim ", d, " plus padding (", pads[2 * i], ", ",
               pads[2 * i + 1], ") gives a negative size (input shape ", shape_str(x.sizes), ")");
    // Like PyTorch (which narrows the input by the negative pads), a crop may not remove more
    // than the dim holds, even when positive padding on the other side would restore the size.
    int64_t kept = x.sizes[d];
    if (pads[2 * i] < 0) kept += pads[2 * i];
    if (kept >= 0 && pads[2 * i + 1] < 0) kept += pads[2 * i + 1];
    KILN_CHECK(kept >= 0, "pad: negative padding (", pads[2 * i], ", ", pads[2 * i + 1],
               ") crops more than the size ", x.sizes[d], " of dim ", d, " (input shape ",
               shape_str(x.sizes), ")");
    sizes[d] = n;
  }
  checked_numel(sizes, "pad");
  return {TensorMeta::dense(x, std::move(sizes), x.dtype)};
}

} // namespace kiln::ops
