// View geometry shared by the view primitives' inference, their kernels and reshape: -1
// inference, PyTorch's computeStride, and slice bounds.
#pragma once

#include <optional>

#include "runtime/shape.h"

namespace kiln {

/// Resolves one -1 in `sizes` against the element count of `input_sizes` and checks the
/// counts match; throws naming `op`, the requested sizes and the input shape.
Shape infer_view_sizes(IntList sizes, IntList input_sizes, const char* op);

/// Strides that let `new_sizes` view a tensor of `old_sizes`/`old_strides` without copying
/// (PyTorch's computeStride: dims are merged or split only where they are contiguous
/// relative to each other), or nullopt when no such strides exist.
std::optional<Shape> view_strides(IntList old_sizes, IntList old_strides, IntList new_sizes);

/// The result of slicing one dim: new sizes and strides, and the element offset to add.
struct SliceGeometry {
  Shape sizes;
  Shape strides;
  int64_t offset = 0;
};

/// a.slice(dim, start, end, step) with Python's clamping of start/end (negative values count
/// from the end); throws for a 0-d input or step <= 0.
SliceGeometry slice_geometry(IntList sizes, IntList strides, int64_t dim, int64_t start,
                             int64_t end, int64_t step);

} // namespace kiln
