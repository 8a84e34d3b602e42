// Kernels of the data-movement primitives: cat, index_select, gather, scatter and pad.
// Each moves elements as opaque words (no dtype arithmetic) except where a dtype changes.
#include <cstring>
#include <vector>

#include "runtime/kernels/convert.h"
#include "runtime/kernels/copy.h"
#include "runtime/ops/dispatch.h"
#include "runtime/parallel.h"

namespace kiln::ops {
namespace {

/// A view of t's storage (used to address parts of a kernel's output or input).
Tensor part_of(const Tensor& t, IntList sizes, IntList strides, int64_t extra_offset) {
  return make_view(t, sizes, strides, t.storage_offset() + extra_offset);
}

/// t itself when contiguous, else a contiguous copy of it (kernel-internal scratch).
Tensor dense_copy(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype && t.is_contiguous()) return t;
  Tensor c = make_tensor(t.sizes(), dtype, t.device());
  kernels::copy_into(c, t);
  return c;
}

/// The index tensor's values as i64, row-major.
std::vector<int64_t> index_values(const Tensor& index) {
  Tensor c = dense_copy(index, DType::i64);
  const auto* p = static_cast<const int64_t*>(c.numel() ? c.raw_data() : nullptr);
  return std::vector<int64_t>(p, p + c.numel());
}

/// Checks an index lies in [0, n): like PyTorch's index_select/gather/scatter, negative
/// indices are errors here, not counted from the end.
int64_t checked_index(int64_t i, int64_t n, int64_t dim, const char* op) {
  KILN_CHECK(i >= 0 && i < n, op, ": index ", i, " is out of range for dim ", dim, " of size ", n);
  return i;
}

/// Calls fn(Word{}) with an unsigned word type of the element width.
template <typename Fn> void visit_word(int64_t itemsize, Fn&& fn) {
  switch (itemsize) {
  case 1: fn(uint8_t{}); return;
  case 2: fn(uint16_t{}); return;
  case 4: fn(uint32_t{}); return;
  case 8: fn(uint64_t{}); return;
  default: KILN_UNREACHABLE("unexpected element size");
  }
}

/// Visits the row-major positions [b, e) of `sizes`, calling fn(k, off_a, off_b) with the
/// element offsets of position k under strides `sa` (leaving out dim `skip`, whose
/// contribution comes from an index value) and `sb`.
template <typename Fn>
void walk_offsets(IntList sizes, IntList sa, IntList sb, int64_t skip, int64_t b, int64_t e,
                  Fn&& fn) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  std::vector<int64_t> stride_a(sa.begin(), sa.end());
  if (skip >= 0) stride_a[static_cast<size_t>(skip)] = 0;
  int64_t oa = 0, ob = 0, rem = b;
  for (int64_t d = rank - 1; d >= 0; --d) {
    idx[d] = rem % sizes[d];
    rem /= sizes[d];
    oa += idx[d] * stride_a[d];
    ob += idx[d] * sb[static_cast<size_t>(d)];
  }
  for (int64_t k = b; k < e; ++k) {
    fn(k, oa, ob);
    for (int64_t d = rank - 1; d >= 0; --d) {
      oa += stride_a[d];
      ob += sb[static_cast<size_t>(d)];
      if (++idx[d] < sizes[d]) break;
      oa -= sizes[d] * stride_a[d];
      ob -= sizes[d] * sb[static_cast<size_t>(d)];
      idx[d] = 0;
    }
  }
}

} // namespace

void kernel_cat(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  Tensor& o = out[0];
  if (o.numel() == 0) return;
  const int64_t dim = wrap_dim(a.i(0), o.dim(), "cat");
  int64_t at = 0;
  for (const Tensor& t : in) {
    if (t.dim() == 1 && t.size(0) == 0) continue; // skipped, as in inference
    Tensor dst = part_of(o, t.sizes(), o.strides(), at * o.stride(dim));
    kernels::copy_into(dst, t);
    at += t.size(dim);
  }
}

void kernel_index_select(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  const Tensor& x = in[0];
  Tensor& o = out[0];
  const int64_t dim = wrap_dim(a.i(0), x.dim(), "index_select");
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  std::vector<int64_t> idx = index_values(in[1]);
  for (int64_t& i : idx)
    i = checked_index(i, n, dim, "index_select");
  if (o.numel() == 0) return;
  // As [outer, n, inner] → [outer, k, inner]: one memcpy of `inner` elements per row.
  Tensor xc = dense_copy(x, x.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < dim) outer *= x.size(d);
    if (d > dim) inner *= x.size(d);
  }
  const int64_t k = static_cast<int64_t>(idx.size());
  const int64_t row_bytes = inner * x.itemsize();
  const char* src = static_cast<const char*>(xc.raw_data());
  char* dst = static_cast<char*>(o.raw_data());
  parallel_for(0, outer * k, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   int64_t ob = r / k, j = r % k;
                   std::memcpy(dst + r * row_bytes, src + (ob * n + idx[j]) * row_bytes,
                               static_cast<size_t>(row_bytes));
                 }
               });
}

void kernel_gather(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  const Tensor& x = in[0];
  Tensor& o = out[0];
  const int64_t dim = wrap_dim(a.i(0), x.dim(), "gather");
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  std::vector<int64_t> idx = index_values(in[1]);
  for (int64_t& i : idx)
    i = checked_index(i, n, dim, "gather");
  if (o.numel() == 0) return;
  // Output positions share the index's shape; x is addressed through its own strides.
  const int64_t skip = x.dim() == 0 ? -1 : dim;
  const int64_t dim_stride = x.dim() == 0 ? 0 : x.stride(dim);
  visit_word(x.itemsize(), [&](auto word) {
    using Word = decltype(word);
    const auto* src = static_cast<const Word*>(x.raw_data());
    auto* dst = static_cast<Word*>(o.raw_data());
    parallel_for(0, o.numel(), kParallelGrain, [&](int64_t b, int64_t e) {
      walk_offsets(o.sizes(), x.strides(), o.strides(), skip, b, e,
                   [&](int64_t k, int64_t x_off, int64_t) {
                     dst[k] = src[x_off + idx[static_cast<size_t>(k)] * dim_stride];
                   });
    });
  });
}

void kernel_scatter(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  const Tensor& x = in[0];
  const Tensor& index = in[1];
  const Tensor& src = in[2];
  Tensor& o = out[0];
  const int64_t dim = wrap_dim(a.i(0), x.dim(), "scatter");
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  std::vector<int64_t> idx = index_values(index);
  for (int64_t& i : idx)
    i = checked_index(i, n, dim, "scatter");
  kernels::copy_into(o, x);
  if (idx.empty()) return;
  const int64_t skip = x.dim() == 0 ? -1 : dim;
  const int64_t dim_stride = x.dim() == 0 ? 0 : o.stride(dim);
  visit_word(x.itemsize(), [&](auto word) {
    using Word = decltype(word);
    const auto* s = static_cast<const Word*>(src.raw_data());
    auto* d = static_cast<Word*>(o.raw_data());
    // Serial, in row-major index order: with repeated targets the last write wins, always.
    walk_offsets(index.sizes(), o.strides(), src.strides(), skip, 0, index.numel(),
                 [&](int64_t k, int64_t o_off, int64_t s_off) {
                   d[o_off + idx[static_cast<size_t>(k)] * dim_stride] = s[s_off];
                 });
  });
}

void kernel_pad(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  const Tensor& x = in[0];
  Tensor& o = out[0];
  const std::vector<int64_t>& pads = a.ints(0);
  const double value = a.f(1);
  if (o.numel() == 0) return;
  visit_dtype(o.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T v = kernels::convert<T, double>(value);
    T* p = static_cast<T*>(o.raw_data());
    parallel_for(0, o.numel(), kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k)
        p[k] = v;
    });
  });
  // The input region that survives (negative pads crop) and where it lands in the output.
  Shape sizes = x.sizes();
  int64_t src_off = 0, dst_off = 0;
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    size_t d = static_cast<size_t>(x.dim()) - 1 - i;
    int64_t left = pads[2 * i], right = pads[2 * i + 1];
    int64_t crop_l = std::max<int64_t>(0, -left), crop_r = std::max<int64_t>(0, -right);
    sizes[d] = std::max<int64_t>(0, x.sizes()[d] - crop_l - crop_r);
    src_off += crop_l * x.strides()[d];
    dst_off += std::max<int64_t>(0, left) * o.strides()[d];
  }
  if (numel_of(sizes) == 0) return;
  kernels::copy_into(part_of(o, sizes, o.strides(), dst_off),
                     part_of(x, sizes, x.strides(), src_off));
}

} // namespace kiln::ops
