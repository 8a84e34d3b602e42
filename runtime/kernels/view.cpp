// Kernels of the view primitives: each result aliases the input's storage with the geometry
// that inference computed (so both always agree).
#include "runtime/ops/dispatch.h"
#include "runtime/ops/view_geometry.h"

namespace kiln::ops {
namespace {

/// Sets out[0] to a view of in[0] with the inferred sizes and strides, shifted by `offset`.
void alias_inferred(std::vector<TensorMeta> (*infer)(std::span<const TensorMeta>, const Attrs&),
                    std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out,
                    int64_t offset = 0) {
  TensorMeta m = TensorMeta::of(in[0]);
  TensorMeta r = infer(std::span<const TensorMeta>(&m, 1), a)[0];
  out[0] = make_view(in[0], r.sizes, r.strides, in[0].storage_offset() + offset);
}

} // namespace

void kernel_view(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  alias_inferred(infer_view, in, a, out);
}

void kernel_permute(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  alias_inferred(infer_permute, in, a, out);
}

void kernel_expand(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  alias_inferred(infer_expand, in, a, out);
}

void kernel_slice(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  const Tensor& x = in[0];
  SliceGeometry g = slice_geometry(x.sizes(), x.strides(), a.i(0), a.i(1), a.i(2), a.i(3));
  out[0] = make_view(x, g.sizes, g.strides, x.storage_offset() + g.offset);
}

} // namespace kiln::ops
