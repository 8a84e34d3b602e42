// The strided, converting element copy behind the copy primitive, shared with the other
// kernels that move elements (reductions, data movement). Conversions follow convert.h.
#pragma once

#include "runtime/tensor.h"

namespace kiln::kernels {

/// dst[i] = src[i] converted to dst's dtype (kernels::convert), with src broadcast to dst's
/// shape; both may have any strides. The caller guarantees they do not overlap in memory.
void copy_into(const Tensor& dst, const Tensor& src);

} // namespace kiln::kernels
