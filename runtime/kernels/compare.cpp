// Eager kernels of the comparisons (eq, ne, lt, le, gt, ge) and logical_and/or: bool results,
// comparisons done in the promoted dtype of the operands.
#include "runtime/kernels/binary_loop.h"
#include "runtime/ops/dispatch.h"
#include "runtime/ops/op.h"

namespace kiln::ops {
namespace {

/// A comparison as the set of orderings it accepts, so that all six share one compiled loop
/// per dtype: x < y, x == y, x > y (each false when a NaN is involved), then optionally
/// inverted (ne is "not eq", hence true for NaN).
struct Relation {
  bool lt, eq, gt, invert;
};

/// Compares in result_type(a, b) (so i32 vs 2.5 compares as f32), writing bool.
void compare(std::span<const Tensor> in, std::span<Tensor> out, Relation r) {
  DType common = result_type(std::vector<TensorMeta>{TensorMeta::of(in[0]), TensorMeta::of(in[1])});
  visit_dtype(common, [&](auto tag) {
    using T = decltype(tag);
    // Bitwise, not short-circuit, so the loop stays branch-free and vectorises.
    kernels::binary_loop<T, bool>(out[0], in[0], in[1], false, [r](auto x, auto y) {
      bool lt = x < y, eq = x == y, gt = y < x;
      return ((r.lt & lt) | (r.eq & eq) | (r.gt & gt)) != r.invert;
    });
  });
}

} // namespace

void kernel_eq(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  compare(in, out, {false, true, false, false});
}
void kernel_ne(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  compare(in, out, {false, true, false, true});
}
void kernel_lt(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  compare(in, out, {true, false, false, false});
}
void kernel_le(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  compare(in, out, {true, true, false, false});
}
void kernel_gt(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  compare(in, out, {false, false, true, false});
}
void kernel_ge(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  compare(in, out, {false, true, true, false});
}

// Each operand is first cast to bool (x != 0, so NaN is true).
void kernel_logical_and(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  kernels::binary_loop<bool, bool>(out[0], in[0], in[1], false,
                                   [](bool x, bool y) { return x && y; });
}
void kernel_logical_or(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  kernels::binary_loop<bool, bool>(out[0], in[0], in[1], false,
                                   [](bool x, bool y) { return x || y; });
}

} // namespace kiln::ops
